package waittest_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/waittest"
)

func TestUntilPollsUntilTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	waittest.UntilEvery(t, 5*time.Second, time.Millisecond, "three polls", func() bool { return n.Add(1) == 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("cond called %d times, want 3", got)
	}
}

// A cleanup runs after the test's context ended; a wait there still polls.
func TestUntilWorksInACleanup(t *testing.T) {
	var polls atomic.Int32
	t.Run("inner", func(t *testing.T) {
		t.Cleanup(func() {
			waittest.UntilEvery(t, 5*time.Second, time.Millisecond, "the fifth poll", func() bool { return polls.Add(1) == 5 })
		})
	})
	if got := polls.Load(); got != 5 {
		t.Fatalf("cond polled %d times in the cleanup, want 5", got)
	}
}
