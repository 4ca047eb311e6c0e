package activity

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

func TestActivityCache(t *testing.T) {
	var c Cache
	calls := 0
	fail := true
	load := func(_ context.Context, id int64) (Activity, error) {
		calls++
		if fail {
			return Activity{}, order.ErrUnavailable
		}
		return Activity{ID: id, ItemID: 9}, nil
	}
	ctx := context.Background()
	if _, err := c.Get(ctx, 1, load); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("failed load: %v, want order.ErrUnavailable", err)
	}
	fail = false
	for range 2 {
		if a, err := c.Get(ctx, 1, load); err != nil || a.ItemID != 9 {
			t.Fatalf("Get: %+v %v", a, err)
		}
	}
	if calls != 2 {
		t.Errorf("load called %d times, want 2 (the failure is not remembered, the success is)", calls)
	}
}

// A storm of concurrent requests for an expired activity waits for one
// load; a copy older than activity.CopyTTL is read again, so a changed activity
// (a sale ended early) is seen within activity.CopyTTL.
func TestActivityCacheExpiresAndLoadsOnce(t *testing.T) {
	var c Cache
	var calls atomic.Int32
	var ends atomic.Int64
	ends.Store(100)
	load := func(_ context.Context, id int64) (Activity, error) {
		calls.Add(1)
		time.Sleep(20 * time.Millisecond) // a MySQL read in progress
		return Activity{ID: id, EndsAt: time.Unix(ends.Load(), 0)}, nil
	}
	get := func() {
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Get(context.Background(), 1, load); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	get()
	if n := calls.Load(); n != 1 {
		t.Fatalf("50 concurrent requests loaded %d times, want 1", n)
	}
	ends.Store(50) // the operator ended the sale
	start := time.Now()
	waitUntil := start.Add(3 * CopyTTL)
	for time.Now().Before(waitUntil) {
		a, err := c.Get(context.Background(), 1, load)
		if err != nil {
			t.Fatal(err)
		}
		if a.EndsAt.Unix() == 50 {
			if d := time.Since(start); d > CopyTTL+100*time.Millisecond {
				t.Fatalf("the change was seen after %v, want within %v", d, CopyTTL)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the changed activity was never read again")
}

// backdate makes the cache's copy of id as if read age ago and expired.
func backdate(c *Cache, id int64, age time.Duration) {
	v, _ := c.m.Load(id)
	e := v.(*activityEntry)
	e.loaded, e.expires = time.Now().Add(-age), time.Now().Add(-time.Millisecond)
}

// A re-read that fails keeps the last copy for a while: a blip of MySQL
// does not stop the sale.
func TestActivityCacheKeepsItsCopyWhenAReloadFails(t *testing.T) {
	var c Cache
	var down atomic.Bool
	load := func(_ context.Context, id int64) (Activity, error) {
		if down.Load() {
			return Activity{}, order.ErrUnavailable
		}
		return Activity{ID: id, ItemID: 9}, nil
	}
	if a, err := c.Get(context.Background(), 1, load); err != nil || a.ItemID != 9 {
		t.Fatalf("first load: %+v %v", a, err)
	}
	down.Store(true)
	for range 3 {
		// Expire the copy by hand rather than wait activity.CopyTTL.
		backdate(&c, 1, 2*CopyTTL)
		if a, err := c.Get(context.Background(), 1, load); err != nil || a.ItemID != 9 {
			t.Fatalf("reload while MySQL is down: %+v %v, want the last copy", a, err)
		}
	}
	if _, err := c.Get(context.Background(), 2, load); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("first load while MySQL is down: %v, want order.ErrUnavailable", err)
	}
}

// A copy past half its life is re-read in the background: the requests of
// that moment are answered from the copy without waiting (the re-read is
// held here until they are all answered), one re-read serves them all,
// and its copy then replaces the old one.
func TestActivityCacheRefreshesAhead(t *testing.T) {
	var c Cache
	var calls atomic.Int32
	release := make(chan struct{})
	load := func(_ context.Context, id int64) (Activity, error) {
		if calls.Add(1) > 1 {
			<-release // the re-read: MySQL slow
			return Activity{ID: id, ItemID: 2}, nil
		}
		return Activity{ID: id, ItemID: 1}, nil
	}
	if a, err := c.Get(context.Background(), 1, load); err != nil || a.ItemID != 1 {
		t.Fatalf("first load: %+v %v", a, err)
	}
	v, _ := c.m.Load(int64(1))
	v.(*activityEntry).loaded = time.Now().Add(-activityRefreshAt - 10*time.Millisecond)
	v.(*activityEntry).expires = time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if a, err := c.Get(context.Background(), 1, load); err != nil || a.ItemID != 1 {
				t.Errorf("during the re-read: %+v %v, want the copy at once", a, err)
			}
		})
	}
	wg.Wait() // all answered while the re-read is still held
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		a, err := c.Get(context.Background(), 1, load)
		if err != nil {
			t.Fatal(err)
		}
		if a.ItemID == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the re-read's copy never replaced the old one")
		}
		time.Sleep(time.Millisecond)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d loads, want 2 (one re-read for 50 requests)", n)
	}
}

