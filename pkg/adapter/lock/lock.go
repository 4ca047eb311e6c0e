// Package lock is a distributed mutex on Redis for work that must run in one
// place at a time, such as the reconciler's batch or a critical section that
// spans Redis and MySQL.
//
// A lock named name lives in two keys that share the hash tag {name}, so the
// scripts that touch both work on Redis Cluster:
//
//	<prefix>:lock:{name}        hash: holder token -> hold count, with a TTL
//	<prefix>:lock:{name}:fence  counter of acquisitions, never expires
//
// Properties:
//
//   - Mutual exclusion. Acquisition is one Lua script that creates the hash
//     with the holder's token and its expiry only if the key does not exist:
//     the atomic equivalent of SET key token NX PX ttl, extended so the same
//     step can count re-entries and draw a fencing token.
//   - Unique holders. A token is the Locker's instance id plus a random part,
//     new for every acquisition; it is never a constant.
//   - Safe release. Release is a compare-and-delete script: a holder whose lock
//     expired gets ErrNotHeld and cannot delete the next holder's lock.
//   - Expiry and watchdog. The key expires after the TTL, so a crashed holder
//     frees the lock. While the holder lives, a watchdog renews the TTL every
//     ttl/3 with a token-checked PEXPIRE. Renewal stops on the final Release,
//     when the context passed to Acquire is done, or when the lock is found
//     to belong to someone else; Lost is then closed so the holder stops
//     writing. Transient Redis errors are retried until the lease would have
//     run out; then the lock counts as lost.
//   - Re-entry. The *Lock handle is the holder. Calling Acquire on it takes
//     the lock again (a counted hash, as Redisson does) and every Acquire
//     needs its own Release; the key is deleted when the count reaches zero.
//     Locker.Acquire always starts a new holder, so calling it again for a
//     name you hold waits for yourself: pass the *Lock to nested code instead.
//   - Bounded waiting. Locker.Acquire retries with exponential backoff and
//     jitter, capped at Options.MaxBackoff, and returns ErrTimeout at the
//     context's deadline or after WithWait. TryLock makes one attempt and
//     returns ErrNotAcquired at once.
//   - Fencing. Every acquisition gets a number from INCR of the fence
//     counter, larger than any earlier one for that name (Lock.Fence); see
//     below.
//
// A lock can be lost while its holder believes it holds it: a long GC pause
// or a stalled network outlives the lease, or a Redis failover forgets the
// key. So the writes a lock protects carry its fence and refuse a smaller
// one. For MySQL, with the fence in both places:
//
//	UPDATE stock SET qty = ?, fence = ? WHERE sku = ? AND fence < ?
//
// Zero rows affected means a later holder already wrote, and the stale holder
// must stop. Strict < admits one write per acquisition; use <= when a holder
// updates the same row more than once while it holds the lock (a stale
// holder's fence is still strictly smaller). For values in Redis, the
// writing script does the same check (the reconciler's repairs in
// stockredis carry the fence of the reconcile lock).
//
// Typical use:
//
//	locker := lock.New(rdb, lock.Options{Prefix: "sk", InstanceID: "reconciler-1"})
//	l, err := locker.Acquire(ctx, "reconcile", lock.WithTTL(10*time.Second), lock.WithWait(2*time.Second))
//	if err != nil {
//		return err // errors.Is(err, lock.ErrTimeout) when the wait ran out
//	}
//	defer l.Release(context.WithoutCancel(ctx))
//	select {
//	case <-l.Lost():
//		return l.Err() // stop writing: someone else may hold the lock now
//	default:
//	}
//
// The scripts are in the lua package (lua/lock_*.lua).
package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

