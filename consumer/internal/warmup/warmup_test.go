package warmup_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/consumer/internal/warmup"
	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/reconcile"
	"github.com/seckill/seckill/pkg/service/sales"
)

// Two consumers' schedules (each with its own lock client, as two
// processes have) run side by side: an activity starting in 3 s with a 1 s
// lead is warmed between its lead time and its start, once (one log line,
// warmed_at set, Redis = MySQL, the reconciler agrees); an activity
// starting in an hour is left alone, and so is a bucketed one until its
// own lead time.
func TestScheduledWarmupOnceAcrossTwoConsumers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	db := mysqltest.New(t)
	store := stockredis.New(rdb, prefix)
	const lead = time.Second
	newSale := func(stock int64, starts time.Time, buckets int) activity.Activity {
		it, err := db.Activities.CreateItem(ctx, "sneaker", stock)
		if err != nil {
			t.Fatal(err)
		}
		a, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: starts, EndsAt: starts.Add(time.Hour),
			PerUserLimit: 1, StockBuckets: buckets})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	starts := time.Now().Add(3 * time.Second)
	soon := newSale(25, starts, 1)
	later := newSale(40, time.Now().Add(time.Hour), 1)
	bucketed := newSale(30, starts.Add(time.Second), 3)

	logBuf := &logstest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logBuf, nil))
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, name := range []string{"consumer-a", "consumer-b"} {
		s := &warmup.Scheduler{DB: db.DB.Activities, Sales: &sales.Service{Tx: db.DB, Sales: db.DB.Activities, Warmups: db.DB.Activities, Restocks: db.DB.Restocks, Stock: store.Stock}, Lead: lead, Every: 20 * time.Millisecond, Log: log.With("instance", name),
			Locker: lock.New(rdb, lock.Options{Prefix: prefix, InstanceID: name})}
		wg.Add(1)
		go func() { defer wg.Done(); s.Run(runCtx) }()
	}
	t.Cleanup(func() { stop(); wg.Wait() })

	warmedAt := map[int64]time.Time{}
	waittest.UntilEvery(t, 15*time.Second, 10*time.Millisecond, "both activities to be warmed on schedule", func() bool {
		for _, a := range []activity.Activity{soon, bucketed} {
			if _, ok := warmedAt[a.ID]; ok {
				continue
			}
			if snap, err := store.Stock.Stock(ctx, reservation.One(a.ItemID)); err == nil && snap.Warmed {
				warmedAt[a.ID] = time.Now()
			}
		}
		return len(warmedAt) == 2
	})
	for _, a := range []activity.Activity{soon, bucketed} {
		if at := warmedAt[a.ID]; at.Before(a.StartsAt.Add(-lead)) || !at.Before(a.StartsAt) {
			t.Errorf("activity %d warmed (seen) at %s, want between %s (lead %s) and its start %s",
				a.ID, at.Format(time.StampMilli), a.StartsAt.Add(-lead).Format(time.StampMilli), lead, a.StartsAt.Format(time.StampMilli))
		}
	}
	// Let both schedules tick on past the starts: nothing more happens.
	waittest.Until(t, 10*time.Second, "the activities to start", func() bool {
		return time.Now().After(bucketed.StartsAt.Add(300 * time.Millisecond))
	})
	stop()
	wg.Wait()

	if n := strings.Count(logBuf.String(), "activity warmed up on schedule"); n != 2 {
		t.Fatalf("%d warm-ups logged, want 2 (each activity once):\n%s", n, logBuf.String())
	}
	if strings.Contains(logBuf.String(), "warm-up failed") {
		t.Fatalf("a pass failed:\n%s", logBuf.String())
	}
	for _, c := range []struct {
		a      activity.Activity
		warmed bool
		stock  int64
	}{{soon, true, 25}, {bucketed, true, 30}, {later, false, 0}} {
		snap, err := store.Stock.Stock(ctx, reservation.One(c.a.ItemID))
		if err != nil {
			t.Fatal(err)
		}
		at, err := db.Activities.ActivityWarmedAt(ctx, c.a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Warmed != c.warmed || snap.Stock != c.stock || at.IsZero() == c.warmed {
			t.Errorf("activity %d: Redis %+v, warmed_at %v; want warmed %v with stock %d", c.a.ID, snap, at, c.warmed, c.stock)
		}
	}
	checker := &reconcile.Checker{Stock: store.Reconciler, DB: reconcile.DB{Reads: db.Reconcile, Restocks: db.Restocks, OrderLookup: db.Orders,
		Items: db.Activities, Pinger: db.DB}, Log: slog.New(slog.DiscardHandler), Recheck: 50 * time.Millisecond}
	targets, err := checker.Targets(ctx, reconcile.Selection{Items: []int64{soon.ItemID, bucketed.ItemID}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := checker.Run(ctx, targets, reconcile.CheckOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range rep.Items {
		if it.Verdict != reconcile.OK {
			t.Errorf("reconciler on item %d: %+v, want ok", it.ItemID, it)
		}
	}
}

// While another process holds the lock a pass does nothing and says so.
func TestWarmupWaitsForTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	db := mysqltest.New(t)
	s := &warmup.Scheduler{DB: db.DB.Activities, Sales: &sales.Service{Tx: db.DB, Sales: db.DB.Activities, Warmups: db.DB.Activities, Restocks: db.DB.Restocks, Stock: stockredis.New(rdb, prefix).Stock}, Log: slog.New(slog.DiscardHandler),
		Locker: lock.New(rdb, lock.Options{Prefix: prefix, InstanceID: "a"})}
	other, err := lock.New(rdb, lock.Options{Prefix: prefix, InstanceID: "b"}).TryLock(ctx, warmup.LockName)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	if _, err := s.Once(ctx); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("pass while another holds the lock: %v, want ErrNotAcquired", err)
	}
}
