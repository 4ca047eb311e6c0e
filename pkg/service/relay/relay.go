// Package relay publishes the outbox (package outbox) to Kafka: the events
// every order change wrote in its own transaction reach the topic at least
// once, each order's in seq order. Relays share the outbox's shards: a
// relay holds some shards (in MySQL, for one unit of work) while it
// publishes a batch of their events and marks them published, so any number
// of relays may run and each order's events are relayed one batch after
// the other. A relay that dies between the publish and the mark, or whose
// mark's answer is lost, leaves the events unmarked: they are published
// again, with the same ids.
package relay

import (
	"context"
	"slices"

	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/foundation/failpoint"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// Store is the outbox in MySQL (*orderdb.Outbox).
type Store interface {
	PendingShards(ctx context.Context) ([]int, error)
	ClaimShards(ctx context.Context, shards []int, most int) ([]int, error)
	Unpublished(ctx context.Context, shards []int, limit int) ([]outbox.Event, error)
	MarkPublished(ctx context.Context, evs []outbox.Event) error
}

// Publisher writes events to Kafka and returns once Kafka holds them
// (*orderevents.OutboxWriter).
type Publisher interface {
	Publish(ctx context.Context, evs []outbox.Event) error
}

// Fanout queues published events for the webhook endpoints that want
// them, in the unit that marks them published (*webhooks.Fanout).
type Fanout interface {
	Fan(ctx context.Context, evs []outbox.Event) error
}

// Relay relays the outbox. Batch bounds the events a unit publishes
// (default 500), Shards the shards it holds together (default 16: a
// batch gathers the events of many orders, and other relays find shards
// left to take). Fanout, when set, queues each batch for the webhooks.
type Relay struct {
	Tx        unit.Work
	Store     Store
	Publisher Publisher
	Fanout    Fanout
	Batch     int
	Shards    int
}

// Pass publishes the events pending when it starts, a batch at a time
// from up to Shards shards it holds together (skipping those another
// relay holds), and returns how many it published. A batch whose publish
// or mark fails leaves its shards as they were for the next pass, and
// ends this one (Kafka or MySQL would likely refuse the next as well).
func (r *Relay) Pass(ctx context.Context) (int, error) {
	pending, err := r.Store.PendingShards(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for len(pending) > 0 && ctx.Err() == nil {
		n, held, err := r.batch(ctx, pending)
		total += n
		if err != nil || len(held) == 0 {
			return total, err
		}
		if n < r.size() { // the shards held are drained
			pending = slices.DeleteFunc(pending, func(s int) bool { return slices.Contains(held, s) })
		}
	}
	return total, ctx.Err()
}

func (r *Relay) shards() int {
	if r.Shards <= 0 {
		return 16
	}
	return r.Shards
}

func (r *Relay) size() int {
	if r.Batch <= 0 {
		return 500
	}
	return r.Batch
}

// batch publishes one batch of the events of the shards of pending it
// can hold, in a unit that holds them, and returns how many and which
// shards it held (none: others hold them all).
func (r *Relay) batch(ctx context.Context, pending []int) (int, []int, error) {
	var held []int
	n, err := unit.Do(ctx, r.Tx, func(ctx context.Context) (int, error) {
		var err error
		held, err = r.Store.ClaimShards(ctx, pending, r.shards())
		if err != nil || len(held) == 0 {
			return 0, err
		}
		evs, err := r.Store.Unpublished(ctx, held, r.size())
		if err != nil || len(evs) == 0 {
			return 0, err
		}
		if err := r.Publisher.Publish(ctx, evs); err != nil {
			return 0, err
		}
		// A relay that dies here leaves Kafka holding the batch and MySQL
		// not saying so: it is published again (chaos tests crash here).
		failpoint.Inject("relay-after-publish")
		if r.Fanout != nil {
			if err := r.Fanout.Fan(ctx, evs); err != nil {
				return 0, err
			}
		}
		return len(evs), r.Store.MarkPublished(ctx, evs)
	})
	return n, held, err
}