var (
	// ErrNotAcquired means the lock is held by another holder. TryLock
	// and Hold return it; Acquire keeps waiting instead. It has the method
	// HeldElsewhere() bool (true), for code that tells it without
	// importing this package.
	ErrNotAcquired error = heldElsewhere{}

	// ErrTimeout means Acquire waited until the caller's deadline (the
	// context's or WithWait's) without getting the lock. When the context's
	// deadline ended the wait, the error also matches
	// context.DeadlineExceeded.
	ErrTimeout = errors.New("lock: timed out waiting for the lock")

	// ErrNotHeld means the handle does not hold the lock: it was released
	// already, or it expired and may belong to someone else now. Release
	// and Lock.Acquire return it; they changed nothing in Redis.
	ErrNotHeld = errors.New("lock: not held by this holder")

	// ErrLost is what Lock.Err wraps once Lost is closed because the lock
	// was lost rather than released.
	ErrLost = errors.New("lock: lost")
)

// Defaults for the zero values in Options.
const (
	DefaultTTL        = 10 * time.Second
	DefaultMinBackoff = 10 * time.Millisecond
	DefaultMaxBackoff = 200 * time.Millisecond
)

// abandonTimeout bounds the clean-up of an acquire attempt whose reply was
// lost to a cancelled context.
const abandonTimeout = 200 * time.Millisecond

// Options configures a Locker. The zero value works.
type Options struct {
	// Prefix starts every key, as in "<Prefix>:lock:{name}". Empty means
	// keys start with "lock:".
	Prefix string
	// InstanceID names this process inside holder tokens, which helps to
	// find out who holds a lock (HGETALL the key). Default: hostname-pid.
	InstanceID string
	// TTL is the lease of a lock unless WithTTL says otherwise: how long a
	// crashed holder blocks others. Default DefaultTTL.
	TTL time.Duration
	// MinBackoff and MaxBackoff bound the pauses between attempts in
	// Acquire: the pause doubles from MinBackoff up to MaxBackoff, and each
	// is randomised to between half and all of its step. Defaults
	// DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Logger receives renewal failures and lost locks. Default: discard.
	Logger *slog.Logger
	// OnAcquire, if set, is called with the lock's name after every
	// acquisition that starts a new holder (re-entries are not counted).
	// OnLost, if set, is called with the name when a held lock is lost
	// rather than released: the lease ran out, or the key was found gone or
	// held by another holder. The end of the context given to Acquire is a
	// shutdown, not a loss, and is not reported. Both run on the caller's or
	// the watchdog's goroutine, with no lock of this package held; keep them
	// fast (a metrics counter). They are how metrics are wired in without
	// this package knowing of them.
	OnAcquire func(name string)
	OnLost    func(name string)
}

// Locker hands out locks stored in one Redis deployment. It is safe for
// concurrent use; create one per process and share it.
type Locker struct {
	rdb        redis.UniversalClient
	prefix     string
	instanceID string
	ttl        time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration
	log        *slog.Logger
	onAcquire  func(name string)
	onLost     func(name string)

	acquire *redis.Script
	reenter *redis.Script
	release *redis.Script
	renew   *redis.Script
}

// New returns a Locker that keeps its locks in rdb, which may be a single
// node, a failover or a cluster client.
func New(rdb redis.UniversalClient, opts Options) *Locker {
	lk := &Locker{
		rdb:        rdb,
		prefix:     opts.Prefix,
		instanceID: opts.InstanceID,
		ttl:        opts.TTL,
		minBackoff: opts.MinBackoff,
		maxBackoff: opts.MaxBackoff,
		log:        opts.Logger,
		onAcquire:  opts.OnAcquire,
		onLost:     opts.OnLost,

		acquire: redis.NewScript(lua.Source("lock_acquire")),
		reenter: redis.NewScript(lua.Source("lock_reenter")),
		release: redis.NewScript(lua.Source("lock_release")),
		renew:   redis.NewScript(lua.Source("lock_renew")),
	}
	if lk.instanceID == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "unknown"
		}
		lk.instanceID = host + "-" + strconv.Itoa(os.Getpid())
	}
	if lk.ttl <= 0 {
		lk.ttl = DefaultTTL
	}
	if lk.minBackoff <= 0 {
		lk.minBackoff = DefaultMinBackoff
	}
	if lk.maxBackoff <= 0 {
		lk.maxBackoff = DefaultMaxBackoff
	}
	if lk.maxBackoff < lk.minBackoff {
		lk.maxBackoff = lk.minBackoff
	}
	if lk.log == nil {
		lk.log = slog.New(slog.DiscardHandler)
	}
	return lk
}

