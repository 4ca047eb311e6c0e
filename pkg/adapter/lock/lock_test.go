package lock_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/lock"
)

// redisAddr is where the tests find Redis: SECKILL_REDIS_ADDR, or the
// developer default.
func redisAddr() string {
	if addr := os.Getenv("SECKILL_REDIS_ADDR"); addr != "" {
		return addr
	}
	return "127.0.0.1:6379"
}

// testEnv is one test's view of Redis: a client and a key prefix no other
// test uses, so tests can run in parallel.
type testEnv struct {
	rdb    *redis.Client
	prefix string
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		t.Fatalf("redis at %s is unreachable (bring it up with scripts/services or set SECKILL_REDIS_ADDR): %v", redisAddr(), err)
	}
	e := &testEnv{rdb: rdb, prefix: "locktest-" + rand.Text()[:12]}
	t.Cleanup(func() {
		// Fence counters never expire; remove this test's keys.
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, e.prefix+":*", 100).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		rdb.Close()
	})
	return e
}

// locker returns a Locker on this test's prefix; opts.Prefix is overwritten.
func (e *testEnv) locker(opts lock.Options) *lock.Locker {
	opts.Prefix = e.prefix
	return lock.New(e.rdb, opts)
}

func (e *testEnv) lockKey(name string) string { return e.prefix + ":lock:{" + name + "}" }

// waitLost waits for l.Lost to close.
func waitLost(t *testing.T, l *lock.Lock, timeout time.Duration) {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(timeout):
		t.Fatalf("Lost not closed within %v", timeout)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// tryUntil retries TryLock until it succeeds, e.g. while an expired key is
// on its way out of Redis.
func tryUntil(t *testing.T, lk *lock.Locker, name string, timeout time.Duration, opts ...lock.Option) *lock.Lock {
	t.Helper()
	var got *lock.Lock
	waittest.UntilEvery(t, timeout, 5*time.Millisecond, "TryLock to succeed", func() bool {
		l, err := lk.TryLock(context.Background(), name, opts...)
		if err != nil && !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("TryLock: %v", err)
		}
		got = l
		return err == nil
	})
	return got
}

func holdCount(t *testing.T, e *testEnv, name string, l *lock.Lock) string {
	t.Helper()
	v, err := e.rdb.HGet(context.Background(), e.lockKey(name), l.Token()).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatalf("HGET hold count: %v", err)
	}
	return v
}

// TestMutualExclusion runs a non-atomic read-modify-write of a Redis counter
// from 50 goroutines on two Lockers (two "instances"); only the lock keeps
// increments from being lost.
func TestMutualExclusion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	lockers := []*lock.Locker{
		e.locker(lock.Options{InstanceID: "api-1", MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}),
		e.locker(lock.Options{InstanceID: "api-2", MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}),
	}
	counter := e.prefix + ":counter"
	const workers, perWorker = 50, 20

	var inside, overlaps atomic.Int64
	increment := func(lk *lock.Locker) error {
		l, err := lk.Acquire(ctx, "counter", lock.WithWait(time.Minute))
		if err != nil {
			return err
		}
		if inside.Add(1) != 1 {
			overlaps.Add(1)
		}
		v, err := e.rdb.Get(ctx, counter).Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		runtime.Gosched() // widen the window a lost update would need
		if err := e.rdb.Set(ctx, counter, v+1, 0).Err(); err != nil {
			return err
		}
		inside.Add(-1)
		return l.Release(ctx)
	}

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for range perWorker {
				if err := increment(lockers[w%len(lockers)]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	got, err := e.rdb.Get(ctx, counter).Int()
	if err != nil {
		t.Fatalf("GET counter: %v", err)
	}
	if got != workers*perWorker {
		t.Errorf("counter = %d, want %d", got, workers*perWorker)
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d times two goroutines were inside the lock together", n)
	}
}

// TestExpiredHolderCannotReleaseNextHolder: A's lock expires, B takes it,
// and A's late Release must leave B's lock alone.
func TestExpiredHolderCannotReleaseNextHolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	lk := e.locker(lock.Options{})
	const name = "expiry"

	a, err := lk.TryLock(ctx, name, lock.WithTTL(100*time.Millisecond), lock.WithoutWatchdog())
	if err != nil {
		t.Fatalf("A TryLock: %v", err)
	}
	waitLost(t, a, 2*time.Second) // the deliberate expiry
	if !errors.Is(a.Err(), lock.ErrLost) {
		t.Errorf("A Err = %v, want ErrLost", a.Err())
	}

	b := tryUntil(t, lk, name, 2*time.Second)
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("A Release after expiry = %v, want ErrNotHeld", err)
	}
	if got := holdCount(t, e, name, b); got != "1" {
		t.Fatalf("B's hold count after A's Release = %q, want 1", got)
	}
	if n := e.rdb.HLen(ctx, e.lockKey(name)).Val(); n != 1 {
		t.Errorf("lock hash has %d fields, want 1 (B only)", n)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("B Release: %v", err)
	}
	if n := e.rdb.Exists(ctx, e.lockKey(name)).Val(); n != 0 {
		t.Errorf("lock key still exists after B's Release")
	}
}

