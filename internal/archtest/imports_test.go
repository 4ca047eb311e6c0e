// Package archtest holds the tests of the rules docs/structure.md
// describes: the import rules (it reads the product's import graph with
// `go list` and fails on an arrow that breaks a rule) and the size rules
// (sizes_test.go: it parses the product's files and fails on a file or a
// function over its limit).
package archtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/seckill/seckill/"

// layer is where a package of the module sits; each layer may import only
// the ones its rule names (allowed).
type layer int

const (
	other      layer = iota // not under a rule (the bench, e2e, chaos)
	foundation              // pkg/foundation, lua, sql: imports none above
	domain                  // pkg/domain: the standard library and itself only
	adapter                 // pkg/adapter: one outside system each
	service                 // pkg/service: the use cases
	wiring                  // internal/config, each program's main package and api/wiring
	transport               // api/internal/..., consumer/internal/...
	testkit                 // internal/testkit: the test harness
	public                  // pkg/admission: for the shops, the standard library only
)

func (l layer) String() string {
	return [...]string{"other", "foundation", "domain", "adapter", "service", "wiring", "transport", "testkit", "public"}[l]
}

// layerOf places a package path (without the module prefix).
func layerOf(p string) layer {
	under := func(dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	switch {
	case under("pkg/foundation"), p == "lua", p == "sql":
		return foundation
	case under("pkg/domain"):
		return domain
	case under("pkg/admission"):
		return public
	case under("pkg/adapter"):
		return adapter
	case under("pkg/service"):
		return service
	case under("internal/testkit"):
		return testkit
	case p == "internal/config", p == "api", under("api/wiring"), p == "consumer", p == "reconciler":
		return wiring
	case under("api/internal"), under("consumer/internal"), under("reconciler/internal"):
		return transport
	}
	return other
}

// allowed are the layers each layer may import from the module. A domain
// package imports nothing but the standard library and other domain
// packages; a public package (one a shop's own service imports) nothing but
// the standard library, and every layer may use it as the standard
// library; nothing in the product imports the test harness; no arrow runs
// back up.
var allowed = map[layer][]layer{
	public:     {},
	foundation: {foundation},
	domain:     {domain, public},
	adapter:    {foundation, domain, public},
	service:    {foundation, domain, service, public},
	wiring:     {foundation, domain, adapter, service, wiring, transport, public},
	transport:  {foundation, domain, service, transport, public},
}

// graph is each package's imports (paths without the module prefix; the
// standard library and outside modules as they are).
type graph map[string][]string

// breaches returns every arrow of g that breaks a rule, as "from -> to:
// why", sorted.
func breaches(g graph) []string {
	var out []string
	for from, imports := range g {
		lf := layerOf(from)
		for _, to := range imports {
			inModule := g.has(to) || layerOf(to) != other
			switch {
			case lf == domain && !inModule && strings.Contains(strings.SplitN(to, "/", 2)[0], "."):
				out = append(out, fmt.Sprintf("%s -> %s: the domain imports only the standard library and itself", from, to))
			case lf == public && !inModule && strings.Contains(strings.SplitN(to, "/", 2)[0], "."):
				out = append(out, fmt.Sprintf("%s -> %s: a public package imports only the standard library", from, to))
			case !inModule:
			case layerOf(to) == testkit && lf != testkit && lf != other:
				out = append(out, fmt.Sprintf("%s -> %s: the product never imports the test harness", from, to))
			case allowed[lf] != nil && !slices.Contains(allowed[lf], layerOf(to)):
				out = append(out, fmt.Sprintf("%s -> %s: %s may import only %v", from, to, lf, allowed[lf]))
			}
		}
	}
	slices.Sort(out)
	return out
}

func (g graph) has(p string) bool { _, ok := g[p]; return ok }

// load reads the module's product packages (not their tests) with go list.
func load(t *testing.T) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Error", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		var imports []string
		for _, i := range p.Imports {
			imports = append(imports, strings.TrimPrefix(i, module))
		}
		g[strings.TrimPrefix(p.ImportPath, module)] = imports
	}
	return g
}

// The module's import graph keeps the rules of docs/structure.md.
func TestImportRules(t *testing.T) {
	g := load(t)
	for _, p := range []string{"api", "consumer", "pkg/domain/order", "pkg/adapter/orderdb", "pkg/service/lifecycle"} {
		if !g.has(p) {
			t.Fatalf("go list did not read %s: the graph is not the module's", p)
		}
	}
	for _, b := range breaches(g) {
		t.Error(b)
	}
}

// Each rule catches its breach: a graph with one bad arrow per rule.
func TestImportRulesCatchBreaches(t *testing.T) {
	g := graph{
		"pkg/foundation/logs":        {"log/slog"},
		"pkg/domain/order":           {"time"},
		"pkg/adapter/orderdb":        {"pkg/domain/order", "gorm.io/gorm"},
		"pkg/service/lifecycle":      {"pkg/domain/order"},
		"api":                        {"pkg/adapter/orderdb", "api/internal/httpapi"},
		"api/internal/httpapi":       {"pkg/service/lifecycle"},
		"internal/testkit/mysqltest": {"pkg/adapter/orderdb"},
		"pkg/admission":              {"crypto/ed25519"},
		"pkg/domain/room":            {"pkg/admission"},
	}
	if b := breaches(g); len(b) != 0 {
		t.Fatalf("a graph that keeps the rules breaks them: %v", b)
	}
	for _, c := range []struct{ from, to, why string }{
		{"pkg/domain/order", "gorm.io/gorm", "the domain imports only the standard library"},
		{"pkg/domain/order", "pkg/adapter/orderdb", "domain may import only"},
		{"pkg/domain/order", "pkg/foundation/logs", "domain may import only"},
		{"pkg/foundation/logs", "pkg/domain/order", "foundation may import only"},
		{"pkg/adapter/orderdb", "pkg/service/lifecycle", "adapter may import only"},
		{"pkg/service/lifecycle", "pkg/adapter/orderdb", "service may import only"},
		{"pkg/service/lifecycle", "api/internal/httpapi", "service may import only"},
		{"api/internal/httpapi", "pkg/adapter/orderdb", "transport may import only"},
		{"api/internal/httpapi", "api", "transport may import only"},
		{"api", "internal/testkit/mysqltest", "never imports the test harness"},
		{"pkg/admission", "golang.org/x/crypto/hkdf", "a public package imports only the standard library"},
		{"pkg/admission", "pkg/domain/order", "public may import only []"},
	} {
		bad := graph{}
		for k, v := range g {
			bad[k] = slices.Clone(v)
		}
		bad[c.from] = append(bad[c.from], c.to)
		b := breaches(bad)
		if len(b) != 1 || !strings.HasPrefix(b[0], c.from+" -> "+c.to+": ") || !strings.Contains(b[0], c.why) {
			t.Errorf("%s -> %s: breaches %q, want one saying %q", c.from, c.to, b, c.why)
		}
	}
}

// A shop's service imports pkg/admission alone: everything it links, all
// the way down, is the standard library's (go list -deps), not this
// module's other packages nor an outside module's.
func TestAdmissionNeedsOnlyTheStandardLibrary(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./pkg/admission")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if got := strings.Fields(string(out)); !slices.Equal(got, []string{module + "pkg/admission"}) {
		t.Fatalf("pkg/admission links %v beside the standard library", got)
	}
}