// Option adjusts one acquisition.
type Option func(*acquireConfig)

type acquireConfig struct {
	ttl        time.Duration
	wait       time.Duration
	noWatchdog bool
}

// WithTTL sets the lease: the key's expiry, renewed by the watchdog. It must
// be at least a millisecond.
func WithTTL(ttl time.Duration) Option {
	return func(c *acquireConfig) { c.ttl = ttl }
}

// WithWait bounds how long Acquire waits for the lock, independently of the
// context, whose cancellation also stops the watchdog. TryLock ignores it.
func WithWait(d time.Duration) Option {
	return func(c *acquireConfig) { c.wait = d }
}

// withoutWatchdog turns renewal off: the lock expires one TTL after it was
// taken (or last re-entered or partly released), and Lost is closed then.
// Only the tests use it (export_test.go), to let a holder's lease run out.
func withoutWatchdog() Option {
	return func(c *acquireConfig) { c.noWatchdog = true }
}

func (lk *Locker) config(name string, opts []Option) (acquireConfig, error) {
	cfg := acquireConfig{ttl: lk.ttl}
	for _, o := range opts {
		o(&cfg)
	}
	if name == "" {
		return cfg, errors.New("lock: empty lock name")
	}
	if cfg.ttl < time.Millisecond {
		return cfg, fmt.Errorf("lock %q: ttl %v is below 1ms", name, cfg.ttl)
	}
	return cfg, nil
}

// keys returns the lock key and the fence counter key of name. Both carry
// the hash tag {name}, so they map to the same cluster slot.
func (lk *Locker) keys(name string) (lockKey, fenceKey string) {
	lockKey = "lock:{" + name + "}"
	if lk.prefix != "" {
		lockKey = lk.prefix + ":" + lockKey
	}
	return lockKey, lockKey + ":fence"
}

// TryLock makes one attempt to take the lock name. If someone holds it, it
// returns an error matching ErrNotAcquired at once.
//
// The watchdog of the returned lock runs until ctx is done; see Acquire.
func (lk *Locker) TryLock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	cfg, err := lk.config(name, opts)
	if err != nil {
		return nil, err
	}
	return lk.try(ctx, name, cfg)
}

// Acquire takes the lock name, waiting while someone else holds it. Between
// attempts it backs off exponentially with jitter, up to Options.MaxBackoff.
// It gives up with an error matching ErrTimeout when ctx's deadline or the
// WithWait bound passes, whichever is first, and with ctx's error when ctx
// is cancelled. Without either bound it waits until ctx is cancelled.
//
// Every call starts a new holder, even for a name this process holds: to
// take a lock you hold again, call Acquire on the *Lock.
//
// The lock's watchdog runs until the final Release or until ctx is done, so
// pass a context that lives as long as the work under the lock, and bound
// the wait with WithWait rather than with a short-lived context.
func (lk *Locker) Acquire(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	cfg, err := lk.config(name, opts)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	deadline, bounded := ctx.Deadline()
	ctxDeadline := bounded // the context's deadline ends the wait
	if cfg.wait > 0 {
		if d := start.Add(cfg.wait); !bounded || d.Before(deadline) {
			deadline, bounded, ctxDeadline = d, true, false
		}
	}
	timeout := func() error {
		waited := time.Since(start).Round(time.Millisecond)
		if ctxDeadline || ctx.Err() != nil {
			// The timer may fire a moment before the context notices
			// its deadline; report the same error either way.
			return fmt.Errorf("lock %q: gave up after %v: %w (%w)", name, waited, ErrTimeout, context.DeadlineExceeded)
		}
		return fmt.Errorf("lock %q: gave up after %v: %w", name, waited, ErrTimeout)
	}

	var timer *time.Timer
	for attempt := 0; ; attempt++ {
		l, err := lk.try(ctx, name, cfg)
		switch {
		case err == nil:
			if timer != nil {
				timer.Stop()
			}
			return l, nil
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, timeout()
		case !errors.Is(err, ErrNotAcquired):
			return nil, err
		}

		pause := backoff(attempt, lk.minBackoff, lk.maxBackoff)
		if bounded {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, timeout()
			}
			pause = min(pause, left)
		}
		if timer == nil {
			timer = time.NewTimer(pause)
		} else {
			timer.Reset(pause)
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, timeout()
			}
			return nil, fmt.Errorf("lock %q: %w", name, context.Cause(ctx))
		case <-timer.C:
		}
		if bounded && !time.Now().Before(deadline) {
			return nil, timeout()
		}
	}
}

