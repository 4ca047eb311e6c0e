// Package warmup loads each activity's stock into Redis a lead time before
// it starts (SECKILL_WARMUP_LEAD), so an operator cannot forget the
// warm-up; the manual one (POST /admin/v1/activities/{id}/warmup) stays.
// Exactly one process warms at a time across consumers (the "warmup"
// lock), and an activity is warmed once: MySQL records it (warmed_at) and
// the schedule skips it afterwards. The warm-up is the idempotent one of
// package stockredis (MySQL stock minus what is in flight, never raising
// an existing stock key), so a pass cut short by a crash and run again
// changes nothing it already did.
package warmup

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill/seckill/pkg/lock"
	"github.com/seckill/seckill/pkg/orderdb"
	"github.com/seckill/seckill/pkg/reconcile"
	"github.com/seckill/seckill/pkg/stockredis"
	"github.com/seckill/seckill/pkg/tick"
)

// LockName is the lock a warm-up pass runs under.
const LockName = "warmup"

// Scheduler warms activities up on schedule.
type Scheduler struct {
	DB     *orderdb.DB
	Stock  *stockredis.Store
	Locker *lock.Locker
	// Lead is how long before starts_at an activity is warmed (default 5m).
	Lead time.Duration
	// Every is the pause between passes (default 1s).
	Every time.Duration
	// PaymentWindow is the payment window of activities without their own;
	// with the activity's end it sets the stock key's TTL.
	PaymentWindow time.Duration
	Log           *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (s *Scheduler) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Run warms due activities every Every until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	every := s.Every
	if every <= 0 {
		every = time.Second
	}
	tick.Every(ctx, every, func(ctx context.Context) {
		if _, err := s.Once(ctx); err != nil && !errors.Is(err, lock.ErrNotAcquired) && ctx.Err() == nil {
			s.Log.Warn("scheduled warm-up failed; trying again", "err", err)
		}
	})
}

// Once runs one pass under the lock and returns the ids of the activities
// it warmed; lock.ErrNotAcquired means another process is warming.
func (s *Scheduler) Once(ctx context.Context) ([]int64, error) {
	l, err := s.Locker.TryLock(ctx, LockName, lock.WithTTL(15*time.Second))
	if err != nil {
		return nil, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	ctx, cancel := l.Context(ctx)
	defer cancel()
	lead := s.Lead
	if lead <= 0 {
		lead = 5 * time.Minute
	}
	now := s.now()
	due, err := s.DB.DueForWarmup(ctx, now.Add(lead), now)
	if err != nil {
		return nil, err
	}
	var warmed []int64
	for _, a := range due {
		log := s.Log.With("activity_id", a.ID, "item_id", a.ItemID, "starts_at", a.StartsAt)
		if !now.Before(a.StartsAt) {
			// Started without a warm-up on record (the consumers were down,
			// or the activity came from before this schedule). If Redis
			// holds the item's stock, buyers are using it: a warm-up now
			// could only lower it, so it is left to the reconciler.
			snap, err := s.Stock.Stock(ctx, a.ItemID)
			if err != nil {
				return warmed, err
			}
			if snap.Warmed {
				if err := s.DB.MarkActivityWarmed(ctx, a.ID); err != nil {
					return warmed, err
				}
				log.Info("activity started with its stock in Redis already; not warmed again")
				continue
			}
		}
		ttl := a.EndsAt.Sub(now) + a.PaymentWindowOr(s.PaymentWindow) + reconcile.KeyMargin
		n, err := s.Stock.WarmupFrom(ctx, a.ItemID, a.StockBuckets, ttl, s.DB)
		if err != nil {
			return warmed, err
		}
		if err := s.DB.MarkActivityWarmed(ctx, a.ID); err != nil {
			return warmed, err
		}
		warmed = append(warmed, a.ID)
		log.Info("activity warmed up on schedule", "redis_stock", n, "lead", lead.String())
	}
	return warmed, nil
}
