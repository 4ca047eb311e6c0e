package periodic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/foundation/periodic"
)

// Each f that cancels then outlasts the period, so the next tick is ready
// beside the context's end; select picks either at random, so twenty runs
// would see an f after the cancel with odds of 1 - 2^-20 if Every did not
// check the end first (consumer/internal/pass TestContextEndStopsRun once
// saw three passes after its cancel).
func TestEveryRunsUntilTheContextEnds(t *testing.T) {
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		var n atomic.Int32
		done := make(chan struct{})
		go func() {
			defer close(done)
			periodic.Every(ctx, time.Millisecond, func(context.Context) {
				if n.Add(1) == 3 {
					cancel()
					time.Sleep(3 * time.Millisecond)
				}
			})
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Every did not return after its context ended")
		}
		if got := n.Load(); got != 3 {
			t.Fatalf("f ran %d times, want 3 (none after the cancel)", got)
		}
	}
}
