package order

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestOrderNumbers(t *testing.T) {
	g := NewNumberGenerator()
	prev := ""
	for range 1000 {
		no := g.Next(42)
		if !ValidOrderNo(no) || ItemOf(no) != 42 {
			t.Fatalf("bad number %q (item %d)", no, ItemOf(no))
		}
		if no <= prev {
			t.Fatalf("not increasing: %q after %q", no, prev)
		}
		prev = no
	}
}

func TestValidOrderNo(t *testing.T) {
	cases := map[string]bool{
		"01JDXYZ0000000000000000000-42":  true,
		"01JDXYZ0000000000000000000-0":   false,
		"01JDXYZ0000000000000000000":     false,
		"01jdxyz0000000000000000000-42":  false,
		"01JDXYZ0000000000000000000-4'2": false,
		"":                               false,
	}
	for s, want := range cases {
		if got := ValidOrderNo(s); got != want {
			t.Errorf("ValidOrderNo(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestEventValidate(t *testing.T) {
	no := NewNumberGenerator().Next(3)
	good := Event{Version: EventVersion, OrderNo: no, IdempotencyKey: "k", UserID: "1", ItemID: 3, ActivityID: 1, Quantity: 1, ReservedAt: time.Now()}
	cases := []struct {
		name string
		mod  func(*Event)
		ok   bool
	}{
		{"good", func(*Event) {}, true},
		{"unknown version", func(e *Event) { e.Version = 99 }, false},
		{"item does not match number", func(e *Event) { e.ItemID = 4 }, false},
		{"zero quantity", func(e *Event) { e.Quantity = 0 }, false},
		{"huge quantity", func(e *Event) { e.Quantity = MaxQuantity + 1 }, false},
		{"bad key", func(e *Event) { e.IdempotencyKey = "a b" }, false},
		{"no time", func(e *Event) { e.ReservedAt = time.Time{} }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := good
			tc.mod(&e)
			if err := e.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestActiveAt(t *testing.T) {
	now := time.Now()
	a := Activity{StartsAt: now, EndsAt: now.Add(time.Minute)}
	if !a.ActiveAt(now) || a.ActiveAt(now.Add(-time.Second)) || a.ActiveAt(now.Add(time.Minute)) {
		t.Fatal("ActiveAt window is [starts_at, ends_at)")
	}
}

func TestPaymentWindowOr(t *testing.T) {
	tests := []struct {
		name string
		own  time.Duration
		def  time.Duration
		want time.Duration
	}{
		{"the activity's own", 5 * time.Minute, 30 * time.Minute, 5 * time.Minute},
		{"none of its own: the default", 0, 30 * time.Minute, 30 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Activity{PaymentWindow: tt.own}).PaymentWindowOr(tt.def); got != tt.want {
				t.Errorf("PaymentWindowOr(%v) = %v, want %v", tt.def, got, tt.want)
			}
		})
	}
}

func TestActivityCache(t *testing.T) {
	var c ActivityCache
	calls := 0
	fail := true
	load := func(_ context.Context, id int64) (Activity, error) {
		calls++
		if fail {
			return Activity{}, ErrUnavailable
		}
		return Activity{ID: id, ItemID: 9}, nil
	}
	ctx := context.Background()
	if _, err := c.Get(ctx, 1, load); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("failed load: %v, want ErrUnavailable", err)
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
// load; a copy older than ActivityTTL is read again, so a changed activity
// (a sale ended early) is seen within ActivityTTL.
func TestActivityCacheExpiresAndLoadsOnce(t *testing.T) {
	var c ActivityCache
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
	waitUntil := start.Add(3 * ActivityTTL)
	for time.Now().Before(waitUntil) {
		a, err := c.Get(context.Background(), 1, load)
		if err != nil {
			t.Fatal(err)
		}
		if a.EndsAt.Unix() == 50 {
			if d := time.Since(start); d > ActivityTTL+100*time.Millisecond {
				t.Fatalf("the change was seen after %v, want within %v", d, ActivityTTL)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the changed activity was never read again")
}

// backdate makes the cache's copy of id as if read age ago and expired.
func backdate(c *ActivityCache, id int64, age time.Duration) {
	v, _ := c.m.Load(id)
	e := v.(*activityEntry)
	e.loaded, e.expires = time.Now().Add(-age), time.Now().Add(-time.Millisecond)
}

// A re-read that fails keeps the last copy for a while: a blip of MySQL
// does not stop the sale.
func TestActivityCacheKeepsItsCopyWhenAReloadFails(t *testing.T) {
	var c ActivityCache
	var down atomic.Bool
	load := func(_ context.Context, id int64) (Activity, error) {
		if down.Load() {
			return Activity{}, ErrUnavailable
		}
		return Activity{ID: id, ItemID: 9}, nil
	}
	if a, err := c.Get(context.Background(), 1, load); err != nil || a.ItemID != 9 {
		t.Fatalf("first load: %+v %v", a, err)
	}
	down.Store(true)
	for range 3 {
		// Expire the copy by hand rather than wait ActivityTTL.
		backdate(&c, 1, 2*ActivityTTL)
		if a, err := c.Get(context.Background(), 1, load); err != nil || a.ItemID != 9 {
			t.Fatalf("reload while MySQL is down: %+v %v, want the last copy", a, err)
		}
	}
	if _, err := c.Get(context.Background(), 2, load); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("first load while MySQL is down: %v, want ErrUnavailable", err)
	}
}

func TestErrorf(t *testing.T) {
	err := fmt.Errorf("pay order 1 via mysql 10.0.0.3: %w", Errorf(ErrNotPayable, "the order is %s", Closed))
	if !errors.Is(err, ErrNotPayable) || errors.Is(err, ErrNotCancellable) {
		t.Fatalf("errors.Is does not see the code of %v", err)
	}
	if got, want := ClientMessage(err), "order is not payable: the order is CLOSED"; got != want {
		t.Fatalf("ClientMessage = %q, want %q", got, want)
	}
	if got := ClientMessage(fmt.Errorf("%w: redis down", ErrUnavailable)); got != "" {
		t.Fatalf("ClientMessage of a bare sentinel = %q, want none", got)
	}
}

// A copy past half its life is re-read in the background: the requests of
// that moment are answered from the copy without waiting (the re-read is
// held here until they are all answered), one re-read serves them all,
// and its copy then replaces the old one.
func TestActivityCacheRefreshesAhead(t *testing.T) {
	var c ActivityCache
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
// ActivityMaxStale of the last read that reached MySQL: Get answers
// ErrUnavailable from then on, and soon again once MySQL answers.
func TestActivityCacheStopsServingACopyPastMaxStale(t *testing.T) {
	for _, tc := range []struct {
		name string
		load func(ctx context.Context) error
	}{
		{"re-reads fail", func(context.Context) error { return ErrUnavailable }},
		{"re-reads hang", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c ActivityCache
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
			v.(*activityEntry).loaded = time.Now().Add(-(ActivityMaxStale - 2*time.Second))
			down.Store(true)
			lastRead := time.Now().Add(-(ActivityMaxStale - 2*time.Second)) // at or after the copy's read
			var lastServed time.Time
			deadline := lastRead.Add(ActivityMaxStale + 3*time.Second)
			for {
				before := time.Now()
				if before.After(deadline) {
					t.Fatalf("the copy was still served %v after its read (last at %v), want at most %v",
						before.Sub(lastRead), lastServed.Sub(lastRead), ActivityMaxStale)
				}
				_, err := c.Get(context.Background(), 1, load)
				if err == nil {
					lastServed = before
					if d := before.Sub(lastRead); d > ActivityMaxStale {
						t.Fatalf("the copy was served %v after its read, past ActivityMaxStale %v", d, ActivityMaxStale)
					}
					time.Sleep(10 * time.Millisecond) // the request rate
					continue
				}
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("past the bound: %v, want ErrUnavailable", err)
				}
				break
			}
			if lastServed.IsZero() {
				t.Fatal("the copy was never served while MySQL was down: a blip must not stop the sale")
			}
			// Every request from now on is refused until a read succeeds.
			for range 3 {
				if _, err := c.Get(context.Background(), 1, load); !errors.Is(err, ErrUnavailable) {
					t.Fatalf("past the bound: %v, want ErrUnavailable", err)
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

func TestRefusal(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	sale := Activity{StartsAt: start, EndsAt: start.Add(time.Hour), PerUserLimit: 2}
	cancelled := sale
	cancelled.EndsAt, cancelled.CancelledAt = start.Add(time.Minute), start.Add(time.Minute)
	cases := []struct {
		name string
		a    Activity
		at   time.Time
		qty  int
		want string
	}{
		{"within the sale", sale, start.Add(time.Minute), 2, ""},
		{"at the start", sale, start, 1, ""},
		{"before the start", sale, start.Add(-time.Millisecond), 1, ReasonSaleNotStarted},
		{"at the end", sale, start.Add(time.Hour), 1, ReasonSaleEnded},
		{"after the end", sale, start.Add(2 * time.Hour), 1, ReasonSaleEnded},
		{"above the limit", sale, start.Add(time.Minute), 3, ReasonOverLimit},
		{"ended beats the limit", sale, start.Add(time.Hour), 3, ReasonSaleEnded},
		{"after a cancel", cancelled, start.Add(time.Minute), 1, ReasonSaleCancelled},
		{"before a cancel", cancelled, start.Add(time.Second), 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Refusal(tc.at, tc.qty); got != tc.want {
				t.Fatalf("Refusal = %q, want %q", got, tc.want)
			}
		})
	}
}
