package lock

import (
	"context"
	"time"
)

// Hold takes the lock name for one piece of work, in one attempt as
// TryLock does, with the lease ttl. It returns the work's context, which
// ends when the lock is lost or ctx ends, and done, to call when the work
// returned: it ends that context and releases the lock with ctx's values
// but not its end, so a holder stopped by ctx still gives the lock back.
// When someone else holds the lock the error matches ErrNotAcquired.
//
// Its types are the standard library's, so code that declares its own
// interface for it (a periodic pass) needs no import of this package; it
// tells ErrNotAcquired by its HeldElsewhere method.
func (lk *Locker) Hold(ctx context.Context, name string, ttl time.Duration) (work context.Context, done func(), err error) {
	l, err := lk.TryLock(ctx, name, WithTTL(ttl))
	if err != nil {
		return nil, nil, err
	}
	work, cancel := l.Context(ctx)
	return work, func() {
		cancel()
		_ = l.Release(context.WithoutCancel(ctx))
	}, nil
}

// heldElsewhere is the type of ErrNotAcquired.
type heldElsewhere struct{}

func (heldElsewhere) Error() string { return "lock: held by another holder" }

// HeldElsewhere says that another holder has the lock: errors.As finds it
// in an error that matches ErrNotAcquired, through an interface
// { HeldElsewhere() bool } of the caller's.
func (heldElsewhere) HeldElsewhere() bool { return true }
