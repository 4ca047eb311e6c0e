package archtest

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The size rules (issue 42): a product file holds at most maxFileLines
// lines and a function at most maxFuncLines, from its func keyword to its
// closing brace (its doc comment not counted), so that each file reads as
// one subject and each function as one step of it.
const (
	maxFileLines = 500
	maxFuncLines = 80
)

// startup are the start-up functions of the programs' main packages (the
// wiring of docs/structure.md), as "<program directory>.<function>": each
// builds every dependency with its constructor, in the order the program
// starts in. That list reads best as one page top to bottom; cut into
// steps it would only scatter that order, so it may run past maxFuncLines.
var startup = []string{
	"api.run",
	"consumer.run",
	"reconciler.run",
}

// oversized are product files allowed over maxFileLines for a while (none
// today). The list only shrinks: a file back under the limit must go from
// here too (the test says so).
var oversized = []string{}

// notProduct are the folders of the module whose Go files are not the
// product: the test harness, the bench tool (a module of its own), and
// the end-to-end and chaos tests.
var notProduct = []string{"internal/testkit", "bench", "e2e", "chaos"}

// breach is a file (fn "") or a function of one over its limit.
type breach struct {
	path  string // slash-separated, from the module's root
	fn    string
	lines int
}

func (b breach) String() string {
	if b.fn == "" {
		return fmt.Sprintf("%s: %d lines, more than %d: split it into files by what they hold", b.path, b.lines, maxFileLines)
	}
	return fmt.Sprintf("%s: func %s is %d lines, more than %d: split it into named steps", b.path, b.fn, b.lines, maxFuncLines)
}

// sizeBreaches returns every size rule the Go file at name (slash-separated,
// from the module's root) with source src breaks, the file's own first,
// then its functions' in source order.
func sizeBreaches(name string, src []byte) ([]breach, error) {
	var out []breach
	if n := bytes.Count(src, []byte("\n")); n > maxFileLines {
		out = append(out, breach{path: name, lines: n})
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		if n > maxFuncLines && !isWiring(name, f.Name.Name, fd) {
			out = append(out, breach{path: name, fn: funcName(fd), lines: n})
		}
	}
	return out, nil
}

// isWiring reports whether fd, in the file name of package pkg, is one of
// the startup functions.
func isWiring(name, pkg string, fd *ast.FuncDecl) bool {
	return pkg == "main" && fd.Recv == nil && slices.Contains(startup, path.Dir(name)+"."+fd.Name.Name)
}

// funcName is fd's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return "(" + id.Name + ")." + fd.Name.Name
	}
	return fd.Name.Name
}

// productFiles reads the module's product Go files below root: not the
// tests, not the folders of notProduct, no module nested in it, no
// testdata, no hidden folder. Keys are slash-separated paths from root.
func productFiles(root string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if slices.Contains(notProduct, rel) || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = src
		return nil
	})
	return files, err
}

// checkSizes returns every breach of the size rules in files but the
// length of the files in oversized, and every file of oversized that is no
// longer over the limit.
func checkSizes(files map[string][]byte, oversized []string) ([]string, error) {
	var problems []string
	over := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		breaches, err := sizeBreaches(name, files[name])
		if err != nil {
			return nil, err
		}
		for _, b := range breaches {
			if b.fn == "" && slices.Contains(oversized, name) {
				over[name] = true
				continue
			}
			problems = append(problems, b.String())
		}
	}
	for _, name := range oversized {
		if !over[name] {
			problems = append(problems, name+" is no longer over the limit (or gone): take it off the oversized list")
		}
	}
	return problems, nil
}

// Every product file and function keeps the size rules, but the startup
// functions and the length of the files listed as oversized.
func TestSizeRules(t *testing.T) {
	files, err := productFiles("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"api/main.go", "reconciler/main.go", "pkg/adapter/stockredis/stockredis.go", "lua/lua.go"} {
		if _, ok := files[p]; !ok {
			t.Fatalf("the walk did not read %s: the files are not the module's", p)
		}
	}
	for p := range files {
		for _, dir := range notProduct {
			if strings.HasPrefix(p, dir+"/") || strings.HasSuffix(p, "_test.go") {
				t.Fatalf("the walk read %s, which is not the product", p)
			}
		}
	}
	problems, err := checkSizes(files, oversized)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%d product files read; %d over the file limit still (the oversized list)", len(files), len(oversized))
}

