//go:build chaos || soak

package chaos

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// services stops, kills (SIGKILL: a crash, the data kept) or starts one
// backing service: with scripts/services, or with docker compose when `make
// up` ran them there (SECKILL_SERVICES=docker, which `make chaos` sets).
func services(t *testing.T, verb, name string) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	cmd := exec.Command(filepath.Join(root, "scripts", "services"), verb, name)
	if os.Getenv("SECKILL_SERVICES") == "docker" {
		args := []string{"compose", "stop", name}
		switch verb {
		case "start":
			args = []string{"compose", "up", "-d", "--wait", name}
		case "kill":
			args = []string{"compose", "kill", name}
		}
		cmd = exec.Command("docker", args...)
	}
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	t.Logf("%s: %s", strings.Join(cmd.Args[1:], " "), strings.TrimSpace(string(b)))
}

// tail is the last n bytes of a log, for a failure's message.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
