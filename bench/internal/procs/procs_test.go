package procs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunToEndReportsExitCodeOutputAndPeakMemory(t *testing.T) {
	dir := t.TempDir()
	out, errf := filepath.Join(dir, "out"), filepath.Join(dir, "err")
	// The shell holds a 32 MiB string in memory before it exits 3.
	o, err := RunToEnd(context.Background(), "/bin/sh",
		[]string{"-c", `s=$(head -c 33554432 /dev/zero | tr '\0' x); echo "$VAR ${#s}"; echo oops >&2; exit 3`},
		[]string{"VAR=hello"}, out, errf)
	if err != nil {
		t.Fatal(err)
	}
	if o.Code != 3 {
		t.Errorf("Code = %d, want 3", o.Code)
	}
	if o.MaxRSS < 32<<20 {
		t.Errorf("MaxRSS = %d bytes, want at least 32 MiB", o.MaxRSS)
	}
	if o.Took <= 0 {
		t.Errorf("Took = %v", o.Took)
	}
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != "hello 33554432" {
		t.Errorf("stdout %q", b)
	}
	if b, _ := os.ReadFile(errf); strings.TrimSpace(string(b)) != "oops" {
		t.Errorf("stderr %q", b)
	}
}
