// Package relay publishes the outbox (package outbox) to Kafka: the events
// every order change wrote in its own transaction reach the topic at least
// once, each order's in seq order. Relays share the outbox's shards: a
// relay holds a shard (in MySQL, for one unit of work) while it publishes
// a batch of the shard's events and marks them published, so any number
// of relays may run and each order's events are relayed one batch after
// the other. A relay that dies between the publish and the mark, or whose
// mark's answer is lost, leaves the events unmarked: they are published
// again, with the same ids.
package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/foundation/failpoint"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// Store is the outbox in MySQL (*orderdb.Outbox).
type Store interface {
	PendingShards(ctx context.Context) ([]int, error)
	ClaimShard(ctx context.Context, shard int) (bool, error)
	Unpublished(ctx context.Context, shard, limit int) ([]outbox.Event, error)
	MarkPublished(ctx context.Context, ids []string) error
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

// errPublish marks a batch Kafka did not take.
var errPublish = errors.New("outbox relay: publish")

// Relay relays the outbox. Batch bounds the events of one shard a unit
// publishes (default 500). Fanout, when set, queues each batch for the
// webhooks.
type Relay struct {
	Tx        unit.Work
	Store     Store
	Publisher Publisher
	Fanout    Fanout
	Batch     int
}

// Pass publishes the events pending when it starts, a batch per shard at
// a time, skipping the shards another relay holds, and returns how many it
// published. A shard whose publish or mark fails stays as it was for the
// next pass (its error is returned with the others'); a publish that fails
// ends the pass, since Kafka would refuse the other shards' as well.
func (r *Relay) Pass(ctx context.Context) (int, error) {
	shards, err := r.Store.PendingShards(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for _, shard := range shards {
		for ctx.Err() == nil {
			n, err := r.batch(ctx, shard)
			total += n
			if errors.Is(err, errPublish) {
				return total, errors.Join(append(errs, err)...)
			}
			if err != nil {
				errs = append(errs, err)
			}
			if err != nil || n < r.size() {
				break
			}
		}
	}
	return total, errors.Join(append(errs, ctx.Err())...)
}

func (r *Relay) size() int {
	if r.Batch <= 0 {
		return 500
	}
	return r.Batch
}

// batch publishes one batch of shard's events in a unit that holds the
// shard, and returns how many (0: none, or another relay holds it).
func (r *Relay) batch(ctx context.Context, shard int) (int, error) {
	return unit.Do(ctx, r.Tx, func(ctx context.Context) (int, error) {
		held, err := r.Store.ClaimShard(ctx, shard)
		if err != nil || !held {
			return 0, err
		}
		evs, err := r.Store.Unpublished(ctx, shard, r.size())
		if err != nil || len(evs) == 0 {
			return 0, err
		}
		if err := r.Publisher.Publish(ctx, evs); err != nil {
			return 0, fmt.Errorf("%w: %w", errPublish, err)
		}
		// A relay that dies here leaves Kafka holding the batch and MySQL
		// not saying so: it is published again (chaos tests crash here).
		failpoint.Inject("relay-after-publish")
		if r.Fanout != nil {
			if err := r.Fanout.Fan(ctx, evs); err != nil {
				return 0, err
			}
		}
		ids := make([]string, len(evs))
		for i, e := range evs {
			ids[i] = e.ID
		}
		return len(evs), r.Store.MarkPublished(ctx, ids)
	})
}
