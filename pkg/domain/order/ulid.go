package order

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

// ulid is the first part of an order number: a ULID (the spec at
// github.com/ulid/spec), 48 bits of Unix milliseconds then 80 bits, big
// endian, written as 26 characters of Crockford's base32, the first 0-7
// (130 bits hold 128).
type ulid [16]byte

// ulidLen is the length of a ULID written out.
const ulidLen = 26

// maxULIDTime is the last millisecond a ULID holds (the year 10889).
const maxULIDTime = 1<<48 - 1

// crockfordDigits are Crockford's base32 digits, by value.
const crockfordDigits = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulidTime is t as a ULID's time: Unix milliseconds.
func ulidTime(t time.Time) uint64 {
	return uint64(t.Unix())*1000 + uint64(t.Nanosecond()/int(time.Millisecond))
}

// timeOfULID is the time of ms, a ULID's Unix milliseconds.
func timeOfULID(ms uint64) time.Time {
	return time.Unix(int64(ms/1000), int64(ms%1000)*int64(time.Millisecond))
}

// setTime writes ms to u's first 6 bytes; false, and u unchanged, past
// maxULIDTime.
func (u *ulid) setTime(ms uint64) bool {
	if ms > maxULIDTime {
		return false
	}
	putUint48(u[:6], ms)
	return true
}

// time is u's Unix milliseconds.
func (u ulid) time() uint64 {
	return uint64(u[0])<<40 | uint64(u[1])<<32 | uint64(u[2])<<24 | uint64(u[3])<<16 | uint64(u[4])<<8 | uint64(u[5])
}

// String writes u in Crockford's base32, 5 bits a character from the last.
func (u ulid) String() string {
	var b [ulidLen]byte
	hi, lo := binary.BigEndian.Uint64(u[:8]), binary.BigEndian.Uint64(u[8:])
	for i := ulidLen - 1; i >= 0; i-- {
		b[i] = crockfordDigits[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(b[:])
}

// parseULID reads a ULID written in upper-case Crockford's base32; false
// for anything else (a wrong length, another character, a first
// character past 7, which would hold more than 128 bits).
func parseULID(s string) (ulid, bool) {
	var u ulid
	if len(s) != ulidLen || s[0] < '0' || s[0] > '7' {
		return u, false
	}
	var hi, lo uint64
	for i := range ulidLen {
		v := crockfordValue(s[i])
		if v < 0 {
			return u, false
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(v)
	}
	binary.BigEndian.PutUint64(u[:8], hi)
	binary.BigEndian.PutUint64(u[8:], lo)
	return u, true
}

// crockfordValue is the value of c, a digit of Crockford's base32 in upper
// case, or -1.
func crockfordValue(c byte) int {
	if !crockford(c) {
		return -1
	}
	if c <= '9' {
		return int(c - '0')
	}
	n := int(c-'A') + 10
	// The letters skipped before c: I, L, O, U.
	for _, skipped := range "ILOU" {
		if c > byte(skipped) {
			n--
		}
	}
	return n
}

// monotonic is an unsigned generator's last ULID: 80 random bits for each
// new millisecond, and within one millisecond the last 80 bits plus a
// random step from 1 to 2^32-1, so the numbers of one millisecond
// increase and are still hard to guess. Not safe for concurrent use.
type monotonic struct {
	ms      uint64
	hi      uint16 // the 80 bits: hi then lo
	lo      uint64
	started bool
}

// next returns the ULID of millisecond ms. It panics when ms is past
// maxULIDTime, when crypto/rand fails, or when one millisecond's 80 bits
// run out (2^48 numbers at the least).
func (m *monotonic) next(ms uint64) ulid {
	var b [10]byte
	if m.started && m.ms == ms {
		step := uint64(0)
		for step == 0 || step == 1<<32-1 {
			readRandom(b[:4])
			step = uint64(binary.BigEndian.Uint32(b[:4]))
		}
		lo := m.lo + step
		if lo < m.lo {
			if m.hi == 1<<16-1 {
				panic("order number: the millisecond's 80 bits ran out")
			}
			m.hi++
		}
		m.lo = lo
	} else {
		readRandom(b[:])
		m.ms, m.hi, m.lo, m.started = ms, binary.BigEndian.Uint16(b[:2]), binary.BigEndian.Uint64(b[2:]), true
	}
	var u ulid
	if !u.setTime(ms) {
		panic("order number: a clock past the year 10889")
	}
	binary.BigEndian.PutUint16(u[6:8], m.hi)
	binary.BigEndian.PutUint64(u[8:], m.lo)
	return u
}

func readRandom(b []byte) {
	if _, err := rand.Read(b); err != nil {
		panic("order number: crypto/rand: " + err.Error())
	}
}
