package order

import (
	"crypto/rand"
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

// ValidOrderNo reports whether s has the form of an order number: a ULID
// (26 characters of Crockford's base32, the first 0-7) and the item id
// (1-18 digits, no leading zero) after a dash; the regular expression
// ^[0-7][0-9A-HJKMNP-TV-Z]{25}-[1-9][0-9]{0,17}$ (the fuzz test holds the
// two to the same answers). Checked byte by byte: every event and every
// order look-up asks, and the expression cost a consumer 6 % of its CPU.
func ValidOrderNo(s string) bool {
	if len(s) < 28 || len(s) > 45 || s[0] < '0' || s[0] > '7' || s[26] != '-' || s[27] < '1' || s[27] > '9' {
		return false
	}
	for i := 1; i < 26; i++ {
		if !crockford(s[i]) {
			return false
		}
	}
	for i := 28; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// crockford reports whether c is a digit of Crockford's base32 in upper
// case (no I, L, O or U).
func crockford(c byte) bool {
	switch {
	case c >= '0' && c <= '9':
		return true
	case c < 'A' || c > 'Z':
		return false
	}
	return c != 'I' && c != 'L' && c != 'O' && c != 'U'
}

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
