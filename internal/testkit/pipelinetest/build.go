package pipelinetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Binary returns the path of program built from this module, building the
// programs once per test binary.
func Binary(t testing.TB, program string) string {
	t.Helper()
	buildOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = err
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		buildDir, buildErr = os.MkdirTemp("", "seckill-bin-")
		if buildErr != nil {
			return
		}
		args := []string{"build", "-tags", "failpoints", "-o", buildDir + string(filepath.Separator)}
		for _, prog := range []string{"api", "consumer", "reconciler"} {
			if _, err := os.Stat(filepath.Join(root, prog, "main.go")); err == nil {
				args = append(args, "./"+prog)
			}
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{out: string(b), err: err}
		}
	})
	if buildErr != nil {
		t.Fatalf("pipelinetest: build programs: %v", buildErr)
	}
	return filepath.Join(buildDir, program)
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }
