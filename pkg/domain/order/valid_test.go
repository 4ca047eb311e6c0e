package order

import (
	"regexp"
	"testing"
)

// The specifications the byte-by-byte checks implement.
var (
	orderNoSpec = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}-[1-9][0-9]{0,17}$`)
	idemKeySpec = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

func seedShapes(f *testing.F) {
	g := NewNumberGenerator()
	for _, s := range []string{
		g.Next(1), g.Next(42), g.Next(999999999999999999), "", "-", "k", "key_1-A",
		"01JD0000000000000000000000-7", "81JD0000000000000000000000-7", "01JD000000000000000000000I-7",
		"01JD0000000000000000000000-07", "01JD0000000000000000000000-1234567890123456789",
		"01jd0000000000000000000000-7", "01JD0000000000000000000000-7\n", "key with space",
		"0123456789012345678901234567890123456789012345678901234567890123",  // 64
		"01234567890123456789012345678901234567890123456789012345678901234", // 65
	} {
		f.Add(s)
	}
}

func FuzzValidOrderNo(f *testing.F) {
	seedShapes(f)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidOrderNo(s), orderNoSpec.MatchString(s); got != want {
			t.Fatalf("ValidOrderNo(%q) = %v, the expression says %v", s, got, want)
		}
	})
}

func FuzzValidIdempotencyKey(f *testing.F) {
	seedShapes(f)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidIdempotencyKey(s), idemKeySpec.MatchString(s); got != want {
			t.Fatalf("ValidIdempotencyKey(%q) = %v, the expression says %v", s, got, want)
		}
	})
}

func BenchmarkValidOrderNo(b *testing.B) {
	no := NewNumberGenerator().Next(42)
	for b.Loop() {
		if !ValidOrderNo(no) {
			b.Fatal(no)
		}
	}
}
