package access

import (
	"errors"
	"strings"
	"testing"

	"github.com/seckill/seckill/pkg/domain/order"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"abcd-efgh":      "ABCDEFGH",
		" AB CD ":        "ABCD",
		"fan_club.2026":  "FAN_CLUB.2026",
		"x9Z-0000-1111-": "X9Z00001111",
	} {
		got, err := Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "a-b-c", "ab cd!", "caf\u00e9cafe", strings.Repeat("A", MaxCodeLen+1)} {
		if _, err := Normalize(in); !errors.Is(err, order.ErrInvalidArgument) {
			t.Errorf("Normalize(%q): %v, want ErrInvalidArgument", in, err)
		}
	}
	if got, err := Normalize(strings.Repeat("a", MaxCodeLen) + "--"); err != nil || len(got) != MaxCodeLen {
		t.Errorf("a code of MaxCodeLen with trailing hyphens: %q, %v", got, err)
	}
}

func TestGenerateIsNormalRandomAndUnambiguous(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		c, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		n, err := Normalize(c)
		if err != nil || len(n) != GeneratedLen || len(c) != GeneratedLen+3 {
			t.Fatalf("generated %q normalizes to %q, %v", c, n, err)
		}
		if strings.ContainsAny(n, "ILOU") {
			t.Fatalf("generated %q has an ambiguous letter", c)
		}
		if seen[n] {
			t.Fatalf("generated %q twice in 2000", c)
		}
		seen[n] = true
	}
}

func TestHashSeparatesSalesAndKeys(t *testing.T) {
	k1, k2 := []byte(strings.Repeat("k", 32)), []byte(strings.Repeat("j", 32))
	a := Hash(k1, 1, "ABCD")
	if len(a) != DigestLen {
		t.Fatalf("digest %q", a)
	}
	if _, err := ParseDigest(string(a)); err != nil {
		t.Fatal(err)
	}
	if a != Hash(k1, 1, "ABCD") {
		t.Fatal("the same code hashed twice differs")
	}
	for _, other := range []Digest{Hash(k1, 2, "ABCD"), Hash(k2, 1, "ABCD"), Hash(k1, 1, "ABCE"), Hash(k1, 11, "BCD")} {
		if other == a {
			t.Fatalf("%q collides with another sale, key or code", other)
		}
	}
	if _, err := ParseDigest("zz"); err == nil {
		t.Fatal("a short digest parsed")
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": Open, "open": Open, "code_required": CodeRequired, "code_priority": CodePriority} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseMode("codes"); !errors.Is(err, order.ErrInvalidArgument) {
		t.Errorf("ParseMode(codes): %v", err)
	}
}

func TestCodeLeftAndRedisValue(t *testing.T) {
	c := Code{Digest: "d", Uses: 3, Used: 1, Subject: "alice"}
	if c.Left() != 2 || c.RedisValue() != "2|alice" {
		t.Fatalf("left %d value %q", c.Left(), c.RedisValue())
	}
	c.Used = 5
	if c.Left() != 0 {
		t.Fatalf("over-used code has %d left", c.Left())
	}
	if CheckUses(0) == nil || CheckUses(MaxUses+1) == nil || CheckUses(1) != nil {
		t.Fatal("CheckUses bounds")
	}
}