// TestWatchdogKeepsLockAlive holds a 1s lock for five TTLs, then deletes
// the key behind the holder's back and expects Lost.
func TestWatchdogKeepsLockAlive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	holder := e.locker(lock.Options{InstanceID: "holder"})
	other := e.locker(lock.Options{InstanceID: "other"})
	const name, ttl = "watchdog", time.Second

	l, err := holder.TryLock(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	for end := time.Now().Add(5 * ttl); time.Now().Before(end); {
		select {
		case <-l.Lost():
			t.Fatalf("lock lost while the watchdog should renew it: %v", l.Err())
		case <-tick.C:
		}
		if got := holdCount(t, e, name, l); got != "1" {
			t.Fatalf("hold count = %q during renewal, want 1", got)
		}
		if _, err := other.TryLock(ctx, name); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("other TryLock while held = %v, want ErrNotAcquired", err)
		}
	}
	if pttl := e.rdb.PTTL(ctx, e.lockKey(name)).Val(); pttl <= 0 || pttl > ttl {
		t.Errorf("PTTL = %v, want within (0, %v]", pttl, ttl)
	}

	if err := e.rdb.Del(ctx, e.lockKey(name)).Err(); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	waitLost(t, l, 2*ttl+time.Second)
	if !errors.Is(l.Err(), lock.ErrLost) {
		t.Errorf("Err = %v, want ErrLost", l.Err())
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release after loss = %v, want ErrNotHeld", err)
	}
}

// TestWatchdogStopsWithContext: cancelling the Acquire context stops renewal
// and closes Lost; the key then expires on its own.
func TestWatchdogStopsWithContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lk := e.locker(lock.Options{})
	const name, ttl = "cancel", 300 * time.Millisecond

	ctx, cancel := context.WithCancel(context.Background())
	l, err := lk.Acquire(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	cancel()
	waitLost(t, l, time.Second)
	if err := l.Err(); !errors.Is(err, lock.ErrLost) || !errors.Is(err, context.Canceled) {
		t.Errorf("Err = %v, want ErrLost and context.Canceled", err)
	}
	if err := l.Acquire(context.Background()); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("re-entry after loss = %v, want ErrNotHeld", err)
	}
	next := tryUntil(t, lk, name, 3*ttl)
	if err := next.Release(context.Background()); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// TestLostWhenRenewalKeepsFailing: with Redis out of reach, renewal is
