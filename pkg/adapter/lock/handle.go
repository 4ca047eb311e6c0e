package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// errStopped is the cause with which Release ends the watchdog; it tells a
// release apart from a cancelled Acquire context.
var errStopped = errors.New("lock: released")

// Lock is one holder of a named lock, as returned by Locker.Acquire and
// Locker.TryLock. It is safe for concurrent use, and it is the unit of
// re-entry: Acquire on it takes the lock again, and each Acquire (including
// the one that created it) needs a Release.
type Lock struct {
	lk       *Locker
	name     string
	key      string
	token    string
	fence    int64
	ttl      time.Duration
	watchdog bool

	stopWatch context.CancelCauseFunc // ends watch; errStopped on release
	lost      chan struct{}           // closed by watch when it returns

	mu         sync.Mutex // serialises Acquire and Release on this handle
	holds      int64      // hold count in Redis as last seen; 0 once ended
	validUntil time.Time  // if the key is still ours, it exists until then
	ended      bool       // the final Release ran, or the key was found not ours
	err        error      // why the lock was lost; nil while held or if released

	lostOnce sync.Once // a handle's loss is reported to Options.OnLost once
}

// Fence returns the fencing token of this acquisition. It is larger than
// the fence of every earlier acquisition of the same name, and stays the
// same across re-entries.
func (l *Lock) Fence() int64 { return l.fence }

// Lost returns a channel that is closed when this handle stops holding the
// lock: the watchdog found the key gone or held by someone else, renewals
// failed until the lease ran out, the lease ran out without a watchdog, the
// context given to Acquire is done, or the final Release ran. After it is
// closed, Err tells which. Work done under the lock should stop writing when
// it is closed.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err returns nil while the lock is held and after the final Release. Once
// the lock was lost it returns an error that wraps ErrLost and says why.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Acquire takes the lock again for this holder and resets its expiry; it
// never waits. It returns an error matching ErrNotHeld, and changes nothing,
// if the handle no longer holds the lock (released, expired or lost). Each
// successful call needs its own Release.
func (l *Lock) Acquire(ctx context.Context) error {
	err := l.reenter(ctx)
	if errors.Is(err, errReenterLost) {
		l.reportLost()
		return fmt.Errorf("re-enter lock %q: %w", l.name, ErrNotHeld)
	}
	return err
}

// errReenterLost is reenter's word that it found the lock lost.
var errReenterLost = errors.New("lock: lost at re-entry")

func (l *Lock) reenter(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || l.err != nil {
		return fmt.Errorf("re-enter lock %q: %w", l.name, ErrNotHeld)
	}
	sent := time.Now()
	n, err := l.lk.reenter.Run(ctx, l.lk.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Int64()
	if err != nil {
		// The script may have run with its answer lost: a hold count above
		// this handle's says it did, and the re-entry stands.
		v, rerr := l.holdsInRedis(ctx)
		if rerr != nil || v <= l.holds {
			return fmt.Errorf("re-enter lock %q: %w", l.name, err)
		}
		n = v
	}
	if n == 0 {
		l.goneLocked(fmt.Errorf("%w: the key was gone or held by another holder at re-entry", ErrLost))
		l.stopWatch(errStopped)
		return errReenterLost
	}
	l.holds = n
	l.extendLocked(sent.Add(l.ttl))
	return nil
}

// Release gives back one hold. The last one deletes the key, stops the
// watchdog and closes Lost. If the lock is no longer this holder's (its
// lease ran out, or the key is gone or held by someone else), Release
// changes nothing in Redis and returns an error matching ErrNotHeld. On a
// Redis error the hold is kept, and still renewed; call Release again or let
// the lease run out.
//
// Release talks to Redis with ctx, so a deferred Release should not use a
// context that may already be cancelled; context.WithoutCancel helps.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return fmt.Errorf("release lock %q: %w", l.name, ErrNotHeld)
	}
	if !time.Now().Before(l.validUntil) {
		// The lease ran out here, so the key may already belong to someone
		// else even if it still exists in Redis for a moment: the hold was
		// not protected to the end. Leave Redis alone and say so.
		l.goneLocked(fmt.Errorf("%w: lease of %v ran out before the release", ErrLost, l.ttl))
		l.mu.Unlock()
		l.stopWatch(errStopped)
		<-l.lost
		l.reportLost()
		return fmt.Errorf("release lock %q: %w", l.name, ErrNotHeld)
	}
	sent := time.Now()
	n, err := l.lk.release.Run(ctx, l.lk.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Int64()
	if err != nil {
		// The script may have run with its answer lost: the hold count
		// in Redis says whether it did.
		var ran bool
		if n, ran = l.releasedAnyway(ctx); !ran {
			if l.holds > 1 {
				// An outer hold goes on: it still needs the watchdog.
				l.mu.Unlock()
				return fmt.Errorf("release lock %q: %w", l.name, err)
			}
			// The last hold: the holder is done with the lock whatever
			// Redis says, and nobody will release it again. Stop renewing,
			// so the key expires within a lease; renewing a lock nobody
			// uses would keep it from everyone for as long as this
			// process lives.
			l.goneLocked(fmt.Errorf("%w: release not confirmed (%w); left to expire", ErrLost, err))
			l.mu.Unlock()
			l.stopWatch(errStopped)
			<-l.lost
			return fmt.Errorf("release lock %q (left to expire within %v): %w", l.name, l.ttl, err)
		}
	}
	if n > 0 {
		l.holds = n
		l.extendLocked(sent.Add(l.ttl))
		l.mu.Unlock()
		return nil
	}
	if n < 0 {
		l.goneLocked(fmt.Errorf("%w: the key was gone or held by another holder at release", ErrLost))
	} else {
		l.holds = 0
		l.ended = true
	}
	l.mu.Unlock()

	l.stopWatch(errStopped)
	<-l.lost
	if n < 0 {
		l.reportLost()
		return fmt.Errorf("release lock %q: %w", l.name, ErrNotHeld)
	}
	return nil
}

