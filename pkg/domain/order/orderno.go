package order

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"hash"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// NumberGenerator makes order numbers "<ULID>-<tag>": a ULID (26
// characters, a millisecond timestamp then 80 bits) so numbers sort by time
// and are unique across API instances without coordination, and the sale's tag
// (its first item's id, Activity.ItemID: the order's item in a sale of one
// item) so every program can find the order's Redis keys (they live under
// that hash tag) from the number alone. Numbers from one generator are
// strictly increasing in their ULID part. Safe for concurrent use.
//
// A signed generator (NewSignedNumberGenerator) splits the 80 bits into 48
// bits drawn at random (in the lower half of their range, leaving room to
// count) for each new millisecond and incremented within it,
// and a 32-bit tag: the first 4 bytes of HMAC-SHA256(key, time, the 48
// bits, item id, user id). Issued tells a number it made for a user from
// one it never made, without storing anything: an accepted order whose
// reservation Redis lost is still the buyer's PENDING order.
type NumberGenerator struct {
	mu   sync.Mutex
	last monotonic // unsigned only

	key    []byte
	macs   sync.Pool // of *signer: HMAC-SHA256 with key
	rnd    *mrand.ChaCha8
	lastMs uint64
	seq    uint64 // the 48 bits of lastMs's last number
}

// NewNumberGenerator returns an unsigned generator (for tests and the
// bench) seeded from crypto/rand: Issued never vouches for its numbers.
func NewNumberGenerator() *NumberGenerator {
	return &NumberGenerator{}
}

// NumberKeySize is the size of a signing key (orderdb.DB.OrderNumberKey).
const NumberKeySize = 32

// NewSignedNumberGenerator returns a generator that signs its numbers with
// key, which every API instance shares.
func NewSignedNumberGenerator(key []byte) (*NumberGenerator, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("order number key: %d bytes, want at least 16", len(key))
	}
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("order number generator seed: %w", err)
	}
	g := &NumberGenerator{key: bytes.Clone(key), rnd: mrand.NewChaCha8(seed)}
	g.macs.New = func() any {
		return &signer{mac: hmac.New(sha256.New, g.key), buf: make([]byte, 0, 96), sum: make([]byte, 0, sha256.Size)}
	}
	return g, nil
}

// Next returns a new order number for an order of item: unsigned, or, from
// a signed generator, signed for no user (use NextFor).
func (g *NumberGenerator) Next(item int64) string {
	if g.key != nil {
		return g.NextFor(item, "")
	}
	g.mu.Lock()
	id := g.last.next(ulidTime(time.Now()))
	g.mu.Unlock()
	return id.String() + "-" + strconv.FormatInt(item, 10)
}

// NextFor returns a new order number for user's order of item, signed when
// g has a key.
func (g *NumberGenerator) NextFor(item int64, user string) string {
	if g.key == nil {
		return g.Next(item)
	}
	return g.nextAt(item, user, time.Now())
}

func (g *NumberGenerator) nextAt(item int64, user string, now time.Time) string {
	var id ulid
	ms, seq := g.advance(ulidTime(now))
	if !id.setTime(ms) {
		panic("order number: a clock past the year 10889")
	}
	putUint48(id[6:12], seq)
	g.tag(id[12:16], id[:12], item, user)
	return id.String() + "-" + strconv.FormatInt(item, 10)
}

const max48 = 1<<48 - 1

// advance returns the time and the 48 bits of the next number: random for
// a new millisecond, the last plus one within it. A clock that steps back
// keeps the last millisecond, and the bits running out move to the next
// one, so numbers stay strictly increasing.
func (g *NumberGenerator) advance(now uint64) (ms, seq uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now <= g.lastMs {
		if g.seq < max48 {
			g.seq++
			return g.lastMs, g.seq
		}
		now = g.lastMs + 1
	}
	// Half the range: a millisecond then has 2^47 numbers at least.
	g.lastMs, g.seq = now, g.rnd.Uint64()&(max48>>1)
	return g.lastMs, g.seq
}

// signer is one HMAC with its buffers, pooled so a tag allocates nothing.
type signer struct {
	mac hash.Hash
	buf []byte
	sum []byte
}

// tag writes the first 4 bytes of HMAC-SHA256(key, head, item, user) to dst.
func (g *NumberGenerator) tag(dst, head []byte, item int64, user string) {
	s := g.macs.Get().(*signer)
	s.mac.Reset()
	s.buf = append(append(s.buf[:0], head...), 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint64(s.buf[len(head):], uint64(item))
	s.buf = append(s.buf, user...)
	s.mac.Write(s.buf)
	s.sum = s.mac.Sum(s.sum[:0])
	copy(dst, s.sum)
	g.macs.Put(s)
}

// Issued reports whether orderNo is a number g made for user (its tag
// matches, compared in constant time). False for an unsigned generator,
// another user, another item, or any character changed.
func (g *NumberGenerator) Issued(orderNo, user string) bool {
	if g == nil || g.key == nil || !ValidOrderNo(orderNo) {
		return false
	}
	id, ok := parseULID(orderNo[:ulidLen])
	if !ok {
		return false
	}
	var want [4]byte
	g.tag(want[:], id[:12], TagOf(orderNo), user)
	return subtle.ConstantTimeCompare(want[:], id[12:16]) == 1
}

// NumberTime returns the time an order number was made (its ULID time),
// and false if orderNo is not an order number.
func NumberTime(orderNo string) (time.Time, bool) {
	if !ValidOrderNo(orderNo) {
		return time.Time{}, false
	}
	id, ok := parseULID(orderNo[:ulidLen])
	if !ok {
		return time.Time{}, false
	}
	return timeOfULID(id.time()), true
}

// Recent reports whether orderNo was made within KeyMargin of now, either
// way: an order of a number that old may still be on its way (every record
// the programs keep of a sale outlives it by KeyMargin).
func Recent(orderNo string, now time.Time) bool {
	at, ok := NumberTime(orderNo)
	if !ok {
		return false
	}
	age := now.Sub(at)
	return age <= KeyMargin && age >= -KeyMargin
}

func putUint48(b []byte, v uint64) {
	_ = b[5]
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

// ValidOrderNo reports whether s has the form of an order number: a ULID
// (26 characters of Crockford's base32, the first 0-7) and the item id
// (1-18 digits, no leading zero) after a dash; the regular expression
// ^[0-7][0-9A-HJKMNP-TV-Z]{25}-[1-9][0-9]{0,17}$ (the fuzz test holds the
// two to the same answers). Checked byte by byte: every event and every
// order look-up asks, and the expression would cost a consumer 6 % of its
// CPU.
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

// TagOf returns the id an order number carries, or 0 if s is not an
// order number: the sale's tag, its first item (Activity.ItemID), whose
// hash tag the order's Redis keys share. For a sale of one item it is the
// order's item.
func TagOf(s string) int64 {
	if !ValidOrderNo(s) {
		return 0
	}
	n, err := strconv.ParseInt(s[strings.IndexByte(s, '-')+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}
