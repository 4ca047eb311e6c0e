// Package fulfilment writes the orders the consumer takes from Kafka into
// MySQL, the final truth: the conditional stock update and the order rows
// of a batch in one unit of work, or, when MySQL cannot take the batch
// whole, each order in a unit of its own, so the exact tail of the stock
// still sells and only the orders MySQL refuses fail.
package fulfilment

import (
	"context"
	"maps"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// Orders is MySQL as fulfilment writes orders (*orderdb.Orders).
type Orders interface {
	Orders(ctx context.Context, orderNos []string) (map[string]order.Order, error)
	FulfilBatch(ctx context.Context, reqs []order.FulfilRequest) (refused map[string]string, ok bool, err error)
	FulfilOne(ctx context.Context, r order.FulfilRequest) (order.FulfilOutcome, error)
}

// Events is the outbox (*orderdb.Outbox): the events written with the
// orders, in their unit.
type Events interface {
	Record(ctx context.Context, evs ...outbox.Event) error
}

// Service writes orders. Tx is the unit of work each write runs in, with
// each order's first event (order.created or order.failed).
type Service struct {
	Tx     unit.Work
	Orders Orders
	Events Events
}

// Fulfil writes orders, of one item or of several (the sizes of one sale),
// and returns one outcome per order number: CREATED, or FAILED with the
// reason MySQL refused it (out of stock, refused by the sale's window or
// limit, a live order of the user's already, a duplicate request). Orders
// MySQL already has are reported as they are (Existing) and not touched;
// an event twice in reqs is written once. It first tries the whole batch
// in one unit; if MySQL cannot take all of it, it goes order by order. An
// error wraps order.ErrUnavailable when nothing may be assumed and the
// batch must be retried (what committed before stays, and is Existing
// then).
func (s *Service) Fulfil(ctx context.Context, reqs []order.FulfilRequest) (map[string]order.FulfilOutcome, error) {
	out, todo, err := s.fresh(ctx, reqs)
	if err != nil || len(todo) == 0 {
		return out, err
	}
	// nil written: MySQL could not take the batch whole.
	written, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (map[string]order.FulfilOutcome, error) {
		refused, whole, err := s.Orders.FulfilBatch(ctx, todo)
		if err != nil || !whole {
			return nil, err
		}
		written := make(map[string]order.FulfilOutcome, len(todo))
		evs := make([]outbox.Event, len(todo))
		for i, r := range todo {
			o := order.FulfilOutcome{Status: order.Created}
			if reason := refused[r.Event.OrderNo]; reason != "" {
				o = order.FulfilOutcome{Status: order.Failed, Reason: reason}
			}
			written[r.Event.OrderNo] = o
			evs[i] = outbox.New(r.Order(o))
		}
		return written, s.Events.Record(ctx, evs...)
	})
	if err != nil {
		return nil, err
	}
	if written != nil {
		maps.Copy(out, written)
		return out, nil
	}
	for _, r := range todo {
		o, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (order.FulfilOutcome, error) {
			o, err := s.Orders.FulfilOne(ctx, r)
			if err != nil || o.Existing { // its writer wrote its event
				return o, err
			}
			return o, s.Events.Record(ctx, outbox.New(r.Order(o)))
		})
		if err != nil {
			return nil, err
		}
		out[r.Event.OrderNo] = o
	}
	return out, nil
}

// fresh returns the outcomes of the orders of reqs MySQL already has and
// the requests left to write, each order once.
func (s *Service) fresh(ctx context.Context, reqs []order.FulfilRequest) (map[string]order.FulfilOutcome, []order.FulfilRequest, error) {
	nos := make([]string, len(reqs))
	for i, r := range reqs {
		nos[i] = r.Event.OrderNo
	}
	existing, err := s.Orders.Orders(ctx, nos)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]order.FulfilOutcome, len(reqs))
	todo := make([]order.FulfilRequest, 0, len(reqs))
	seen := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		no := r.Event.OrderNo
		if o, ok := existing[no]; ok {
			out[no] = order.FulfilOutcome{Status: o.Status, Reason: o.FailureReason, Existing: true}
			continue
		}
		if !seen[no] { // the same event twice in one batch is written once
			seen[no] = true
			todo = append(todo, r)
		}
	}
	return out, todo, nil
}
