// Package sweep finds stranded reservations, ones still unconfirmed long
// after they were made (the API died between reserving and publishing, the
// publish outcome was unknown, or the API gave the order up in MySQL when
// Redis could not be told), and finishes them: it confirms or releases
// those MySQL already decided, and re-publishes the rest (the consumer is
// idempotent). It never releases a reservation MySQL has not decided: a
// consumer may be inside its transaction.
package sweep

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill/seckill/pkg/lock"
	"github.com/seckill/seckill/pkg/metrics"
	"github.com/seckill/seckill/pkg/order"
	"github.com/seckill/seckill/pkg/orderdb"
	"github.com/seckill/seckill/pkg/stockredis"
	"github.com/seckill/seckill/pkg/tick"
)

// Publisher re-publishes events.
type Publisher interface {
	Publish(ctx context.Context, e order.Event) error
}

// Sweeper runs the sweep; exactly one runs at a time across processes.
type Sweeper struct {
	Stock     *stockredis.Store
	DB        *orderdb.DB
	Publisher Publisher
	Locker    *lock.Locker
	// After is how old an unconfirmed reservation must be to count as
	// stranded (default 10s; keep it above the publish timeout).
	After time.Duration
	// Every is the pause between sweeps (default 2s).
	Every time.Duration
	Log   *slog.Logger
	// Metrics counts what the sweep did; nil counts nothing.
	Metrics *metrics.Sweep
}

// Stats counts what one sweep did.
type Stats struct {
	Confirmed, Released, Republished int
}

// Run sweeps every Every until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	every := s.Every
	if every <= 0 {
		every = 2 * time.Second
	}
	tick.Every(ctx, every, func(ctx context.Context) {
		st, err := s.SweepOnce(ctx)
		s.Metrics.Swept(st.Confirmed, st.Released, st.Republished)
		switch {
		case errors.Is(err, lock.ErrNotAcquired), ctx.Err() != nil:
		case err != nil:
			s.Metrics.Failed()
			s.Log.Warn("sweep failed", "err", err)
		case st != Stats{}:
			s.Log.Info("stranded reservations swept", "confirmed", st.Confirmed, "released", st.Released, "republished", st.Republished)
		}
	})
}

// SweepOnce sweeps every warmed item once, under the "sweep" lock. It
// returns lock.ErrNotAcquired when another process is sweeping.
func (s *Sweeper) SweepOnce(ctx context.Context) (Stats, error) {
	var st Stats
	l, err := s.Locker.TryLock(ctx, "sweep", lock.WithTTL(15*time.Second))
	if err != nil {
		return st, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	lctx, cancel := l.Context(ctx)
	defer cancel()

	after := s.after()
	items, err := s.Stock.WarmedItems(lctx)
	if err != nil {
		return st, err
	}
	for _, item := range items {
		if err := s.sweepItem(lctx, item, time.Now().Add(-after), &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

func (s *Sweeper) after() time.Duration {
	if s.After <= 0 {
		return 10 * time.Second
	}
	return s.After
}

func (s *Sweeper) sweepItem(ctx context.Context, item int64, cutoff time.Time, st *Stats) error {
	nos, err := s.Stock.PendingOlderThan(ctx, item, cutoff, 500)
	if err != nil || len(nos) == 0 {
		return err
	}
	inDB, err := s.DB.Orders(ctx, nos)
	if err != nil {
		return err
	}
	var confirm []string
	for _, no := range nos {
		info, err := s.Stock.Reservation(ctx, item, no)
		if errors.Is(err, order.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		log := s.Log.With("order_no", no, "user_id", info.UserID, "item_id", item)
		if o, ok := inDB[no]; ok {
			if o.Status == order.Failed {
				// MySQL's FAILED row is final, so even a CLAIMED reservation
				// may go: no consumer can create this order any more. An
				// order the API gave up (it answered 503) frees its key.
				ok, _, err := s.Stock.Release(ctx, info.Ref, o.FailureReason, order.AnsweredUnavailable(o.FailureReason),
					stockredis.StateReserved, stockredis.StateClaimed)
				if err != nil {
					return err
				}
				if ok {
					st.Released++
					log.Info("stranded reservation released", "reason", o.FailureReason)
				}
				continue
			}
			confirm = append(confirm, no)
			continue
		}
		switch info.State {
		case stockredis.StateReserved:
		case stockredis.StateClaimed:
			// A consumer took the event; if it died, Kafka redelivers the
			// uncommitted message. Re-publish only when that has not
			// happened for much longer (the message itself was lost).
			if info.ReservedAt.After(cutoff.Add(-5 * s.after())) {
				continue
			}
		default:
			continue
		}
		ev := order.Event{
			Version: order.EventVersion, OrderNo: no, IdempotencyKey: info.IdempotencyKey,
			UserID: info.UserID, ItemID: item, ActivityID: info.ActivityID, Quantity: info.Quantity,
			ReservedAt: info.ReservedAt,
		}
		if err := s.Publisher.Publish(ctx, ev); err != nil {
			return err
		}
		// Push its sweep time forward so it is not re-published every round
		// while the consumer works through a backlog.
		if err := s.Stock.Touch(ctx, item, no, time.Now()); err != nil {
			return err
		}
		st.Republished++
		log.Info("stranded reservation re-published", "state", info.State)
	}
	n, err := s.Stock.Confirm(ctx, item, confirm)
	st.Confirmed += int(n)
	return err
}