// retried until the lease would have run out, and then Lost is closed.
func TestLostWhenRenewalKeepsFailing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name, ttl = "unreachable", 300 * time.Millisecond

	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	lk := lock.New(rdb, lock.Options{Prefix: e.prefix})
	start := time.Now()
	l, err := lk.TryLock(context.Background(), name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	rdb.Close() // every renewal fails from now on

	waitLost(t, l, ttl+time.Second)
	if elapsed := time.Since(start); elapsed < ttl {
		t.Errorf("Lost after %v, before the %v lease could have run out", elapsed, ttl)
	}
	if err := l.Err(); !errors.Is(err, lock.ErrLost) || !strings.Contains(err.Error(), "renewal error") {
		t.Errorf("Err = %v, want ErrLost after renewal errors", err)
	}
}

// TestReentrant: three holds need three releases; the fence stays put.
func TestReentrant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	lk := e.locker(lock.Options{InstanceID: "holder"})
	other := e.locker(lock.Options{InstanceID: "other"})
	const name = "reentrant"

	l, err := lk.TryLock(ctx, name)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	fence := l.Fence()
	for i := range 2 {
		if err := l.Acquire(ctx); err != nil {
			t.Fatalf("re-entry %d: %v", i+1, err)
		}
	}
	if got := holdCount(t, e, name, l); got != "3" {
		t.Fatalf("hold count = %q, want 3", got)
	}
	if l.Fence() != fence {
		t.Errorf("fence changed on re-entry: %d -> %d", fence, l.Fence())
	}

	for i := range 2 {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
	}
	if got := holdCount(t, e, name, l); got != "1" {
		t.Fatalf("hold count after two releases = %q, want 1", got)
	}
	if _, err := other.TryLock(ctx, name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("other TryLock with one hold left = %v, want ErrNotAcquired", err)
	}
	if isClosed(l.Lost()) {
		t.Fatalf("Lost closed with one hold left: %v", l.Err())
	}

	if err := l.Release(ctx); err != nil {
		t.Fatalf("third release: %v", err)
	}
	if n := e.rdb.Exists(ctx, e.lockKey(name)).Val(); n != 0 {
		t.Fatalf("lock key exists after the last release")
	}
	if !isClosed(l.Lost()) || l.Err() != nil {
		t.Errorf("after the last release: Lost closed %v, Err %v; want closed and nil", isClosed(l.Lost()), l.Err())
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("fourth release = %v, want ErrNotHeld", err)
	}
	if err := l.Acquire(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("re-entry after release = %v, want ErrNotHeld", err)
	}

	next, err := other.TryLock(ctx, name)
	if err != nil {
		t.Fatalf("other TryLock after release: %v", err)
	}
	defer next.Release(ctx)
	if next.Fence() <= fence {
		t.Errorf("next fence %d, want > %d", next.Fence(), fence)
	}
}

// TestReleaseByNonHolderIsRefused: a handle whose lock expired cannot
// release, re-enter or otherwise touch the lock a new holder took.
func TestReleaseByNonHolderIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	lk := e.locker(lock.Options{})
	const name = "non-holder"

	stale, err := lk.TryLock(ctx, name, lock.WithTTL(100*time.Millisecond), lock.WithoutWatchdog())
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	waitLost(t, stale, 2*time.Second) // the deliberate expiry
	holder := tryUntil(t, lk, name, 2*time.Second)
	if err := holder.Acquire(ctx); err != nil {
		t.Fatalf("re-entry: %v", err)
	}

	if err := stale.Acquire(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("stale re-entry = %v, want ErrNotHeld", err)
	}
	for range 3 {
		if err := stale.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("stale Release = %v, want ErrNotHeld", err)
		}
	}
	if got := holdCount(t, e, name, holder); got != "2" {
		t.Fatalf("holder's count = %q after stale releases, want 2", got)
	}
	if got := holdCount(t, e, name, stale); got != "" {
		t.Errorf("stale token has count %q in the hash", got)
	}
	for range 2 {
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("holder Release: %v", err)
		}
	}
}

