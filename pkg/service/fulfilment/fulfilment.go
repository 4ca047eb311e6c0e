// Package fulfilment writes the orders the consumer takes from Kafka into
// MySQL, the final truth: the conditional stock update and the order rows
// of a batch in one unit of work, or, when MySQL cannot take the batch
// whole, each order in a unit of its own, so the exact tail of the stock
// still sells and only the orders MySQL refuses fail.
package fulfilment

import (
	"context"
	"errors"
	"maps"

	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// Orders is MySQL as fulfilment writes orders (*orderdb.Orders).
type Orders interface {
	Orders(ctx context.Context, orderNos []string) (map[string]order.Order, error)
	FulfilBatch(ctx context.Context, reqs []order.FulfilRequest) (refused map[string]string, ok bool, err error)
	FulfilOne(ctx context.Context, r order.FulfilRequest) (order.FulfilOutcome, error)
	// LiveOrderOf is the number of user's live order in activity, "" if
	// none.
	LiveOrderOf(ctx context.Context, activity int64, user string) (string, error)
}

// Events is the outbox (*orderdb.Outbox): the events written with the
// orders, in their unit.
type Events interface {
	Record(ctx context.Context, evs ...outbox.Event) error
}

// Draws is MySQL as fulfilment reads a draw's picks (*orderdb.Draws).
type Draws interface {
	// PromotedAlternates lists the alternates numbered for one of the
	// orders orderNos.
	PromotedAlternates(ctx context.Context, orderNos []string) ([]draw.Picked, error)
}

// Service writes orders. Tx is the unit of work each write runs in, with
// each order's first event (order.created or order.failed) and, for an
// order of a draw's alternate that commits CREATED, the entry's
// entry.promoted: the alternate's promotion is final there (a number the
// drawer takes back, or an order MySQL refuses, promotes nobody).
type Service struct {
	Tx     unit.Work
	Orders Orders
	Events Events
	// Draws finds the alternates among the orders a draw made (required
	// when a batch holds such orders).
	Draws Draws
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
// then). An order refused for the buyer's live one names it (Holder).
func (s *Service) Fulfil(ctx context.Context, reqs []order.FulfilRequest) (map[string]order.FulfilOutcome, error) {
	out, err := s.fulfil(ctx, reqs)
	if err != nil {
		return nil, err
	}
	return out, s.holders(ctx, reqs, out)
}

// holders names, on each outcome of reqs refused for a live order of the
// buyer's (order.CollidesWithLive), that order, new refusals and
// redelivered ones alike: the release of a redelivery may not have run.
// They are rare (a quota Redis lost let the second order through), and
// each costs a read.
func (s *Service) holders(ctx context.Context, reqs []order.FulfilRequest, out map[string]order.FulfilOutcome) error {
	for _, r := range reqs {
		o := out[r.Event.OrderNo]
		if o.Status != order.Failed || !order.CollidesWithLive(o.Reason) || o.Holder != "" {
			continue
		}
		holder, err := s.Orders.LiveOrderOf(ctx, r.Event.ActivityID, r.Event.UserID)
		if err != nil {
			return err
		}
		o.Holder = holder
		out[r.Event.OrderNo] = o
	}
	return nil
}

// fulfil is Fulfil without the holders.
func (s *Service) fulfil(ctx context.Context, reqs []order.FulfilRequest) (map[string]order.FulfilOutcome, error) {
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
		promoted, err := s.promotions(ctx, todo, written)
		if err != nil {
			return nil, err
		}
		return written, s.Events.Record(ctx, append(evs, promoted...)...)
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
			if err != nil || o.Existing { // its writer wrote its events
				return o, err
			}
			promoted, err := s.promotions(ctx, []order.FulfilRequest{r}, map[string]order.FulfilOutcome{r.Event.OrderNo: o})
			if err != nil {
				return o, err
			}
			return o, s.Events.Record(ctx, append([]outbox.Event{outbox.New(r.Order(o))}, promoted...)...)
		})
		if err != nil {
			return nil, err
		}
		out[r.Event.OrderNo] = o
	}
	return out, nil
}

// promotions are the entry.promoted events of the orders of reqs that
// commit CREATED (written) and that a draw's alternate is numbered for,
// in ctx's unit. Only an order the drawer made (keyed by an entry) is
// looked up.
func (s *Service) promotions(ctx context.Context, reqs []order.FulfilRequest, written map[string]order.FulfilOutcome) ([]outbox.Event, error) {
	var nos []string
	for _, r := range reqs {
		if _, drawn := order.DrawEntryOf(r.Event.IdempotencyKey); drawn && written[r.Event.OrderNo].Status == order.Created {
			nos = append(nos, r.Event.OrderNo)
		}
	}
	if len(nos) == 0 {
		return nil, nil
	}
	if s.Draws == nil {
		return nil, errors.New("fulfilment: orders of a draw, and no store to find its alternates (Service.Draws)")
	}
	picks, err := s.Draws.PromotedAlternates(ctx, nos)
	if err != nil {
		return nil, err
	}
	evs := make([]outbox.Event, len(picks))
	for i, p := range picks {
		evs[i] = outbox.Promoted(p)
	}
	return evs, nil
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
