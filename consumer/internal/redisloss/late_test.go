package redisloss

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/consumer/internal/fulfil"
	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/service/fulfilment"
	"github.com/seckill/seckill/pkg/service/reconcile"
)

// An order accepted before Redis came back from an older state whose event
// reaches MySQL only after the watch healed Redis and closed the incident
// (its batch was waiting out the router's backoff while Redis was down, up
// to 5 s): the heal's passes read MySQL before the order was there, so they
// set Redis stock to include its unit and gave its buyer no quota key. The
// consumer's claim finds the reservation missing and writes the order all
// the same; that write must bring a repair pass after it, which takes the
// unit off Redis stock and gives the buyer the quota key back. Without one,
// Redis sells the unit a second time (the chaos suite's
// TestChaosRedisRestoredFromOlderStateBucketed: "Redis stock 51 != MySQL
// stock 50", one live order without its quota key). One stock key and
// three buckets alike.
func TestWatchRepairsAnOrderThatReachesMySQLAfterTheHeal(t *testing.T) {
	for _, buckets := range []int{1, 3} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) {
			lateOrderAfterHeal(t, buckets)
		})
	}
}

func lateOrderAfterHeal(t *testing.T, buckets int) {
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := stockredis.NewClient(stockredis.Config{Addrs: []string{srv.addr}})
	t.Cleanup(func() { rdb.Close() })
	const prefix = "hl"
	store := stockredis.New(rdb, prefix)
	db := mysqltest.New(t)
	it, err := db.Activities.CreateItem(ctx, "sneaker", 10)
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
	if _, err := store.Stock.WarmupFrom(ctx, item, buckets, 2*time.Hour, db.Restocks); err != nil {
		t.Fatal(err)
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
	w := &Watch{Redis: rdb, Marker: MarkerKey(prefix), Record: db.RedisWatches, Every: 20 * time.Millisecond, Log: log,
		Metrics: metrics.NewHeal(prometheus.NewRegistry()), Repair: repairer.Repair}
	// The consumer's handler, wired as consumer/main.go wires it.
	handler := &fulfil.Handler{Stock: store.Reservations, DB: &fulfilment.Service{Tx: db.DB, Orders: db.Orders, Events: db.Outbox, Draws: db.Draws}, Activities: db.Activities, PaymentWindow: time.Hour, Log: log,
		Losses: &Reporter{Record: db.RedisWatches, Marker: w.Marker}}
	for range 2 {
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The API reserves an order and publishes its event; the consumer has
	// not claimed it when Redis goes down.
	r := reservation.Reservation{OrderNo: order.NewNumberGenerator().Next(it.ID), UserID: "7", ItemID: it.ID, ActivityID: act.ID,
		Quantity: 1, IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: 2 * time.Hour, Buckets: buckets}
	if _, err := store.Reservations.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	ev := order.Event{Version: order.EventVersion, OrderNo: r.OrderNo, IdempotencyKey: r.IdempotencyKey, UserID: r.UserID,
		ItemID: r.ItemID, ActivityID: r.ActivityID, Quantity: 1, ReservedAt: r.At}

	// Redis comes back from a state older than the sale: the watch heals
	// it from MySQL, which does not have the order yet, and closes the
	// incident after a pass that finds nothing left.
	srv.restart(true)
	waittest.UntilEvery(t, 30*time.Second, w.Every, "the watch to heal Redis", func() bool {
		return w.Tick(ctx) == nil && !w.Incident()
	})
	stock := func() int64 {
		t.Helper()
		snap, err := store.Stock.Stock(ctx, item)
		if err != nil || !snap.Warmed {
			t.Fatalf("Redis stock %+v (%v)", snap, err)
		}
		return snap.Stock
	}
	if got := stock(); got != 10 {
		t.Fatalf("healed Redis stock %d, want 10 (MySQL's, without the order)", got)
	}

	// Now the consumer's retry gets through: the claim finds no
	// reservation, and MySQL takes the order (and its unit).
	res := handler.Handle(ctx, []order.Event{ev})
	if res[0].Label != string(fulfil.Created) {
		t.Fatalf("the late event: %q (%v), want created", res[0].Label, res[0].Err)
	}
	mysql, err := db.Activities.ItemStock(ctx, it.ID)
	if err != nil || mysql != 9 {
		t.Fatalf("MySQL stock %d (%v), want 9", mysql, err)
	}

	// The watch brings Redis to MySQL again: stock without the order's
	// unit, the buyer's quota key holding the order, its reservation back.
	k := store.Keys(item)
	var redisStock int64
	var quota string
	defer func() {
		if t.Failed() {
			t.Logf("Redis stock %d, MySQL stock %d; the buyer's quota key holds %q, want %s", redisStock, mysql, quota, r.OrderNo)
		}
	}()
	waittest.UntilEvery(t, 5*time.Second, w.Every, "Redis stock to equal MySQL's after the late order", func() bool {
		_ = w.Tick(ctx)
		redisStock, quota = stock(), rdb.Get(ctx, k.Quota(act.ID, r.UserID)).Val()
		return !w.Incident() && redisStock == mysql && quota == r.OrderNo
	})
	if _, err := store.Reservations.Reservation(ctx, r.OrderNo); err != nil {
		t.Fatalf("the late order's reservation: %v, want it restored", err)
	}
	again := r
	again.OrderNo, again.IdempotencyKey = order.NewNumberGenerator().Next(it.ID), "k2"
	if _, err := store.Reservations.Reserve(ctx, again); err == nil {
		t.Fatal("the buyer of the late order bought a second time")
	}
}