// TestAcquireGivesUpAtDeadline: waiting for a held lock ends with ErrTimeout
// at the caller's deadline, not much later; TryLock does not wait.
func TestAcquireGivesUpAtDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	holder := e.locker(lock.Options{InstanceID: "holder"})
	const name, limit = "deadline", 300 * time.Millisecond
	const slack = 250 * time.Millisecond // Redis round trips and scheduling

	held, err := holder.TryLock(ctx, name)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	t.Cleanup(func() { held.Release(context.Background()) })

	checkElapsed := func(t *testing.T, elapsed time.Duration) {
		t.Helper()
		if elapsed < limit || elapsed > limit+slack {
			t.Errorf("gave up after %v, want within [%v, %v]", elapsed, limit, limit+slack)
		}
	}

	t.Run("context deadline", func(t *testing.T) {
		t.Parallel()
		lk := e.locker(lock.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: time.Second})
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		start := time.Now()
		_, err := lk.Acquire(ctx, name)
		elapsed := time.Since(start)
		if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire = %v, want ErrTimeout and context.DeadlineExceeded", err)
		}
		checkElapsed(t, elapsed)
	})

	t.Run("WithWait", func(t *testing.T) {
		t.Parallel()
		lk := e.locker(lock.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: time.Second})
		start := time.Now()
		_, err := lk.Acquire(ctx, name, lock.WithWait(limit))
		elapsed := time.Since(start)
		if !errors.Is(err, lock.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire = %v, want ErrTimeout only", err)
		}
		checkElapsed(t, elapsed)
	})

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		lk := e.locker(lock.Options{})
		ctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := lk.Acquire(ctx, name)
		if !errors.Is(err, context.Canceled) || errors.Is(err, lock.ErrTimeout) {
			t.Fatalf("Acquire = %v, want context.Canceled, not ErrTimeout", err)
		}
	})

	t.Run("TryLock", func(t *testing.T) {
		t.Parallel()
		// A retry would sleep at least half of MinBackoff, so a quick
		// return shows TryLock made one attempt.
		const minBackoff = 2 * time.Second
		lk := e.locker(lock.Options{MinBackoff: minBackoff, MaxBackoff: minBackoff})
		start := time.Now()
		_, err := lk.TryLock(ctx, name, lock.WithWait(time.Minute))
		if !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("TryLock = %v, want ErrNotAcquired", err)
		}
		if elapsed := time.Since(start); elapsed >= minBackoff/2 {
			t.Errorf("TryLock took %v; it should not wait", elapsed)
		}
	})
}

// TestAcquireWaitsForRelease: a waiter gets the lock soon after the holder
// lets go.
func TestAcquireWaitsForRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	lk := e.locker(lock.Options{MaxBackoff: 50 * time.Millisecond})
	const name = "handover"

	first, err := lk.TryLock(ctx, name)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	released := make(chan error, 1)
	time.AfterFunc(100*time.Millisecond, func() { released <- first.Release(ctx) })

	second, err := lk.Acquire(ctx, name, lock.WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := <-released; err != nil {
		t.Fatalf("first Release: %v", err)
	}
	if second.Fence() <= first.Fence() {
		t.Errorf("second fence %d, want > %d", second.Fence(), first.Fence())
	}
	if err := second.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
}

// TestFencingAfterExpiry: A is paused past its lease and B takes the lock
// with a larger fence, so the writes B's fence guards (the reconciler's
// repairs in stockredis) refuse A's late ones.
func TestFencingAfterExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	lk := e.locker(lock.Options{})
	const name = "fencing"

	a, err := lk.TryLock(ctx, name, lock.WithTTL(150*time.Millisecond), lock.WithoutWatchdog())
	if err != nil {
		t.Fatalf("A TryLock: %v", err)
	}
	waitLost(t, a, 2*time.Second) // A "pauses" past its lease

	b := tryUntil(t, lk, name, 2*time.Second)
	defer b.Release(ctx)
	if b.Fence() <= a.Fence() {
		t.Fatalf("B fence %d, want > A fence %d", b.Fence(), a.Fence())
	}
}

