package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/lock"
)

// lossyLocker is a Locker whose Redis connections go through fault proxies
// (one per node on the cluster), beside a direct client to read the truth.
type lossyLocker struct {
	redistest.Proxied
	lk *lock.Locker
}

func newLossyLocker(t *testing.T, cluster bool) lossyLocker {
	t.Helper()
	p := redistest.NewProxied(t, cluster, "lock_acquire", "lock_reenter", "lock_release", "lock_renew")
	return lossyLocker{Proxied: p, lk: lock.New(p.Client(t), lock.Options{Prefix: p.Prefix, InstanceID: "lossy"})}
}

// holds is the hold count of token in the lock key (0: not held).
func (l lossyLocker) holds(t *testing.T, name, token string) int64 {
	t.Helper()
	n, err := l.Direct.HGet(context.Background(), l.Prefix+":lock:{"+name+"}", token).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Each of the lock's scripts has its answer lost once after it ran, on the
// single node and the cluster: the holder learns what happened by reading,
// never by sending the script again.
func TestLostReplyLock(t *testing.T) {
	for _, c := range []struct {
		name    string
		cluster bool
	}{{"single", false}, {"cluster", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := newLossyLocker(t, c.cluster)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			// Acquire: the lock is ours, with the fence it drew.
			l.LoseNext("lock_acquire")
			held, err := l.lk.TryLock(ctx, "sweep", lock.WithTTL(time.Second))
			if err != nil {
				t.Fatalf("acquire whose answer was lost: %v; want the lock (it was taken)", err)
			}
			if l.Lost() != 1 {
				t.Fatalf("the proxies dropped %d answers, want 1", l.Lost())
			}
			fence, err := l.Direct.Get(ctx, l.Prefix+":lock:{sweep}:fence").Int64()
			if err != nil || held.Fence() != fence {
				t.Fatalf("fence %d, counter %d (%v)", held.Fence(), fence, err)
			}
			other := lock.New(l.Direct, lock.Options{Prefix: l.Prefix, InstanceID: "other"})
			if _, err := other.TryLock(ctx, "sweep"); !errors.Is(err, lock.ErrNotAcquired) {
				t.Fatalf("another holder: %v, want ErrNotAcquired", err)
			}

			// Renew: the watchdog keeps the lock past several leases.
			l.LoseNext("lock_renew")
			waittest.UntilEvery(t, 3*time.Second, 20*time.Millisecond, "a renewal answer lost", func() bool { return l.Lost() >= 2 })
			if l.Lost() != 2 {
				t.Fatalf("no renewal answer was lost (dropped %d)", l.Lost())
			}
			time.Sleep(1500 * time.Millisecond) // past the 1 s lease the lost renewal would have set
			if err := held.Err(); err != nil || l.holds(t, "sweep", held.Token()) != 1 {
				t.Fatalf("after a lost renewal: err %v, holds %d; want the lock kept", err, l.holds(t, "sweep", held.Token()))
			}

			// Re-entry: counted once.
			l.LoseNext("lock_reenter")
			if err := held.Acquire(ctx); err != nil {
				t.Fatalf("re-entry whose answer was lost: %v", err)
			}
			if n := l.holds(t, "sweep", held.Token()); n != 2 {
				t.Fatalf("holds %d after one re-entry, want 2", n)
			}

			// Release: one hold, then the last, each with its answer lost.
			for want := int64(1); want >= 0; want-- {
				l.LoseNext("lock_release")
				if err := held.Release(ctx); err != nil {
					t.Fatalf("release whose answer was lost: %v", err)
				}
				if n := l.holds(t, "sweep", held.Token()); n != want {
					t.Fatalf("holds %d after a release, want %d", n, want)
				}
			}
			if err := held.Err(); err != nil {
				t.Fatalf("after the last release: %v; want released, not lost", err)
			}
			if err := held.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("a release past the last: %v, want ErrNotHeld (the handle ended)", err)
			}
			if l.Lost() != 5 {
				t.Fatalf("the proxies dropped %d answers, want 5", l.Lost())
			}
		})
	}
}

// A release that cannot reach Redis at all (the link cut for a moment, and
// the read of the hold count too) gives the lock up all the same: the
// holder is done with it, so its watchdog stops and the key expires within
// a lease. Before, the watchdog went on renewing once the link was back,
// and a lock nobody would release again stayed held for as long as the
// process lived (the soak saw the reconcile lock held for minutes after a
// kill -9 of Redis).
func TestUnreachableReleaseStopsTheWatchdog(t *testing.T) {
	t.Parallel()
	l := newLossyLocker(t, false)
	ctx := context.Background()
	held, err := l.lk.TryLock(ctx, "closer", lock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range l.Proxies {
		x.Cut(time.Second)
	}
	if err := held.Release(ctx); err == nil {
		t.Fatal("release through a cut link answered nil")
	}
	other := lock.New(l.Direct, lock.Options{Prefix: l.Prefix, InstanceID: "other"})
	waittest.UntilEvery(t, 10*time.Second, 100*time.Millisecond, "the lock free again within a lease of the link coming back", func() bool {
		o, err := other.TryLock(ctx, "closer", lock.WithTTL(time.Second))
		if err != nil {
			return false
		}
		_ = o.Release(ctx)
		return true
	})
}
