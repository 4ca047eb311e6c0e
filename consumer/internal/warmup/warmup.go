// Package warmup loads each activity's stock into Redis a lead time before
// it starts (SECKILL_WARMUP_LEAD), so an operator cannot forget the
// warm-up; the manual one (POST /admin/v1/activities/{id}/warmup) stays.
// Exactly one process warms at a time across consumers (the "warmup"
// lock), and an activity is warmed once: MySQL records it (warmed_at) and
// the schedule skips it afterwards. The warm-up is the idempotent one of
// package stockredis (MySQL stock minus what is in flight, never raising
// an existing stock key), so a pass cut short by a crash and run again
// changes nothing it already did. A sale the pass fails on (Redis refuses
// its keys, its bucket count contradicts live keys, its times are out of
// range) is reported and skipped for a while (package backoff), and the
// pass goes on with the others: one bad sale never keeps the next from
// opening on time.
package warmup

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/seckill/seckill/consumer/internal/backoff"
	"github.com/seckill/seckill/consumer/internal/pass"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/service/sales"
)

// LockName is the lock a warm-up pass runs under.
const LockName = "warmup"

// pageSize bounds the sales one statement of a pass lists.
const pageSize = 100

// Activities is MySQL as the scheduled warm-up uses it (*orderdb.DB): the
// activities due.
type Activities interface {
	DueForWarmup(ctx context.Context, by, now, afterStart time.Time, afterID int64, limit int) ([]activity.Activity, error)
}

// Warmer warms a sale up and records it (*sales.Service).
type Warmer interface {
	Warmup(ctx context.Context, w sales.Warmup) (sales.Warmed, error)
}

// Scheduler warms activities up on schedule.
type Scheduler struct {
	DB     Activities
	Sales  Warmer
	Locker pass.Locker
	// Lead is how long before starts_at an activity is warmed (default 5m).
	Lead time.Duration
	// Every is the pause between passes (default 1s).
	Every time.Duration
	Log   *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Backoff holds the sales a pass failed on (default: backoff.New
	// without metrics).
	Backoff *backoff.Records

	runner pass.Runner[[]int64]
}

func (s *Scheduler) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// pass is the warm-up's pass: under the LockName lock, every Every.
func (s *Scheduler) pass() pass.Pass[[]int64] {
	return pass.Pass[[]int64]{
		Name: metrics.PassWarmup, Lock: LockName, TTL: 15 * time.Second, Every: s.Every, Default: time.Second,
		Locker: s.Locker, Log: s.Log, Records: s.Backoff, Work: s.warmDue,
		FailedMsg: "scheduled warm-up failed; trying again",
	}
}

// Run warms due activities every Every until ctx ends.
func (s *Scheduler) Run(ctx context.Context) { s.runner.Run(ctx, s.pass()) }

// Once runs one pass under the lock and returns the ids of the activities
// it warmed; lock.ErrNotAcquired means another process is warming.
func (s *Scheduler) Once(ctx context.Context) ([]int64, error) { return s.runner.Once(ctx, s.pass()) }

// warmDue warms every activity due and returns the ids of those it
// warmed; b backs off the sales it fails on.
func (s *Scheduler) warmDue(ctx context.Context, b *backoff.Records) ([]int64, error) {
	lead := s.Lead
	if lead <= 0 {
		lead = 5 * time.Minute
	}
	now := s.now()
	var warmed []int64
	// The due sales, a page at a time (each statement bounded, whatever
	// was scheduled); a pass goes through them all.
	var after activity.Activity
	for {
		due, err := s.DB.DueForWarmup(ctx, now.Add(lead), now, after.StartsAt, after.ID, pageSize)
		if err != nil {
			return warmed, err
		}
		for _, a := range due {
			key := strconv.FormatInt(a.ID, 10)
			if !b.Due(key) {
				continue
			}
			log := s.Log.With("activity_id", a.ID, "item_id", a.ItemID, "starts_at", a.StartsAt)
			ok, err := s.warm(ctx, a, now, lead, log)
			if ctx.Err() != nil {
				// The lock was lost or the consumer is stopping: not the sale's fault.
				return warmed, ctx.Err()
			}
			if err != nil {
				b.Failed(key, err, "activity_id", a.ID, "item_id", a.ItemID, "starts_at", a.StartsAt)
				continue
			}
			b.Succeeded(key, "activity_id", a.ID, "item_id", a.ItemID)
			if ok {
				warmed = append(warmed, a.ID)
			}
		}
		if len(due) < pageSize {
			break
		}
		after = due[len(due)-1]
	}
	return warmed, nil
}

// warm warms one due activity up, each of its items, and records it
// (sales.Service.Warmup); it reports whether it loaded any stock (false:
// the sale had started with the stock of its items in Redis).
func (s *Scheduler) warm(ctx context.Context, a activity.Activity, now time.Time, lead time.Duration, log *slog.Logger) (bool, error) {
	w, err := s.Sales.Warmup(ctx, sales.Warmup{Due: &a, Now: now})
	if err != nil {
		return false, err
	}
	if len(w.Loaded) == 0 {
		log.Info("activity started with its stock in Redis already; not warmed again")
		return false, nil
	}
	var stock any = w.Loaded // by item, for a sale of several
	if !a.Sized() {
		stock = w.Loaded[a.ItemID]
	}
	log.Info("activity warmed up on schedule", "redis_stock", stock, "lead", lead.String())
	return true, nil
}