// TestFenceIncreases: fences grow with every acquisition of a name, across
// Lockers, and are independent between names.
func TestFenceIncreases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	lockers := []*lock.Locker{e.locker(lock.Options{InstanceID: "a"}), e.locker(lock.Options{InstanceID: "b"})}

	var last int64
	for i := range 6 {
		l, err := lockers[i%2].TryLock(ctx, "fence")
		if err != nil {
			t.Fatalf("TryLock %d: %v", i, err)
		}
		if l.Fence() <= last {
			t.Errorf("acquisition %d: fence %d, want > %d", i, l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
	}
	l, err := lockers[0].TryLock(ctx, "another")
	if err != nil {
		t.Fatalf("TryLock another: %v", err)
	}
	defer l.Release(ctx)
	if l.Fence() != 1 {
		t.Errorf("first fence of a new name = %d, want 1", l.Fence())
	}
}

// TestKeyLayout checks the documented keys, which share the hash tag {name}.
func TestKeyLayout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	l, err := e.locker(lock.Options{InstanceID: "api-7"}).TryLock(ctx, "order:42")
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	defer l.Release(ctx)

	key := e.prefix + ":lock:{order:42}"
	if typ := e.rdb.Type(ctx, key).Val(); typ != "hash" {
		t.Errorf("TYPE %s = %q, want hash", key, typ)
	}
	if got := e.rdb.Get(ctx, key+":fence").Val(); got != "1" {
		t.Errorf("GET %s:fence = %q, want 1", key, got)
	}
	if !strings.HasPrefix(l.Token(), "api-7:") || len(l.Token()) <= len("api-7:") {
		t.Errorf("token %q, want instance id and a random part", l.Token())
	}
	if err := e.rdb.HGet(ctx, key, l.Token()).Err(); err != nil {
		t.Errorf("HGET %s %s: %v", key, l.Token(), err)
	}
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lk := e.locker(lock.Options{})
	tests := []struct {
		name     string
		lockName string
		opts     []lock.Option
	}{
		{name: "empty name", lockName: ""},
		{name: "ttl below a millisecond", lockName: "x", opts: []lock.Option{lock.WithTTL(time.Microsecond)}},
		{name: "negative ttl", lockName: "x", opts: []lock.Option{lock.WithTTL(-time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if l, err := lk.TryLock(context.Background(), tt.lockName, tt.opts...); err == nil {
				l.Release(context.Background())
				t.Fatal("TryLock succeeded, want an error")
			}
		})
	}
}

// The context of a lock ends when the lock is lost, so the holder's work
// stops with it.
func TestContextEndsWhenLockIsLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const name, ttl = "ctx", 300 * time.Millisecond
	l, err := e.locker(lock.Options{}).TryLock(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	lctx, cancel := l.Context(ctx)
	defer cancel()
	if lctx.Err() != nil {
		t.Fatal("context ended while the lock is held")
	}
	if err := e.rdb.Del(ctx, e.lockKey(name)).Err(); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	select {
	case <-lctx.Done():
	case <-time.After(2*ttl + time.Second):
		t.Fatal("context still alive after the lock was lost")
	}
}

// TestTakenOverLockIsLeftAlone: A still believes its lease runs (an hour,
// no watchdog) when its key is lost and B takes the lock. A's Release and
// re-entry reach Redis, find B's token, and change nothing of B's lock.
func TestTakenOverLockIsLeftAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	lk := e.locker(lock.Options{})
	const name = "taken-over"

	a, err := lk.TryLock(ctx, name, lock.WithTTL(time.Hour), lock.WithoutWatchdog())
	if err != nil {
		t.Fatalf("A TryLock: %v", err)
	}
	if err := e.rdb.Del(ctx, e.lockKey(name)).Err(); err != nil { // a failover forgets it
		t.Fatal(err)
	}
	b, err := lk.TryLock(ctx, name, lock.WithTTL(time.Minute), lock.WithoutWatchdog())
	if err != nil {
		t.Fatalf("B TryLock: %v", err)
	}
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("A Release of B's lock = %v, want ErrNotHeld", err)
	}
	if err := a.Acquire(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("A re-entry of B's lock = %v, want ErrNotHeld", err)
	}
	if got := holdCount(t, e, name, b); got != "1" {
		t.Fatalf("B's hold count = %q after A's attempts, want 1", got)
	}
	if n := e.rdb.HLen(ctx, e.lockKey(name)).Val(); n != 1 {
		t.Fatalf("lock hash has %d fields, want 1 (B only)", n)
	}
	if pttl := e.rdb.PTTL(ctx, e.lockKey(name)).Val(); pttl <= 0 || pttl > time.Minute {
		t.Fatalf("B's lock expires in %v, want within (0, 1m]: A changed its expiry", pttl)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("B Release: %v", err)
	}
}