// generated is a Go file of package pkg with funcs ("f" or, for a method,
// "T.f"), each as many lines long as it says, then blank lines up to
// total lines (0: none).
func generated(pkg string, total int, funcs map[string]int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n", pkg)
	for _, key := range slices.Sorted(maps.Keys(funcs)) {
		recv, name := "", key
		if r, m, ok := strings.Cut(key, "."); ok {
			fmt.Fprintf(&b, "\ntype %s struct{}\n", r)
			recv, name = "(*"+r+") ", m
		}
		fmt.Fprintf(&b, "\n// %s is generated.\nfunc %s%s() {\n", name, recv, name)
		for range funcs[key] - 2 {
			b.WriteString("\tprintln()\n")
		}
		b.WriteString("}\n")
	}
	for n := strings.Count(b.String(), "\n"); n < total; n++ {
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// The rules catch a file one line too long and a function one line too
// long, let the limits themselves pass, and spare only the wiring
// functions of the programs' main packages.
func TestSizeRulesCatchBreaches(t *testing.T) {
	for _, c := range []struct {
		name  string
		path  string
		src   []byte
		wants []string // a breach each, by what it contains; none: the file keeps the rules
	}{
		{"file at the limit", "pkg/x/a.go", generated("x", maxFileLines, map[string]int{"f": maxFuncLines}), nil},
		{"file over the limit", "pkg/x/a.go", generated("x", maxFileLines+1, nil), []string{"pkg/x/a.go: 501 lines"}},
		{"function over the limit", "pkg/x/a.go", generated("x", 0, map[string]int{"long": maxFuncLines + 1, "short": 3}),
			[]string{"pkg/x/a.go: func long is 81 lines"}},
		{"method over the limit", "pkg/x/a.go", generated("x", 0, map[string]int{"T.long": maxFuncLines + 1}),
			[]string{"func (T).long is 81 lines"}},
		{"both", "pkg/x/a.go", generated("x", maxFileLines+20, map[string]int{"long": 2 * maxFuncLines}),
			[]string{"pkg/x/a.go: 520 lines", "func long is 160 lines"}},
		{"wiring", "reconciler/main.go", generated("main", 0, map[string]int{"run": 2 * maxFuncLines}), nil},
		{"another function of a program", "reconciler/verifydraw.go", generated("main", 0, map[string]int{"check": maxFuncLines + 1}),
			[]string{"func check is 81 lines"}},
		{"run of a package that is not a program", "pkg/x/run.go", generated("x", 0, map[string]int{"run": maxFuncLines + 1}),
			[]string{"func run is 81 lines"}},
		{"run of a program's internal package", "api/internal/httpapi/run.go", generated("httpapi", 0, map[string]int{"run": maxFuncLines + 1}),
			[]string{"func run is 81 lines"}},
		{"a method named run in a program", "api/main.go", generated("main", 0, map[string]int{"T.run": maxFuncLines + 1}),
			[]string{"func (T).run is 81 lines"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := sizeBreaches(c.path, c.src)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.wants) {
				t.Fatalf("breaches %q, want %d", got, len(c.wants))
			}
			for i, w := range c.wants {
				if !strings.Contains(got[i].String(), w) {
					t.Errorf("breach %q, want one saying %q", got[i], w)
				}
			}
		})
	}

	long := generated("x", maxFileLines+1, nil)
	files := map[string][]byte{"pkg/x/a.go": long, "pkg/x/b.go": generated("x", 10, nil)}
	if p, err := checkSizes(files, []string{"pkg/x/a.go"}); err != nil || len(p) != 0 {
		t.Errorf("a file over the limit listed as oversized: %q, %v; want no problem", p, err)
	}
	if p, _ := checkSizes(files, []string{"pkg/x/a.go", "pkg/x/b.go"}); len(p) != 1 || !strings.Contains(p[0], "pkg/x/b.go is no longer over the limit") {
		t.Errorf("an oversized file back under the limit: %q, want it reported", p)
	}
	files["pkg/x/a.go"] = generated("x", maxFileLines+1, map[string]int{"long": maxFuncLines + 1})
	if p, _ := checkSizes(files, []string{"pkg/x/a.go"}); len(p) != 1 || !strings.Contains(p[0], "func long is 81 lines") {
		t.Errorf("a long function in an oversized file: %q, want it reported (the list spares the file's length only)", p)
	}
	if _, err := checkSizes(map[string][]byte{"pkg/x/a.go": []byte("package x\nfunc (")}, nil); err == nil {
		t.Error("a file that does not parse: no error")
	}
}
