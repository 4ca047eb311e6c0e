package e2e_test

import (
	"os"
	"testing"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
)

func TestMain(m *testing.M) { os.Exit(pipelinetest.Main(m)) }