// An instance whose MySQL re-reads fail or hang (a stalled MySQL, a pool
// exhausted by buyers polling) stops selling on its old copy within
// activity.MaxStale of the last read that reached MySQL: Get answers
// order.ErrUnavailable from then on, and soon again once MySQL answers.
func TestActivityCacheStopsServingACopyPastMaxStale(t *testing.T) {
	for _, tc := range []struct {
		name string
		load func(ctx context.Context) error
	}{
		{"re-reads fail", func(context.Context) error { return order.ErrUnavailable }},
		{"re-reads hang", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c Cache
			var down atomic.Bool
			load := func(ctx context.Context, id int64) (Activity, error) {
				if down.Load() {
					return Activity{}, tc.load(ctx)
				}
				return Activity{ID: id, ItemID: 9}, nil
			}
			if _, err := c.Get(context.Background(), 1, load); err != nil {
				t.Fatal(err)
			}
			// As if read all but 2 s of the bound ago (the test then waits 2 s,
			// not the whole bound).
			v, _ := c.m.Load(int64(1))
			v.(*activityEntry).loaded = time.Now().Add(-(MaxStale - 2*time.Second))
			down.Store(true)
			lastRead := time.Now().Add(-(MaxStale - 2*time.Second)) // at or after the copy's read
			var lastServed time.Time
			deadline := lastRead.Add(MaxStale + 3*time.Second)
			for {
				before := time.Now()
				if before.After(deadline) {
					t.Fatalf("the copy was still served %v after its read (last at %v), want at most %v",
						before.Sub(lastRead), lastServed.Sub(lastRead), MaxStale)
				}
				_, err := c.Get(context.Background(), 1, load)
				if err == nil {
					lastServed = before
					if d := before.Sub(lastRead); d > MaxStale {
						t.Fatalf("the copy was served %v after its read, past activity.MaxStale %v", d, MaxStale)
					}
					time.Sleep(10 * time.Millisecond) // the request rate
					continue
				}
				if !errors.Is(err, order.ErrUnavailable) {
					t.Fatalf("past the bound: %v, want order.ErrUnavailable", err)
				}
				break
			}
			if lastServed.IsZero() {
				t.Fatal("the copy was never served while MySQL was down: a blip must not stop the sale")
			}
			// Every request from now on is refused until a read succeeds.
			for range 3 {
				if _, err := c.Get(context.Background(), 1, load); !errors.Is(err, order.ErrUnavailable) {
					t.Fatalf("past the bound: %v, want order.ErrUnavailable", err)
				}
			}
			down.Store(false)
			waitFor(t, 3*time.Second, func() bool {
				a, err := c.Get(context.Background(), 1, load)
				return err == nil && a.ItemID == 9
			})
		})
	}
}

// waitFor polls ok until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("not so within %v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
