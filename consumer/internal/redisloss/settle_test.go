package redisloss

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/service/reconcile"
)

// A loss that undoes a bucketed release's give-back (the bucket's master
// failed over to a replica that lagged; the release itself, on the item's
// master, stays): the bucket lacks the units again and holds the take's
// marker and listing, so the units count as moving (in flight) and the
// incident's pass sees no drift while they are listed. Once their listing
// ends they are missing from Redis; the watch's pass Settle after the loss
// puts them back. Without it the sale stayed short until the nightly
// reconciler (the replicated soak, seed 1: 4 units of a 3-bucket sale).
func TestWatchRepairsOnceAGiveBackLostStopsMoving(t *testing.T) {
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := stockredis.NewClient(stockredis.Config{Addrs: []string{srv.addr}})
	t.Cleanup(func() { rdb.Close() })
	const prefix, buckets = "hs", 3
	store := stockredis.New(rdb, prefix)
	db := mysqltest.New(t)

	it, err := db.Activities.CreateItem(ctx, "sneaker", 30)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	act, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		PerUserLimit: 1, StockBuckets: buckets})
	if err != nil {
		t.Fatal(err)
	}
	item := reservation.One(it.ID)
	if _, err := store.Stock.WarmupBuckets(ctx, item, buckets, 2*time.Hour, func(ctx context.Context) (int64, error) { return db.Activities.ItemStock(ctx, it.ID) }); err != nil {
		t.Fatal(err)
	}
	k := store.Keys(item)
	total := func() int64 {
		t.Helper()
		snap, err := store.Stock.Stock(ctx, item)
		if err != nil || !snap.Warmed {
			t.Fatalf("Redis stock %+v: %v", snap, err)
		}
		return snap.Stock
	}

	logBuf := &logstest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", logBuf.String())
		}
	})
	repairer := &Repairer{
		Checker: &reconcile.Checker{Stock: store.Reconciler, DB: reconcile.DB{Reads: db.Reconcile, Restocks: db.Restocks, OrderLookup: db.Orders,
			Items: db.Activities, Pinger: db.DB}, Log: log, Warmer: store.Stock, Recheck: 50 * time.Millisecond},
		TryLock: tryLock(lock.New(rdb, lock.Options{Prefix: prefix})),
	}
	var mu sync.Mutex
	var passes []bool
	const settle = 3 * time.Second
	w := &Watch{Redis: rdb, Marker: MarkerKey(prefix), Record: db.RedisWatches, Every: 20 * time.Millisecond, Log: log,
		Metrics: metrics.NewHeal(prometheus.NewRegistry()), Settle: settle,
		Repair: func(ctx context.Context) (bool, error) {
			repaired, err := repairer.Repair(ctx)
			if err == nil {
				mu.Lock()
				passes = append(passes, repaired)
				mu.Unlock()
			}
			return repaired, err
		}}
	calls := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), passes...)
	}
	for range 3 { // nothing lost yet: the ticks record what they see
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Order o of 2 units, reserved and released (given back to its
	// bucket): Redis holds the 30 units MySQL has.
	gen := order.NewNumberGenerator()
	r := reservation.Reservation{OrderNo: gen.Next(it.ID), UserID: "7", ItemID: it.ID, ActivityID: act.ID, Quantity: 2,
		IdempotencyKey: "k", At: now, QuotaTTL: time.Hour, ReservationTTL: 2 * time.Hour, Buckets: buckets}
	if _, err := store.Reservations.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	ref := reservation.Ref{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: r.ItemID, ActivityID: r.ActivityID, IdempotencyKey: r.IdempotencyKey}
	if rel, err := store.Reservations.Release(ctx, ref, reservation.ReleaseOptions{Reason: "test", From: []reservation.State{reservation.StateReserved}}); err != nil || !rel.Released {
		t.Fatalf("release: %+v %v", rel, err)
	}
	if got := total(); got != 30 {
		t.Fatalf("Redis stock %d after the release, want 30", got)
	}
	// The bucket's node loses the give-back: its bucket, marker and
	// listing are as the take left them (bucket_take again, on the bucket
	// the reservation named).
	b, err := rdb.HGet(ctx, k.Reservation(r.OrderNo), "bucket").Int()
	if err != nil {
		t.Fatal(err)
	}
	left, err := redis.NewScript(lua.Source("bucket_take")).Run(ctx, rdb, []string{k.Bucket(b), k.Taken(b, r.OrderNo), k.Takes(b)},
		2, time.Hour.Milliseconds(), r.OrderNo, stockredis.MovingRetention.Milliseconds()).Int64()
	if err != nil || left < 0 {
		t.Fatalf("bucket_take: %d %v", left, err)
	}
	// The loss is seen (the generation marker went with that master).
	if err := rdb.Del(ctx, MarkerKey(prefix)).Err(); err != nil {
		t.Fatal(err)
	}
	lostAt := time.Now()
	waittest.UntilEvery(t, 20*time.Second, w.Every, "a repair pass after the loss", func() bool {
		_ = w.Tick(ctx)
		return len(calls()) > 0
	})
	// The units count as moving: the pass repaired nothing, Redis holds 28.
	if p := calls(); p[0] {
		t.Fatalf("passes %v: the first one repaired, want none (the units moving)", p)
	}
	if got := total(); got != 28 {
		t.Fatalf("Redis stock %d after the first pass, want 28 (2 units listed as moving)", got)
	}
	// Their listings end (MovingRetention after them; here at once).
	if err := rdb.ZRem(ctx, k.Takes(b), "2:"+r.OrderNo).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, k.Gives()).Err(); err != nil {
		t.Fatal(err)
	}
	waittest.UntilEvery(t, 20*time.Second, w.Every, "the incident closed", func() bool {
		_ = w.Tick(ctx)
		return !w.Incident()
	})
	n := len(calls())
	if got := total(); got != 28 {
		t.Fatalf("Redis stock %d once the incident closed, want 28 (the units still listed then)", got)
	}
	waittest.UntilEvery(t, 20*time.Second, w.Every, "the pass after the loss settled", func() bool {
		_ = w.Tick(ctx)
		return len(calls()) > n
	})
	if since := time.Since(lostAt); since < settle {
		t.Fatalf("the pass after the loss ran %v after it, before Settle (%v)", since, settle)
	}
	if got := total(); got != 30 {
		t.Fatalf("Redis stock %d after the pass Settle after the loss, want 30 (MySQL's); passes %v", got, calls())
	}
	if p := calls(); !p[len(p)-1] {
		t.Fatalf("passes %v: the last one repaired nothing", p)
	}
}
