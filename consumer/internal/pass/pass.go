// Package pass runs the consumer's periodic passes (the sweep, the closer,
// the scheduled warm-up, the drawer): the skeleton they share, so that each
// declares only its own work. A pass runs every interval, under a named
// distributed lock, so that one process of the group does it at a time;
// its work runs with the lock's context (it ends when the lock is lost),
// and the lock is released after it, even when the consumer stops. The
// records a pass fails on are backed off (package backoff) and reported at
// the end of each pass. A pass that cannot take the lock (another process
// holds it) does nothing and reports no records; one that fails is logged
// and counted, unless the consumer is stopping.
package pass

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/consumer/internal/backoff"
	"github.com/seckill/seckill/pkg/foundation/periodic"
)

// Locker is the distributed lock a pass runs under: *lock.Locker, whose
// Hold takes name with the lease ttl in one attempt, returns the work's
// context (it ends when the lock is lost) and done (it releases the lock),
// or an error; one saying HeldElsewhere (lock.ErrNotAcquired) means
// another process holds the lock.
type Locker interface {
	Hold(ctx context.Context, name string, ttl time.Duration) (work context.Context, done func(), err error)
}

// HeldElsewhere reports whether err, from Locker.Hold (or the lock's
// TryLock), says that another process holds the lock.
func HeldElsewhere(err error) bool {
	var e interface{ HeldElsewhere() bool }
	return errors.As(err, &e) && e.HeldElsewhere()
}

// Pass is what a periodic pass declares: its name, its lock, its interval,
// its work and what it tells of each pass.
type Pass[R any] struct {
	// Name names the pass in its records' logs and in the metrics' pass
	// label (metrics.PassSweep, ...).
	Name string
	// Lock is the distributed lock the pass runs under, TTL its lease.
	Lock string
	TTL  time.Duration
	// Every is the pause between passes; Default when it is not positive.
	Every, Default time.Duration
	Locker         Locker
	Log            *slog.Logger
	// Records backs off the records the pass fails on; nil: the runner's
	// own, backoff.New(Name, Log, nil), made at first use and kept.
	Records *backoff.Records
	// Work is one pass. It runs while the lock is held, with the lock's
	// context, and is given the records to back off.
	Work func(ctx context.Context, records *backoff.Records) (R, error)
	// FailedMsg is the warning a failed pass logs, with its error.
	FailedMsg string
	// Failed counts a failed pass; nil counts nothing.
	Failed func()
	// Done is told what every pass did (the zero R when it did not run),
	// and whether it was clean: it ran with the lock, without an error,
	// and the consumer is not stopping. Nil tells nothing.
	Done func(r R, clean bool)
}

func (p Pass[R]) every() time.Duration {
	if p.Every <= 0 {
		return p.Default
	}
	return p.Every
}

// Runner runs a pass and keeps what lasts from one pass to the next: the
// default records. The zero value is ready to use; it is meant to be a
// field of the type that declares the pass.
type Runner[R any] struct {
	once    sync.Once
	records *backoff.Records
}

// recordsOf is p's records: p.Records, else the runner's own.
func (r *Runner[R]) recordsOf(p Pass[R]) *backoff.Records {
	if p.Records != nil {
		return p.Records
	}
	r.once.Do(func() { r.records = backoff.New(p.Name, p.Log, nil) })
	return r.records
}

// Run runs p every p.Every until ctx ends. A pass that finds the lock held
// elsewhere sets its records' metric to 0 (Records.Idle); one that fails is
// logged at warning level with p.FailedMsg and counted (p.Failed), unless
// ctx ended.
func (r *Runner[R]) Run(ctx context.Context, p Pass[R]) {
	periodic.Every(ctx, p.every(), func(ctx context.Context) {
		res, err := r.Once(ctx, p)
		clean := false
		switch {
		case HeldElsewhere(err):
			r.recordsOf(p).Idle()
		case ctx.Err() != nil:
		case err != nil:
			if p.Failed != nil {
				p.Failed()
			}
			p.Log.Warn(p.FailedMsg, "err", err)
		default:
			clean = true
		}
		if p.Done != nil {
			p.Done(res, clean)
		}
	})
}

// Once runs one pass under p's lock and returns what p.Work returned; it
// returns the Locker's error (lock.ErrNotAcquired when another process
// holds the lock) without running the work. The records are reported
// after the work, then the lock is released.
func (r *Runner[R]) Once(ctx context.Context, p Pass[R]) (R, error) {
	work, done, err := p.Locker.Hold(ctx, p.Lock, p.TTL)
	if err != nil {
		var zero R
		return zero, err
	}
	defer done()
	b := r.recordsOf(p)
	defer b.Report()
	return p.Work(work, b)
}
