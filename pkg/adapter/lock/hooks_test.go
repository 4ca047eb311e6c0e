package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/lock"
)

// hookCounts records what the OnAcquire and OnLost hooks saw.
type hookCounts struct {
	mu             sync.Mutex
	acquired, lost map[string]int
}

func (h *hookCounts) options() lock.Options {
	h.acquired, h.lost = map[string]int{}, map[string]int{}
	return lock.Options{
		OnAcquire: func(name string) { h.mu.Lock(); h.acquired[name]++; h.mu.Unlock() },
		OnLost:    func(name string) { h.mu.Lock(); h.lost[name]++; h.mu.Unlock() },
	}
}

func (h *hookCounts) get(name string) (acquired, lost int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acquired[name], h.lost[name]
}

// The hooks see every new holder and every loss, and nothing else: not
// re-entries, refused attempts, releases or a cancelled Acquire context.
func TestHooksCountAcquisitionsAndLosses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var h hookCounts
	lk := e.locker(h.options())
	ctx := context.Background()
	want := func(name string, acquired, lost int) {
		t.Helper()
		a, l := h.get(name)
		if a != acquired || l != lost {
			t.Fatalf("lock %q: %d acquisitions and %d losses reported, want %d and %d", name, a, l, acquired, lost)
		}
	}

	// Taken, re-entered, refused to another holder, released.
	l, err := lk.TryLock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lk.TryLock(ctx, "a"); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("second holder: %v", err)
	}
	for range 2 {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want("a", 1, 0)

	// The key is deleted under the holder: the watchdog finds it gone.
	l, err = lk.Acquire(ctx, "b", lock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Del(ctx, e.lockKey("b")).Err(); err != nil {
		t.Fatal(err)
	}
	waitLost(t, l, 2*time.Second)
	waittest.UntilEvery(t, 2*time.Second, 5*time.Millisecond, "the loss of b reported", func() bool { _, n := h.get("b"); return n == 1 })
	want("b", 1, 1)

	// The key is taken over before the release: the release reports it.
	l, err = lk.TryLock(ctx, "c", lock.WithTTL(time.Hour), lock.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Del(ctx, e.lockKey("c")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release of a lost lock: %v", err)
	}
	want("c", 1, 1)

	// The lease runs out, then the release finds the key gone: one loss.
	l, err = lk.TryLock(ctx, "e", lock.WithTTL(100*time.Millisecond), lock.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	waitLost(t, l, 2*time.Second)
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release after the lease ran out: %v", err)
	}
	want("e", 1, 1)

	// Re-entry finds the key gone.
	l, err = lk.TryLock(ctx, "f", lock.WithTTL(time.Hour), lock.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Del(ctx, e.lockKey("f")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Acquire(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("re-entry of a lost lock: %v", err)
	}
	want("f", 1, 1)

	// The Acquire context ends: a shutdown, not a loss.
	cctx, cancel := context.WithCancel(ctx)
	l, err = lk.TryLock(cctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	waitLost(t, l, 2*time.Second)
	want("d", 1, 0)
}

// A Locker without hooks works as before.
func TestNoHooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l, err := e.locker(lock.Options{}).TryLock(context.Background(), "x", lock.WithTTL(100*time.Millisecond), lock.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	waitLost(t, l, 2*time.Second)
	if !errors.Is(l.Err(), lock.ErrLost) {
		t.Fatalf("Err = %v", l.Err())
	}
}
