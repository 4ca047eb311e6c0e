package order

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// flip changes the character at i of an order number to another digit of
// Crockford's base32, so the number keeps its form.
func flip(no string, i int) string {
	c := byte('0')
	if no[i] == '0' {
		c = '1'
	}
	return no[:i] + string(c) + no[i+1:]
}

func TestIssued(t *testing.T) {
	key := bytes.Repeat([]byte{7}, NumberKeySize)
	g, err := NewSignedNumberGenerator(key)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewSignedNumberGenerator(bytes.Repeat([]byte{8}, NumberKeySize))
	if err != nil {
		t.Fatal(err)
	}
	no := g.NextFor(42, "alice")
	if !ValidOrderNo(no) || TagOf(no) != 42 {
		t.Fatalf("bad number %q", no)
	}
	otherItem := strings.TrimSuffix(no, "-42") + "-43"
	tests := []struct {
		name string
		g    *NumberGenerator
		no   string
		user string
		want bool
	}{
		{"issued for the user", g, no, "alice", true},
		{"another instance with the same key", mustSigned(t, key), no, "alice", true},
		{"another user", g, no, "bob", false},
		{"a user whose id extends the buyer's", g, no, "alice2", false},
		{"another item", g, otherItem, "alice", false},
		{"a flipped character in the time", g, flip(no, 3), "alice", false},
		{"a flipped character in the random bits", g, flip(no, 14), "alice", false},
		{"a flipped character in the tag", g, flip(no, 25), "alice", false},
		{"an unsigned number", g, NewNumberGenerator().Next(42), "alice", false},
		{"an unsigned number made by NextFor", g, NewNumberGenerator().NextFor(42, "alice"), "alice", false},
		{"another key", other, no, "alice", false},
		{"an unsigned generator", NewNumberGenerator(), no, "alice", false},
		{"no generator", nil, no, "alice", false},
		{"not an order number", g, "nonsense", "alice", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.g.Issued(tt.no, tt.user); got != tt.want {
				t.Fatalf("Issued(%q, %q) = %v, want %v", tt.no, tt.user, got, tt.want)
			}
		})
	}
}

func mustSigned(t testing.TB, key []byte) *NumberGenerator {
	t.Helper()
	g, err := NewSignedNumberGenerator(key)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSignedNumbersIncrease(t *testing.T) {
	g := mustSigned(t, bytes.Repeat([]byte{1}, NumberKeySize))
	prev, sameMs := "", 0
	var prevAt time.Time
	for range 10000 {
		no := g.NextFor(42, "u")
		if !ValidOrderNo(no) || TagOf(no) != 42 || !g.Issued(no, "u") {
			t.Fatalf("bad number %q", no)
		}
		if no[:26] <= prev {
			t.Fatalf("not increasing: %q after %q", no, prev)
		}
		at, ok := NumberTime(no)
		if !ok || time.Since(at) > time.Minute || time.Since(at) < -time.Minute {
			t.Fatalf("NumberTime(%q) = %v %v", no, at, ok)
		}
		if at.Equal(prevAt) {
			sameMs++
		}
		prev, prevAt = no[:26], at
	}
	if sameMs == 0 {
		t.Fatal("no two numbers in one millisecond: the test proves nothing")
	}
}

// Within one millisecond, after a clock step back, and when the 48 bits
// run out, the next number is still greater than the last.
func TestAdvance(t *testing.T) {
	g := mustSigned(t, bytes.Repeat([]byte{1}, NumberKeySize))
	ms, seq := g.advance(1000)
	if ms != 1000 || seq > max48>>1 {
		t.Fatalf("first: %d %d", ms, seq)
	}
	steps := []struct {
		name  string
		now   uint64
		setup func()
		ms    uint64
		seq   func(uint64) bool
	}{
		{"same millisecond", 1000, nil, 1000, func(s uint64) bool { return s == seq+1 }},
		{"clock stepped back", 900, nil, 1000, func(s uint64) bool { return s == seq+2 }},
		{"bits run out", 1000, func() { g.seq = max48 }, 1001, func(s uint64) bool { return s <= max48>>1 }},
		{"next millisecond", 1005, nil, 1005, func(s uint64) bool { return s <= max48>>1 }},
	}
	for _, st := range steps {
		if st.setup != nil {
			st.setup()
		}
		gotMs, gotSeq := g.advance(st.now)
		if gotMs != st.ms || !st.seq(gotSeq) {
			t.Fatalf("%s: advance(%d) = %d %d", st.name, st.now, gotMs, gotSeq)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	g := NewNumberGenerator()
	for b.Loop() {
		_ = g.Next(42)
	}
}

func BenchmarkNextFor(b *testing.B) {
	g := mustSigned(b, bytes.Repeat([]byte{1}, NumberKeySize))
	for b.Loop() {
		_ = g.NextFor(42, "1234567")
	}
}

func BenchmarkIssued(b *testing.B) {
	g := mustSigned(b, bytes.Repeat([]byte{1}, NumberKeySize))
	no := g.NextFor(42, "1234567")
	for b.Loop() {
		if !g.Issued(no, "1234567") {
			b.Fatal("not issued")
		}
	}
}

// A number is recent for KeyMargin after it was made (and before, for a
// clock behind the maker's).
func TestRecent(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		made time.Time
		want bool
	}{
		{"just made", now, true},
		{"made an hour short of the margin ago", now.Add(-KeyMargin + time.Hour), true},
		{"made past the margin", now.Add(-KeyMargin - time.Minute), false},
		{"made within the margin ahead", now.Add(time.Hour), true},
		{"made past the margin ahead", now.Add(KeyMargin + time.Minute), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A generator of its own: one keeps its last time when the clock
			// steps back.
			g := mustSigned(t, bytes.Repeat([]byte{1}, NumberKeySize))
			no := g.nextAt(42, "u", tt.made)
			if at, _ := NumberTime(no); at.UnixMilli() != tt.made.UnixMilli() {
				t.Fatalf("made at %v, want %v", at, tt.made)
			}
			if !g.Issued(no, "u") {
				t.Fatalf("%q not issued", no)
			}
			if got := Recent(no, now); got != tt.want {
				t.Fatalf("Recent(made %v) = %v, want %v", tt.made, got, tt.want)
			}
		})
	}
	if Recent("nonsense", now) {
		t.Fatal("Recent(nonsense)")
	}
}
