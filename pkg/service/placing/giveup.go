package placing

import (
	"context"
	"errors"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// giveUp handles a reservation the API cannot confirm: its publish failed
// or its outcome is unknown, or Redis may have run the reserve script
// without the answer arriving. The buyer is to hear 503, which promises
// that no order comes of the request, nothing stays reserved and the key may
// buy again, unless Kafka did take the event and a consumer created it.
//
// MySQL decides first (tried a few times: see abandon): the order is
// recorded FAILED there unless a consumer created it already, and the
// unique order number makes that exactly one of {FAILED here, CREATED by a
// consumer}. The FAILED row is final for the
// consumer, the sweep and the repair, so even a Redis that later comes back
// from an older state with this reservation RESERVED again cannot turn it
// into an order. Then the reservation is released in Redis (any retry of a
// release whose answer was lost finds it RELEASED: done); if Redis cannot be
// told, the sweep releases it later. When MySQL cannot be told, the release
// is the only record of the give-up, and it lasts only as long as Redis
// keeps its writes (logged and counted: released_unrecorded).
func (s *Service) giveUp(ctx context.Context, ev order.Event, reason string, cause error) (Placed, error) {
	ref := reservation.EventRef(ev)
	// The request's context may be what timed out; the release must still run.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	log := logs.WithTrace(ctx, s.Log).With("order_no", ev.OrderNo, "request_id", ev.RequestID, "user_id", ev.UserID, "item_id", ev.ItemID)
	o, dbErr := s.abandon(rctx, ev, reason)
	if dbErr == nil && o.Status != order.Failed {
		s.Metrics.Unpublished(metrics.UnpublishedClaimed)
		log.Info("order not confirmed here but a consumer created it", "status", o.Status, "err", cause)
		return Placed{OrderNo: ev.OrderNo, Status: o.Status}, nil
	}
	recorded := dbErr == nil
	from := []reservation.State{reservation.StateReserved}
	if recorded {
		// No consumer can create the order any more: a claimed reservation
		// may go too.
		from = append(from, reservation.StateClaimed)
	}
	rel, err := s.release(rctx, ref, reservation.ReleaseOptions{Reason: reason, From: from, FreeKey: true})
	state := rel.State
	switch {
	case err == nil && rel.Gone() && !recorded:
		// Nothing is held for this request, but only Redis says so: if
		// Kafka did take the event and Redis loses this release before a
		// consumer reads it (a restore, a flush, a replica that lagged),
		// the consumer finds no reservation and writes the order, as it
		// does for every reservation Redis lost (docs/guarantees.md,
		// Limits).
		s.Metrics.Unpublished(metrics.UnpublishedUnrecorded)
		log.Warn("order not confirmed; reservation released, but MySQL could not record it FAILED",
			"state", state, "reason", reason, "err", cause, "mysql_err", dbErr)
		return Placed{}, logs.Logged(cause)
	case err == nil && rel.Gone():
		// Nothing is held for this request.
		s.Metrics.Unpublished(metrics.UnpublishedReleased)
		log.Warn("order not confirmed; reservation released", "state", state, "reason", reason,
			"status", order.Failed, "recorded", recorded, "err", cause, "mysql_err", dbErr)
		return Placed{}, logs.Logged(cause)
	case err == nil:
		// MySQL could not be asked and a consumer claimed it (and may have
		// finished it since): Kafka did take the event after all.
		s.Metrics.Unpublished(metrics.UnpublishedClaimed)
		log.Info("order not confirmed here but a consumer claimed it", "state", state, "err", cause)
		return Placed{OrderNo: ev.OrderNo, Status: order.Pending}, nil
	case recorded:
		s.Metrics.Unpublished(metrics.UnpublishedAbandoned)
		log.Warn("order not confirmed; recorded FAILED in MySQL, the sweep gives the reservation back",
			"reason", reason, "status", order.Failed, "err", cause, "redis_err", err)
		return Placed{}, logs.Logged(cause)
	default:
		// Two faults at once: the reservation stays as it is and the sweep
		// re-publishes it, so the buyer may end up with an order after all.
		s.Metrics.Unpublished(metrics.UnpublishedKept)
		log.Error("order not confirmed and neither Redis nor MySQL could record it; the sweep will re-publish it",
			"reason", reason, "err", cause, "redis_err", err, "mysql_err", dbErr)
		return Placed{}, logs.Logged(cause)
	}
}

// abandon records the order FAILED in MySQL unless a consumer created it
// (Orders.Abandon, with its outbox event), trying a few times while MySQL
// is unavailable: a connection the server dropped (a restart, a switch to
// the standby behind the same address) fails one transaction, and the FAILED
// row is what keeps a 503 from becoming an order whatever Redis later
// loses. Repeating it is safe: a commit whose answer was lost is found by
// the next attempt (the order number is unique), and not written again.
func (s *Service) abandon(ctx context.Context, ev order.Event, reason string) (order.Order, error) {
	var (
		o   order.Order
		err error
	)
	for attempt := range abandonAttempts {
		o, err = unit.Do(ctx, s.Tx, func(ctx context.Context) (order.Order, error) {
			o, written, err := s.Orders.Abandon(ctx, ev, reason)
			if err != nil || !written { // a consumer wrote it, with its event
				return o, err
			}
			return o, s.Events.Record(ctx, outbox.New(o))
		})
		if err == nil || !errors.Is(err, order.ErrUnavailable) || attempt == abandonAttempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return o, err
		case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
		}
	}
	return o, err
}

// abandonAttempts bounds abandon's tries: 100, 200 and 400 ms apart, 700 ms
// of waiting (besides the tries themselves) before the buyer hears 503
// anyway.
const abandonAttempts = 4

// release runs Stock.Release, trying a few times. Repeating it is safe: a
// release whose answer was lost is found RELEASED by the next attempt.
func (s *Service) release(ctx context.Context, ref reservation.Ref, o reservation.ReleaseOptions) (reservation.Released, error) {
	var (
		rel reservation.Released
		err error
	)
	for attempt := range 3 {
		rel, err = s.Reservations.Release(ctx, ref, o)
		if err == nil {
			return rel, nil
		}
		time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
	}
	return rel, err
}