// try makes one acquisition attempt and, on success, starts the lock's
// watchdog.
func (lk *Locker) try(ctx context.Context, name string, cfg acquireConfig) (*Lock, error) {
	key, fenceKey := lk.keys(name)
	token := lk.instanceID + ":" + rand.Text()
	sent := time.Now()
	fence, err := lk.acquire.Run(ctx, lk.rdb, []string{key, fenceKey}, token, cfg.ttl.Milliseconds()).Int64()
	if err != nil {
		// The script may have run with its answer lost: this token may
		// hold the lock. Read it rather than guess.
		var held bool
		if fence, held = lk.resolve(ctx, key, fenceKey, token); !held {
			// Unknown still (Redis unreachable) or not taken: give back
			// whatever the attempt may have taken rather than block
			// others for a whole TTL.
			lk.abandon(ctx, key, token, cfg.ttl)
			return nil, fmt.Errorf("acquire lock %q: %w", name, err)
		}
	}
	if fence == 0 {
		return nil, fmt.Errorf("lock %q: %w", name, ErrNotAcquired)
	}
	l := &Lock{
		lk:         lk,
		name:       name,
		key:        key,
		token:      token,
		fence:      fence,
		ttl:        cfg.ttl,
		watchdog:   !cfg.noWatchdog,
		lost:       make(chan struct{}),
		holds:      1,
		validUntil: sent.Add(cfg.ttl),
	}
	wctx, stop := context.WithCancelCause(ctx)
	l.stopWatch = stop
	go l.watch(wctx)
	if lk.onAcquire != nil {
		lk.onAcquire(name)
	}
	return l, nil
}

// lost reports a lost lock to Options.OnLost.
func (lk *Locker) lost(name string) {
	if lk.onLost != nil {
		lk.onLost(name)
	}
}

// resolve finds out whether an acquisition whose answer was lost took the
// lock: token holds it, and then the fence counter still stands at the
// number it drew (nobody can acquire while the key exists).
func (lk *Locker) resolve(ctx context.Context, key, fenceKey, token string) (int64, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	var held *redis.BoolCmd
	var fence *redis.StringCmd
	// One slot (the keys share the hash tag), one round trip, atomically.
	_, err := lk.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		held = p.HExists(ctx, key, token)
		fence = p.Get(ctx, fenceKey)
		return nil
	})
	if err != nil || !held.Val() {
		return 0, false
	}
	n, err := fence.Int64()
	return n, err == nil && n > 0
}

// abandon releases a lock that an attempt may have taken without learning
// so. Failure is harmless: the key expires after its TTL.
func (lk *Locker) abandon(ctx context.Context, key, token string, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	if err := lk.release.Run(ctx, lk.rdb, []string{key}, token, ttl.Milliseconds()).Err(); err != nil {
		lk.log.Warn("abandon lock attempt failed", "key", key, "err", err)
	}
}
