package heal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/pkg/lock"
	"github.com/seckill/seckill/pkg/reconcile"
)

// LockTTL is the lease of the reconcile lock a repair pass holds (the
// watchdog renews it while the pass lasts), as the reconciler's.
const LockTTL = 30 * time.Second

// Repairer runs the reconciler's checked repair (what `reconciler --repair`
// runs) over every item with an activity on sale. The items come from
// MySQL's activities, not from Redis's list of warmed items, which went
// with the data; a bucketed item is laid out from its activity's
// stock_buckets (set Checker.Warmer).
type Repairer struct {
	Checker *reconcile.Checker
	Locker  *lock.Locker
}

// Repair is a heal.Repair: one pass under the reconcile lock. A pass that
// finds the lock held (a reconciler is running) fails and is retried.
func (r *Repairer) Repair(ctx context.Context) (bool, error) {
	l, err := r.Locker.TryLock(ctx, reconcile.LockName, lock.WithTTL(LockTTL))
	if errors.Is(err, lock.ErrNotAcquired) {
		return false, fmt.Errorf("a reconciler holds the %q lock", reconcile.LockName)
	}
	if err != nil {
		return false, fmt.Errorf("take the %q lock: %w", reconcile.LockName, err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	lctx, stop := l.Context(ctx)
	defer stop()
	targets, err := r.Checker.Targets(lctx, reconcile.Selection{})
	if err != nil {
		return false, err
	}
	rep, err := r.Checker.Run(lctx, targets, true, l)
	if err != nil {
		if lerr := l.Err(); lerr != nil {
			return false, fmt.Errorf("%w (%w): %w", reconcile.ErrLockLost, lerr, err)
		}
		return false, err
	}
	if rep.ExitCode() != 0 {
		return false, errors.New(rep.Summary())
	}
	repaired := false
	for _, it := range rep.Items {
		repaired = repaired || it.Verdict == reconcile.Repaired
	}
	return repaired, nil
}
