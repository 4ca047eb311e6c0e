// Package access is who may buy in a sale (issue 45, docs/codes.md): every
// signed-in buyer, only the holders of a presale code, or, in a sale with a
// waiting room, everyone with code holders admitted first; and the codes
// themselves, as the operator gives them and as the stores keep them.
//
// A code is never stored as it was given: MySQL and Redis keep its Digest,
// an HMAC under a key every instance shares, so neither store's copy tells
// anyone a code, and a shop's own short codes cannot be found by hashing
// guesses offline.
package access

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/seckill/seckill/pkg/domain/order"
)

// Mode is whom a sale takes orders, entries and room joins from.
type Mode string

// The modes a sale may have.
const (
	// Open takes every signed-in buyer (a sale's default).
	Open Mode = "open"
	// CodeRequired takes only requests carrying a valid code: every
	// order, draw entry and room join names one, and an order or entry
	// uses one of its uses.
	CodeRequired Mode = "code_required"
	// CodePriority (a sale with a waiting room only) takes everyone, and
	// admits the buyers who joined with a valid code before everyone who
	// joined without one.
	CodePriority Mode = "code_priority"
)

// ParseMode reads a sale's access setting; "" is Open.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return Open, nil
	case Open, CodeRequired, CodePriority:
		return m, nil
	}
	return "", order.Errorf(order.ErrInvalidArgument, "access must be one of open, code_required, code_priority")
}

// Coded reports whether the mode reads codes at all.
func (m Mode) Coded() bool { return m == CodeRequired || m == CodePriority }

// The answers a request with a missing or unusable code gets. One answer
// covers a code that never existed, one revoked and one bound to another
// buyer: a guesser learns nothing from which.
var (
	// ErrCodeRequired: the sale takes only requests with a code (403).
	ErrCodeRequired = errors.New("access code required")
	// ErrCodeInvalid: no code of the sale's that this buyer may use (403).
	ErrCodeInvalid = errors.New("access code invalid")
	// ErrCodeUsed: the code's uses are all taken by live orders or
	// entries (409); one comes back when such an order ends unsold.
	ErrCodeUsed = errors.New("access code used")
	// ErrTooManyGuesses: too many invalid codes from this buyer or
	// address lately (429).
	ErrTooManyGuesses = errors.New("too many invalid access codes")
)

// Bounds of what an operator may ask for.
const (
	// MaxCodesPerRequest is the most codes one request generates or takes.
	MaxCodesPerRequest = 100_000
	// MaxUses is the most uses one code may have.
	MaxUses = 1_000_000
	// MinCodeLen and MaxCodeLen bound a code after Normalize.
	MinCodeLen, MaxCodeLen = 4, 64
	// MaxSubjectLen is the longest buyer subject a code may be bound to
	// (the users' subject column).
	MaxSubjectLen = 512
)

// Normalize returns the form of a code that is hashed: spaces and hyphens
// dropped and letters upper-cased, so "abcd-efgh" and "ABCDEFGH" are one
// code. What is left must be MinCodeLen to MaxCodeLen ASCII letters,
// digits, '_' or '.'; anything else is ErrInvalidArgument naming the rule.
func Normalize(code string) (string, error) {
	var b strings.Builder
	b.Grow(len(code))
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case c == ' ' || c == '-':
			continue
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.':
		default:
			return "", order.Errorf(order.ErrInvalidArgument, "an access code may hold only letters, digits, '_', '.', '-' and spaces")
		}
		if b.Len() == MaxCodeLen {
			return "", order.Errorf(order.ErrInvalidArgument, "an access code has %d to %d letters and digits (hyphens and spaces not counted)", MinCodeLen, MaxCodeLen)
		}
		b.WriteByte(c)
	}
	if b.Len() < MinCodeLen {
		return "", order.Errorf(order.ErrInvalidArgument, "an access code has %d to %d letters and digits (hyphens and spaces not counted)", MinCodeLen, MaxCodeLen)
	}
	return b.String(), nil
}

// Digest is what the stores keep of a code: 32 hex digits.
type Digest string

// DigestLen is the length of a Digest.
const DigestLen = 32

// Hash is the digest of code (Normalize'd) in sale under key (the order
// number key, shared by every instance): the first 128 bits of
// HMAC-SHA256(key, "code|<sale>|<code>"). The sale is in it, so one code
// string given to two sales is two codes.
func Hash(key []byte, sale int64, normalized string) Digest {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("code|" + strconv.FormatInt(sale, 10) + "|" + normalized))
	return Digest(hex.EncodeToString(m.Sum(nil)[:DigestLen/2]))
}

// ParseDigest checks a digest read back from a store.
func ParseDigest(s string) (Digest, error) {
	if len(s) != DigestLen {
		return "", errors.New("access: digest of " + strconv.Itoa(len(s)) + " characters")
	}
	if _, err := hex.DecodeString(s); err != nil {
		return "", errors.New("access: digest not hex")
	}
	return Digest(s), nil
}

// generatedAlphabet is Crockford's base32: no I, L, O or U, so a code read
// aloud or typed from paper is not mistaken.
const generatedAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// GeneratedLen is the letters of a generated code: 16 of 32 symbols, 80
// random bits.
const GeneratedLen = 16

// Generate returns a new random code, "XXXX-XXXX-XXXX-XXXX" (80 bits from
// crypto/rand), whose Normalize form is its 16 letters and digits.
func Generate() (string, error) {
	var raw [GeneratedLen]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return formatGenerated(raw[:]), nil
}

// formatGenerated writes the low five bits of each of GeneratedLen bytes
// as a symbol of generatedAlphabet, in groups of four.
func formatGenerated(raw []byte) string {
	out := make([]byte, 0, GeneratedLen+3)
	for i, r := range raw[:GeneratedLen] {
		if i > 0 && i%4 == 0 {
			out = append(out, '-')
		}
		out = append(out, generatedAlphabet[r&31])
	}
	return string(out)
}

// Code is one code of a sale as MySQL keeps it (table sale_codes).
type Code struct {
	Digest Digest
	// Uses is how many orders (or draw entries) may hold it at once.
	Uses int
	// Used is how many live orders and entries hold it in MySQL: the
	// consumer's transaction that creates an order takes a use, and the
	// one that ends it unsold (failed, closed unpaid, cancelled) gives
	// it back.
	Used int
	// Subject is the only buyer who may use it; "" for anyone.
	Subject string
	// Revoked codes are refused as if they never existed.
	Revoked bool
}

// Left is the uses not held.
func (c Code) Left() int {
	if c.Used >= c.Uses {
		return 0
	}
	return c.Uses - c.Used
}

// The sale's codes in Redis are one hash in the sale's slot (stockredis
// Keys.Codes): the field LoadedField says the hash was loaded from MySQL
// (without it the codes are not warmed, as a missing stock key is not),
// and each usable code is a field named by its digest whose value is
// RedisValue. A revoked code has no field.
const LoadedField = "."

// RedisValue is the code's field value in Redis: "<left>|<subject>".
func (c Code) RedisValue() string {
	return strconv.Itoa(c.Left()) + "|" + c.Subject
}

// CheckUses refuses a uses count out of [1, MaxUses].
func CheckUses(uses int) error {
	if uses < 1 || uses > MaxUses {
		return order.Errorf(order.ErrInvalidArgument, "uses must be from 1 to %d", MaxUses)
	}
	return nil
}
