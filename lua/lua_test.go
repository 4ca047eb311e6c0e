package lua

import (
	"strings"
	"testing"
)

// Every script's includes are expanded: no include line is left, and the
// lib's function is defined before the script's first call of it.
func TestSourceExpandsIncludes(t *testing.T) {
	for _, name := range []string{"warmup", "warmup_buckets"} {
		s := Source(name)
		if strings.Contains(s, include) {
			t.Errorf("%s: an include line is left:\n%s", name, s)
		}
		def, call := strings.Index(s, "local function sellable("), strings.Index(s, "local want = sellable(")
		if def < 0 || call < def {
			t.Errorf("%s: sellable is not defined before it is called:\n%s", name, s)
		}
	}
}

func TestSourcePanicsOnAMissingLib(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("expand of a missing lib did not panic")
		}
	}()
	expand("lib/none.lua")
}
