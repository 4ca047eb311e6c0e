package order

import (
	"crypto/rand"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// NumberGenerator makes order numbers "<ULID>-<item id>": a ULID (26
// characters, a millisecond timestamp then 80 random bits) so numbers sort
// by time and are unique across API instances without coordination, and the
// item id so every program can find the order's Redis keys (they live under
// the item's hash tag) from the number alone. Numbers from one generator
// are strictly increasing in their ULID part. Safe for concurrent use.
type NumberGenerator struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
}

// NewNumberGenerator returns a generator seeded from crypto/rand.
func NewNumberGenerator() *NumberGenerator {
	return &NumberGenerator{entropy: ulid.Monotonic(rand.Reader, 0)}
}

// Next returns a new order number for an order of item.
func (g *NumberGenerator) Next(item int64) string {
	g.mu.Lock()
	id := ulid.MustNew(ulid.Timestamp(time.Now()), g.entropy)
	g.mu.Unlock()
	return id.String() + "-" + strconv.FormatInt(item, 10)
}

var orderNoRE = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}-[1-9][0-9]{0,17}$`)

// ValidOrderNo reports whether s has the form of an order number.
func ValidOrderNo(s string) bool { return orderNoRE.MatchString(s) }

// ItemOf returns the item id an order number carries, or 0 if s is not an
// order number.
func ItemOf(s string) int64 {
	if !ValidOrderNo(s) {
		return 0
	}
	n, err := strconv.ParseInt(s[strings.IndexByte(s, '-')+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}
