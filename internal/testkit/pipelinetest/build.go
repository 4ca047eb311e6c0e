package pipelinetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error

	// inMain is set by Main: without it nobody would remove the programs
	// Binary builds, and every test run would leave ~130 MB in the temp
	// folder until the disk fills.
	inMain atomic.Bool
)

// Main runs the package's tests and then removes the programs Binary built.
// A package whose tests start the pipeline calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pipelinetest.Main(m)) }
func Main(m *testing.M) int {
	inMain.Store(true)
	code := m.Run()
	if buildDir != "" {
		if err := os.RemoveAll(buildDir); err != nil {
			os.Stderr.WriteString("pipelinetest: remove the built programs: " + err.Error() + "\n")
		}
	}
	return code
}

// Binary returns the path of program built from this module, building the
// programs once per test binary. The package's TestMain must call Main.
func Binary(t testing.TB, program string) string {
	t.Helper()
	if !inMain.Load() {
		t.Fatal("pipelinetest: the package's TestMain must call pipelinetest.Main, which removes the built programs")
	}
	buildOnce.Do(func() { buildDir, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("pipelinetest: build programs: %v", buildErr)
	}
	return filepath.Join(buildDir, program)
}

func build() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	dir, err := os.MkdirTemp("", "seckill-bin-")
	if err != nil {
		return "", err
	}
	args := []string{"build", "-tags", "failpoints", "-o", dir + string(filepath.Separator)}
	for _, prog := range []string{"api", "consumer", "reconciler"} {
		if _, err := os.Stat(filepath.Join(root, prog, "main.go")); err == nil {
			args = append(args, "./"+prog)
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return dir, &buildError{out: string(b), err: err}
	}
	return dir, nil
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

func (e *buildError) Unwrap() error { return e.err }
