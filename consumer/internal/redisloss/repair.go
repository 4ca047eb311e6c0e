package redisloss

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/seckill/seckill/consumer/internal/pass"
	"github.com/seckill/seckill/pkg/service/reconcile"
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
	// TryLock takes the lock name in one attempt with the lease ttl (the
	// wiring's *lock.Locker, TryLock with WithTTL); an error that says
	// HeldElsewhere (lock.ErrNotAcquired) means another holder has it.
	TryLock func(ctx context.Context, name string, ttl time.Duration) (Lock, error)
}

// Lock is the reconcile lock as a repair pass holds it (*lock.Lock): the
// fencing token and the loss the repairs go by (reconcile.Lock), a context
// that ends with the lock, why it was lost, and its release.
type Lock interface {
	reconcile.Lock
	Context(parent context.Context) (context.Context, context.CancelFunc)
	Err() error
	Release(ctx context.Context) error
}

// PassError is the error of a pass that went over every item but left some
// of them disagreeing: items it could not check or repair (a store's error
// for that item), or drift it could not repair. The other items were
// checked and repaired all the same.
type PassError struct {
	// Summary is the report's summary line.
	Summary string
	// Unchecked is the error of each item whose check or repair failed,
	// by item id.
	Unchecked map[int64]string
	// Repaired lists the items the pass repaired.
	Repaired []int64
}

func (e *PassError) Error() string {
	s := e.Summary
	ids := make([]int64, 0, len(e.Unchecked))
	for id := range e.Unchecked {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s += fmt.Sprintf("; item %d unchecked: %s", id, e.Unchecked[id])
	}
	return s
}

// Repair is a Repair: one pass under the reconcile lock. A pass that
// finds the lock held (a reconciler is running) fails and is retried. An
// item that fails does not stop the pass (see reconcile.Checker.Run): the
// pass repairs the others, and returns whether it repaired any with a
// *PassError naming the ones that failed.
func (r *Repairer) Repair(ctx context.Context) (bool, error) {
	l, err := r.TryLock(ctx, reconcile.LockName, LockTTL)
	if pass.HeldElsewhere(err) {
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
	rep, err := r.Checker.Run(lctx, targets, reconcile.CheckAndRepair, l)
	var repaired []int64
	for _, it := range rep.Items {
		if it.Verdict == reconcile.Repaired {
			repaired = append(repaired, it.ItemID)
		}
	}
	if err != nil {
		if lerr := l.Err(); lerr != nil {
			return len(repaired) > 0, fmt.Errorf("%w (%w): %w", reconcile.ErrLockLost, lerr, err)
		}
		return len(repaired) > 0, err
	}
	if rep.ExitCode() != 0 {
		pe := &PassError{Summary: rep.Summary(), Unchecked: map[int64]string{}, Repaired: repaired}
		for _, it := range rep.UncheckedItems() {
			pe.Unchecked[it.ItemID] = it.Error
		}
		return len(repaired) > 0, pe
	}
	return len(repaired) > 0, nil
}
