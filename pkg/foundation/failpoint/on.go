//go:build failpoints

package failpoint

import (
	"os"
	"strings"
	"syscall"
)

// Inject kills the process with SIGKILL when SECKILL_FAILPOINTS (a
// comma-separated list) names this point: the test sees exactly what a
// crash at this line leaves behind.
func Inject(name string) {
	if enabled(name) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}

// enabled reports whether SECKILL_FAILPOINTS names this point.
func enabled(name string) bool {
	for _, n := range strings.Split(os.Getenv("SECKILL_FAILPOINTS"), ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}
