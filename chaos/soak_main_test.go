//go:build soak && !chaos

package chaos

import (
	"os"
	"testing"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
)

// TestMain of the soak alone; built with the chaos tag too, the chaos
// suite's TestMain (harness_test.go) runs instead, which does the same and
// prints the fault tally.
func TestMain(m *testing.M) { os.Exit(pipelinetest.Main(m)) }
