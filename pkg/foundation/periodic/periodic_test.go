package periodic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/foundation/periodic"
)

func TestEveryRunsUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		periodic.Every(ctx, time.Millisecond, func(context.Context) {
			if n.Add(1) == 3 {
				cancel()
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
