package access

import (
	"strings"
	"testing"
)

// A batch's codes are its nonce's under the key: the same nonce gives the
// same codes, another nonce, sale or key others, each in Generate's form.
func TestDerive(t *testing.T) {
	key, other := []byte(strings.Repeat("k", 32)), []byte(strings.Repeat("j", 32))
	nonce := []byte("0123456789abcdef")
	seen := map[string]bool{}
	for i := range 1000 {
		c := Derive(key, 5, nonce, i)
		if c != Derive(key, 5, nonce, i) {
			t.Fatalf("code %d differs between two derivations", i)
		}
		n, err := Normalize(c)
		if err != nil || len(n) != GeneratedLen || len(c) != GeneratedLen+3 || strings.ContainsAny(n, "ILOU") {
			t.Fatalf("derived %q normalizes to %q, %v", c, n, err)
		}
		if seen[n] {
			t.Fatalf("derived %q twice", c)
		}
		seen[n] = true
	}
	for name, c := range map[string]string{
		"another nonce": Derive(key, 5, []byte("0123456789abcdeF"), 0),
		"another sale":  Derive(key, 6, nonce, 0),
		"another key":   Derive(other, 5, nonce, 0),
	} {
		if c == Derive(key, 5, nonce, 0) {
			t.Errorf("%s gives the same code", name)
		}
	}
}
