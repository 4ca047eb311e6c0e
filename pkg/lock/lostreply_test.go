package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/lock"
	"github.com/seckill/seckill/pkg/proxytest"
	"github.com/seckill/seckill/pkg/redistest"
	"github.com/seckill/seckill/pkg/stockredis"
)

// lossyLocker is a Locker whose Redis connections go through fault proxies
// (one per node on the cluster), beside a direct client to read the truth.
type lossyLocker struct {
	lk      *lock.Locker
	direct  redis.UniversalClient
	prefix  string
	proxies []*proxytest.Proxy
}

func (l lossyLocker) loseNext(script string) {
	for _, p := range l.proxies {
		p.LoseReply(proxytest.RedisScript(lua.Source(script)), 1)
	}
}

func (l lossyLocker) lost() int64 {
	var n int64
	for _, p := range l.proxies {
		n += p.Lost()
	}
	return n
}

func newLossyLocker(t *testing.T, cluster bool) lossyLocker {
	t.Helper()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	cfg := stockredis.Config{Addrs: []string{redistest.Addr()}}
	if cluster {
		rdb, prefix = redistest.NewCluster(t)
		cfg = stockredis.Config{Addrs: redistest.ClusterAddrs(), Cluster: true}
	}
	err := redistest.ForEachNode(ctx, rdb, func(ctx context.Context, n redis.UniversalClient) error {
		for _, s := range []string{"lock_acquire", "lock_reenter", "lock_release", "lock_renew"} {
			if err := n.ScriptLoad(ctx, lua.Source(s)).Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l := lossyLocker{direct: rdb, prefix: prefix}
	byAddr := map[string]*proxytest.Proxy{}
	for _, a := range cfg.Addrs {
		p := proxytest.Start(t, a, proxytest.RESP)
		byAddr[a] = p
		l.proxies = append(l.proxies, p)
	}
	if cluster {
		cfg.Dialer = proxytest.ClusterDialer(byAddr)
	} else {
		cfg.Addrs = []string{l.proxies[0].Addr()}
	}
	via := stockredis.NewClient(cfg)
	t.Cleanup(func() { via.Close() })
	l.lk = lock.New(via, lock.Options{Prefix: prefix, InstanceID: "lossy"})
	return l
}

// holds is the hold count of token in the lock key (0: not held).
func (l lossyLocker) holds(t *testing.T, name, token string) int64 {
	t.Helper()
	n, err := l.direct.HGet(context.Background(), l.prefix+":lock:{"+name+"}", token).Int64()
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
			l.loseNext("lock_acquire")
			held, err := l.lk.TryLock(ctx, "sweep", lock.WithTTL(time.Second))
			if err != nil {
				t.Fatalf("acquire whose answer was lost: %v; want the lock (it was taken)", err)
			}
			if l.lost() != 1 {
				t.Fatalf("the proxies dropped %d answers, want 1", l.lost())
			}
			fence, err := l.direct.Get(ctx, l.prefix+":lock:{sweep}:fence").Int64()
			if err != nil || held.Fence() != fence {
				t.Fatalf("fence %d, counter %d (%v)", held.Fence(), fence, err)
			}
			other := lock.New(l.direct, lock.Options{Prefix: l.prefix, InstanceID: "other"})
			if _, err := other.TryLock(ctx, "sweep"); !errors.Is(err, lock.ErrNotAcquired) {
				t.Fatalf("another holder: %v, want ErrNotAcquired", err)
			}

			// Renew: the watchdog keeps the lock past several leases.
			l.loseNext("lock_renew")
			deadline := time.Now().Add(3 * time.Second)
			for l.lost() < 2 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if l.lost() != 2 {
				t.Fatalf("no renewal answer was lost (dropped %d)", l.lost())
			}
			time.Sleep(1500 * time.Millisecond) // past the 1 s lease the lost renewal would have set
			if err := held.Err(); err != nil || l.holds(t, "sweep", held.Token()) != 1 {
				t.Fatalf("after a lost renewal: err %v, holds %d; want the lock kept", err, l.holds(t, "sweep", held.Token()))
			}

			// Re-entry: counted once.
			l.loseNext("lock_reenter")
			if err := held.Acquire(ctx); err != nil {
				t.Fatalf("re-entry whose answer was lost: %v", err)
			}
			if n := l.holds(t, "sweep", held.Token()); n != 2 {
				t.Fatalf("holds %d after one re-entry, want 2", n)
			}

			// Release: one hold, then the last, each with its answer lost.
			for want := int64(1); want >= 0; want-- {
				l.loseNext("lock_release")
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
			if l.lost() != 5 {
				t.Fatalf("the proxies dropped %d answers, want 5", l.lost())
			}
		})
	}
}