// TestWatchdogDoesNotRenewAnotherHoldersLock: A's key is lost and B takes
// the lock with a short lease and no watchdog; A's watchdog must find the
// lock not its own (Lost) and must not keep B's key alive.
func TestWatchdogDoesNotRenewAnotherHoldersLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	lk := e.locker(lock.Options{})
	const name = "renew-other"
	const ttl = 900 * time.Millisecond

	a, err := lk.TryLock(ctx, name, lock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("A TryLock: %v", err)
	}
	if err := e.rdb.Del(ctx, e.lockKey(name)).Err(); err != nil {
		t.Fatal(err)
	}
	b, err := lk.TryLock(ctx, name, lock.WithTTL(10*time.Second), lock.WithoutWatchdog())
	if err != nil {
		t.Fatalf("B TryLock: %v", err)
	}
	// B's key expires in 10 s; a renewal by A would reset it to 900 ms.
	waitLost(t, a, 3*ttl)
	if err := a.Err(); !errors.Is(err, lock.ErrLost) || !strings.Contains(err.Error(), "renewal found") {
		t.Fatalf("A Err = %v, want the renewal to find the lock not its own", err)
	}
	if pttl := e.rdb.PTTL(ctx, e.lockKey(name)).Val(); pttl <= ttl {
		t.Fatalf("B's lock expires in %v: A's watchdog renewed it", pttl)
	}
	if got := holdCount(t, e, name, b); got != "1" {
		t.Fatalf("B's hold count = %q, want 1", got)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("B Release: %v", err)
	}
}

// Hold takes the lock with the lease it is given, for one piece of work:
// another holder is refused meanwhile with an error that matches
// ErrNotAcquired and says HeldElsewhere to code that does not import the
// package; the work's context ends when the lock is lost; done releases
// the lock even when the holder's context has ended.
func TestHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.locker(lock.Options{InstanceID: "a"}), e.locker(lock.Options{InstanceID: "b"})
	ctx, stop := context.WithCancel(context.Background())
	work, done, err := a.Hold(ctx, "hold", 30*time.Second)
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	if ttl, err := e.rdb.PTTL(ctx, e.lockKey("hold")).Result(); err != nil || ttl <= 20*time.Second || ttl > 30*time.Second {
		t.Errorf("lease while held: %v %v, want 30s", ttl, err)
	}
	_, _, err = b.Hold(context.Background(), "hold", time.Second)
	var elsewhere interface{ HeldElsewhere() bool }
	if !errors.Is(err, lock.ErrNotAcquired) || !errors.As(err, &elsewhere) || !elsewhere.HeldElsewhere() {
		t.Fatalf("Hold while another holds the lock: %v, want ErrNotAcquired saying HeldElsewhere", err)
	}
	stop() // the holder stops; done still gives the lock back
	if work.Err() == nil {
		t.Error("work's context alive after the holder's context ended")
	}
	done()
	if n, err := e.rdb.Exists(context.Background(), e.lockKey("hold")).Result(); err != nil || n != 0 {
		t.Fatalf("lock key after done: %d %v, want released", n, err)
	}

	work, done, err = b.Hold(context.Background(), "lost", 300*time.Millisecond)
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	defer done()
	if err := e.rdb.Del(context.Background(), e.lockKey("lost")).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-work.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("work's context alive after the lock was lost")
	}
}
