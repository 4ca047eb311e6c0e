package orderevents

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/consume"
)

// recording is a handler that records each call's order numbers, answers
// each event with its order number as the label, and holds its first call
// until release is closed.
type recording struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	calls   [][]string
}

func (h *recording) Handle(_ context.Context, events []order.Event) []consume.Result {
	h.mu.Lock()
	first := len(h.calls) == 0
	var nos []string
	res := make([]consume.Result, len(events))
	for i, e := range events {
		nos = append(nos, e.OrderNo)
		res[i] = consume.Result{Outcome: consume.Done, Label: e.OrderNo}
	}
	h.calls = append(h.calls, nos)
	h.mu.Unlock()
	if first {
		close(h.entered)
		<-h.release
	}
	return res
}

func (*recording) DeadLettered(context.Context, order.Event) error { return nil }

func events(name string, n int) []order.Event {
	out := make([]order.Event, n)
	for i := range out {
		out[i].OrderNo = fmt.Sprintf("%s%d", name, i)
	}
	return out
}

// TestGangMergesTheCallsThatWaitTogether holds the handler in a first call
// while three partitions' batches arrive: the next call takes the two that
// fit in max together, the third runs after, and each caller gets the
// results of its own events.
func TestGangMergesTheCallsThatWaitTogether(t *testing.T) {
	h := &recording{entered: make(chan struct{}), release: make(chan struct{})}
	g := startGang(h, 5)
	defer g.stop()
	ctx := context.Background()

	batches := map[string][]order.Event{"a": events("a", 2), "b": events("b", 2), "c": events("c", 3), "d": events("d", 1)}
	got := map[string][]consume.Result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	call := func(name string) {
		wg.Go(func() {
			res := g.Handle(ctx, batches[name])
			mu.Lock()
			got[name] = res
			mu.Unlock()
		})
	}
	call("a")
	<-h.entered
	for i, name := range []string{"b", "c", "d"} {
		// One at a time, so they wait in this order.
		call(name)
		waittest.Until(t, 5*time.Second, "the call of "+name+" waiting", func() bool { return len(g.calls) == i+1 })
	}
	close(h.release)
	wg.Wait()

	want := [][]string{{"a0", "a1"}, {"b0", "b1", "c0", "c1", "c2"}, {"d0"}}
	if !slices.EqualFunc(h.calls, want, slices.Equal) {
		t.Fatalf("the handler's calls took %v, want %v (b and c together: 5 events, max 5)", h.calls, want)
	}
	for name, evs := range batches {
		if len(got[name]) != len(evs) {
			t.Fatalf("%s: %d results for %d events", name, len(got[name]), len(evs))
		}
		for i, r := range got[name] {
			if r.Label != evs[i].OrderNo {
				t.Errorf("%s: result %d is %q's, want %q's", name, i, r.Label, evs[i].OrderNo)
			}
		}
	}
}