// reportLost tells Options.OnLost, once per handle, that the lock was lost.
// l.mu must not be held.
func (l *Lock) reportLost() { l.lostOnce.Do(func() { l.lk.lost(l.name) }) }

// goneLocked records that the key is no longer ours. l.mu must be held.
func (l *Lock) goneLocked(cause error) {
	l.holds = 0
	l.ended = true
	if l.err == nil {
		l.err = cause
	}
}

// extendLocked moves the end of the lease to t. l.mu must be held.
func (l *Lock) extendLocked(t time.Time) {
	if t.After(l.validUntil) {
		l.validUntil = t
	}
}

func (l *Lock) leaseEnd() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// lose records why the lock was lost, unless a Release or re-entry already
// ended the hold. gone says the key is known not to be ours any more; level
// is the level of the log line.
func (l *Lock) lose(cause error, gone bool, level slog.Level) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	if gone {
		l.goneLocked(cause)
	} else if l.err == nil {
		l.err = cause
	}
	l.lk.log.Log(context.Background(), level, "lock lost", "lock", l.name, "fence", l.fence, "err", cause)
	l.mu.Unlock()
	// Below warning level is the end of the Acquire context: a shutdown,
	// not a loss.
	if level >= slog.LevelWarn {
		l.reportLost()
	}
}

// watch runs for the life of the handle. With the watchdog on it renews the
// lease every ttl/3; a failed renewal is retried sooner, until the lease
// would have run out. It returns, closing Lost, when ctx is done (the
// Acquire context, or stopWatch from Release), when renewal finds the lock
// is not ours, or when the lease runs out.
//
// The lease is measured from just before each command that set the expiry
// was sent, so locally it ends no later than the key does in Redis.
func (l *Lock) watch(ctx context.Context) {
	defer close(l.lost)
	interval := l.ttl / 3
	retry := max(interval/4, time.Millisecond)
	next := interval
	var lastErr error

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := time.Until(l.leaseEnd())
		if l.watchdog {
			wait = min(wait, next)
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			if cause := context.Cause(ctx); !errors.Is(cause, errStopped) {
				// Usually a shutdown, not a fault.
				l.lose(fmt.Errorf("%w: acquire context done: %w", ErrLost, cause), false, slog.LevelInfo)
			}
			return
		case <-timer.C:
		}

		until := l.leaseEnd()
		if !time.Now().Before(until) {
			cause := fmt.Errorf("%w: lease of %v ran out", ErrLost, l.ttl)
			if lastErr != nil {
				cause = fmt.Errorf("%w: lease of %v ran out, last renewal error: %w", ErrLost, l.ttl, lastErr)
			}
			l.lose(cause, false, slog.LevelWarn)
			return
		}
		if !l.watchdog {
			continue
		}

		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, until)
		ok, err := l.lk.renew.Run(rctx, l.lk.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Int64()
		cancel()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				lastErr = err
				next = retry
				l.lk.log.Warn("lock renewal failed", "lock", l.name, "fence", l.fence, "err", err)
			}
		case ok == 0:
			l.lose(fmt.Errorf("%w: renewal found the key gone or held by another holder", ErrLost), true, slog.LevelWarn)
			return
		default:
			lastErr = nil
			next = interval
			l.mu.Lock()
			l.extendLocked(sent.Add(l.ttl))
			l.mu.Unlock()
		}
	}
}

// Context returns a context that is cancelled when the lock is lost (or
// parent ends), so the holder's writes stop with the lock; call cancel when
// done with it.
func (l *Lock) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-l.Lost():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// releasedAnyway reads the lock after a release whose answer was lost: with
// no hold left under this token it ran and released (0), with fewer holds
// than this handle had it ran and n remain; otherwise it did not run. The
// caller holds l.mu.
func (l *Lock) releasedAnyway(ctx context.Context) (int64, bool) {
	v, err := l.holdsInRedis(ctx)
	if err != nil || v >= l.holds {
		return 0, false
	}
	return v, true
}

// holdsInRedis reads this token's hold count (0 when it holds nothing),
// for a script whose answer was lost.
func (l *Lock) holdsInRedis(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	v, err := l.lk.rdb.HGet(ctx, l.key, l.token).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}
