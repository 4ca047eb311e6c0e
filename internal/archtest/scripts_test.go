package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// earlyQuit finds a pipe into a reader that may quit before the writer is
// done: `grep -q` (quits at its first match) and `head` (quits after its
// lines).
var earlyQuit = regexp.MustCompile(`\|\s*(grep\s+-[A-Za-z]*q|head\b)`)

// TestScriptsDoNotFailOnAnEarlyQuit: in a script with `set -o pipefail`, a
// writer that gets EPIPE after its reader quit fails the whole pipeline.
// `printf` of bash writes each line on its own, so `nodes | grep -qx node`
// was false now and then for a node that was listed (CI failed on
// `services kill mysql-3307`: "unknown service"). Such a pipe is allowed
// only where its status is not used: inside `$(...)`, or with `|| true`.
func TestScriptsDoNotFailOnAnEarlyQuit(t *testing.T) {
	var scripts []string
	for _, glob := range []string{"scripts/*", "scripts/services.d/*", ".ci/*"} {
		m, err := filepath.Glob(filepath.Join("../..", glob))
		if err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, m...)
	}
	checked := 0
	for _, path := range scripts {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // a directory
		}
		text := string(b)
		if !strings.Contains(text, "pipefail") {
			continue
		}
		checked++
		for i, line := range strings.Split(text, "\n") {
			code, _, _ := strings.Cut(line, " #")
			at := earlyQuit.FindStringIndex(code)
			if strings.HasPrefix(strings.TrimSpace(code), "#") || at == nil {
				continue
			}
			before := code[:at[0]]
			inside := strings.Count(before, "$(") > strings.Count(before, ")")
			if inside || strings.Contains(code, "|| true") {
				continue
			}
			t.Errorf("%s:%d: a pipe into a reader that quits early fails under pipefail: %s",
				path, i+1, strings.TrimSpace(line))
		}
	}
	if checked == 0 {
		t.Fatal("no script with pipefail found: the globs are wrong")
	}
}
