// Package eventcheck holds the events a receiver got to MySQL: given what
// arrived (at a webhook endpoint, or read from the Kafka topic), in the
// order it arrived and with every redelivery, and the sales it is about,
// it reports each promise of docs/events.md the deliveries broke. Every
// event MySQL committed for the sales' orders and draw entries arrived;
// each stream's events first arrived in seq order; an order's last event
// delivered states its status in MySQL; a stream opens with its creation
// (or failure, or a draw's outcome); no event names an order or entry
// MySQL does not have; and each event is the one the outbox holds under
// its id. The tests and the soak run it once the outbox has drained: an
// event still on its way counts as missing.
package eventcheck

import (
	"context"
	"fmt"
	"slices"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// Store is what MySQL holds of the events (*orderdb.Streams).
type Store interface {
	// Heads returns the head of every order and draw entry of sales, and
	// of each stream of named MySQL has (whatever its sale).
	Heads(ctx context.Context, sales []int64, named []string) ([]outbox.Head, error)
	// Events returns the outbox's events of streams.
	Events(ctx context.Context, streams []string) ([]outbox.Event, error)
}

// Checker checks deliveries against MySQL. Tx is the unit its reads share,
// so the heads and the outbox rows are one moment's.
type Checker struct {
	Tx    unit.Work
	Store Store
}

// Check reads what MySQL holds of sales and of the streams delivered names,
// and compares delivered, the events a receiver got in the order they
// arrived (duplicates included), with it (Compare).
func (c *Checker) Check(ctx context.Context, sales []int64, delivered []outbox.Event) (Report, error) {
	if len(sales) == 0 {
		return Report{}, order.Errorf(order.ErrInvalidArgument, "eventcheck: name the sales whose events to check")
	}
	var named []string
	seen := map[string]bool{}
	for _, e := range delivered {
		if s := e.Stream(); !seen[s] && s != "" {
			seen[s] = true
			named = append(named, s)
		}
	}
	var heads []outbox.Head
	var committed []outbox.Event
	err := c.Tx.InTx(ctx, func(ctx context.Context) error {
		var err error
		if heads, err = c.Store.Heads(ctx, sales, named); err != nil {
			return err
		}
		streams := slices.Clone(named)
		for _, h := range heads {
			if !seen[h.Stream] {
				streams = append(streams, h.Stream)
			}
		}
		committed, err = c.Store.Events(ctx, streams)
		return err
	})
	if err != nil {
		return Report{}, fmt.Errorf("eventcheck: read MySQL: %w", err)
	}
	return Compare(sales, heads, committed, delivered), nil
}
