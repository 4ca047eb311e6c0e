package orderevents

import (
	"context"

	"github.com/seckill/seckill/pkg/foundation/consume"
)

// gang merges the first attempts of the partition workers that wait at
// the same time into one call of the handler, up to max events. Each
// partition's batch is small when a load spreads over many partitions
// (twenty sales at once go to up to twenty of them), and a call costs the
// handler round trips and a MySQL transaction whatever its size: merged,
// the cost is shared as it is by one sale's large batch. There is no timer:
// a call that finds the handler idle runs at once, and the calls that arrive
// while one runs form the next. A retry is not merged (the router calls the
// handler for it directly), so a partition whose events keep failing costs
// the others one shared failure, not one per attempt.
type gang[E any] struct {
	h     EventHandler[E]
	max   int
	calls chan *gangCall[E]
	done  chan struct{}
}

// gangQueue is how many calls may wait for the handler (one per
// partition worker; more wait to be queued).
const gangQueue = 64

type gangCall[E any] struct {
	ctx    context.Context
	events []E
	res    []consume.Result
	done   chan struct{}
}

func startGang[E any](h EventHandler[E], max int) *gang[E] {
	// Each partition worker waits for its call, so the buffer only holds
	// what waits while a call runs.
	g := &gang[E]{h: h, max: max, calls: make(chan *gangCall[E], gangQueue), done: make(chan struct{})}
	go g.run()
	return g
}

// Handle hands events to the gang's handler, merged with the calls waiting
// beside it, and returns their results. If ctx ends before the gang takes
// them, every event is to retry.
func (g *gang[E]) Handle(ctx context.Context, events []E) []consume.Result {
	c := &gangCall[E]{ctx: ctx, events: events, done: make(chan struct{})}
	select {
	case g.calls <- c:
	case <-ctx.Done():
		res := make([]consume.Result, len(events))
		for i := range res {
			res[i] = consume.Result{Outcome: consume.Retry, Err: ctx.Err()}
		}
		return res
	}
	<-c.done
	return c.res
}

// stop ends the gang once no call can come any more.
func (g *gang[E]) stop() {
	close(g.calls)
	<-g.done
}

func (g *gang[E]) run() {
	defer close(g.done)
	var next *gangCall[E] // taken, but it did not fit in the last call
	for {
		first := next
		next = nil
		if first == nil {
			var ok bool
			if first, ok = <-g.calls; !ok {
				return
			}
		}
		group, n := []*gangCall[E]{first}, len(first.events)
	fill:
		for next == nil {
			select {
			case c, ok := <-g.calls:
				if !ok {
					break fill
				}
				if n+len(c.events) > g.max {
					next = c
					break fill
				}
				group = append(group, c)
				n += len(c.events)
			default:
				break fill
			}
		}
		g.handle(group, n)
	}
}

// handle runs one call of the handler for group (n events in all), under
// the first call's context, and answers each.
func (g *gang[E]) handle(group []*gangCall[E], n int) {
	if len(group) == 1 {
		c := group[0]
		c.res = g.h.Handle(c.ctx, c.events)
		close(c.done)
		return
	}
	all := make([]E, 0, n)
	for _, c := range group {
		all = append(all, c.events...)
	}
	res := g.h.Handle(group[0].ctx, all)
	at := 0
	for _, c := range group {
		// A short answer leaves the rest unset, which the router reads
		// as missing results.
		c.res = res[min(at, len(res)):min(at+len(c.events), len(res))]
		at += len(c.events)
		close(c.done)
	}
}
