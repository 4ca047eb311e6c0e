package order

import (
	"encoding/hex"
	"testing"
	"time"
)

// The ULIDs of order numbers are written as oklog/ulid (v2.1.2), which
// made them before, wrote them: these are its answers.
func TestULIDText(t *testing.T) {
	tests := []struct {
		name  string
		bytes string
		text  string
		ms    uint64
	}{
		{"zero", "00000000000000000000000000000000", "00000000000000000000000000", 0},
		{"every bit", "ffffffffffffffffffffffffffffffff", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", 281474976710655},
		{"counting bytes", "0123456789abcdef0123456789abcdef", "014D2PF2DBSQQG28T5CY4TQKFF", 1250999896491},
		{"a time of 2024", "018f3c2a9b7e4d5f6a7b8c9d0e1f2a3b", "01HWY2N6VY9NFPMYWCKM71YAHV", 1714701376382},
		{"the first and last bits", "80000000000000000000000000000001", "40000000000000000000000001", 140737488355328},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u ulid
			if _, err := hex.Decode(u[:], []byte(tt.bytes)); err != nil {
				t.Fatal(err)
			}
			if got := u.String(); got != tt.text {
				t.Fatalf("String() = %s, want %s", got, tt.text)
			}
			if got := u.time(); got != tt.ms {
				t.Fatalf("time() = %d, want %d", got, tt.ms)
			}
			back, ok := parseULID(tt.text)
			if !ok || back != u {
				t.Fatalf("parseULID(%s) = %x %v, want %x", tt.text, back, ok, u)
			}
		})
	}
}

func TestParseULIDRefuses(t *testing.T) {
	for _, s := range []string{
		"8ZZZZZZZZZZZZZZZZZZZZZZZZZ", // more than 128 bits
		"01ARZ3NDEKTSV4RRFFQ69G5FAI", // not a digit of the alphabet
		"01ARZ3NDEKTSV4RRFFQ69G5FA",  // short
		"01ARZ3NDEKTSV4RRFFQ69G5FAVV",
		"01arz3ndektsv4rrffq69g5fav", // order numbers are upper case
	} {
		if _, ok := parseULID(s); ok {
			t.Errorf("parseULID(%q) accepted", s)
		}
	}
}

// The spec's example ULID has the time oklog/ulid gives it.
func TestULIDTime(t *testing.T) {
	u, ok := parseULID("01ARZ3NDEKTSV4RRFFQ69G5FAV")
	if !ok {
		t.Fatal("not parsed")
	}
	at := timeOfULID(u.time())
	if got := at.UTC().Format("2006-01-02T15:04:05.000Z"); got != "2016-07-30T23:54:10.259Z" {
		t.Fatalf("time %s", got)
	}
	if ulidTime(at) != u.time() {
		t.Fatalf("ulidTime(%v) = %d, want %d", at, ulidTime(at), u.time())
	}
	if ms := ulidTime(time.Unix(1, 999_999_999)); ms != 1999 {
		t.Fatalf("ulidTime rounds: %d", ms)
	}
}

// An unsigned generator's numbers of one millisecond increase.
func TestMonotonic(t *testing.T) {
	var m monotonic
	prev := m.next(1000).String()
	for range 10000 {
		no := m.next(1000).String()
		if no <= prev {
			t.Fatalf("%s after %s", no, prev)
		}
		prev = no
	}
	if next := m.next(1001).String(); next[:10] == prev[:10] {
		t.Fatalf("the next millisecond kept the time: %s", next)
	}
}
