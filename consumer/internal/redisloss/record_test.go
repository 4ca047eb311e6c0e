package redisloss

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/heal"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/service/reconcile"
)

func TestDetect(t *testing.T) {
	t.Parallel()
	ids := map[string]string{"a:1": "r1", "b:2": "r2"}
	cases := []struct {
		name   string
		rec    heal.RedisWatch
		ids    map[string]string
		gen    int64
		reason string
	}{
		{name: "never recorded", rec: heal.RedisWatch{}, ids: ids, gen: 0},
		{name: "all as recorded", rec: heal.RedisWatch{RunIDs: "a:1=r1,b:2=r2", Generation: 7}, ids: ids, gen: 7},
		{name: "marker ahead (another watch raised it)", rec: heal.RedisWatch{RunIDs: "a:1=r1,b:2=r2", Generation: 7}, ids: ids, gen: 9},
		{name: "a master restarted", rec: heal.RedisWatch{RunIDs: "a:1=r0,b:2=r2", Generation: 7}, ids: ids, gen: 7,
			reason: metrics.HealRestart},
		{name: "a master at a new address", rec: heal.RedisWatch{RunIDs: "a:1=r1", Generation: 7}, ids: ids, gen: 7,
			reason: metrics.HealNewMaster},
		{name: "a master gone is no loss by itself", rec: heal.RedisWatch{RunIDs: "a:1=r1,b:2=r2,c:3=r3", Generation: 7},
			ids: ids, gen: 7},
		{name: "restart wins over a new master", rec: heal.RedisWatch{RunIDs: "a:1=r0", Generation: 7}, ids: ids, gen: 7,
			reason: metrics.HealRestart},
		{name: "marker gone", rec: heal.RedisWatch{RunIDs: "a:1=r1,b:2=r2", Generation: 7}, ids: ids, gen: 0,
			reason: metrics.HealMarker},
		{name: "marker behind", rec: heal.RedisWatch{RunIDs: "a:1=r1,b:2=r2", Generation: 7}, ids: ids, gen: 6,
			reason: metrics.HealMarker},
		{name: "marker behind, run ids never recorded", rec: heal.RedisWatch{Generation: 7}, ids: ids, gen: 3,
			reason: metrics.HealMarker},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reason, why := detect(c.rec, c.ids, c.gen)
			if reason != c.reason || (reason != "") != (why != "") {
				t.Fatalf("detect(%+v, %v, %d) = %q, %q; want reason %q", c.rec, c.ids, c.gen, reason, why, c.reason)
			}
		})
	}
	if got := decodeRunIDs(encodeRunIDs(ids)); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("run ids %v came back as %v", ids, got)
	}
}

// fixture is one item on sale with one buyer's order all the way through,
// and what a watch over it needs.
type fixture struct {
	t        *testing.T
	rdb      redis.UniversalClient
	prefix   string
	store    *stockredis.Store
	db       *mysqltest.DB
	item     int64
	activity int64
	orderNo  string
	repairer *Repairer
	log      *logstest.Buffer
}

const fixtureUser, fixtureKey = "7", "k"

func newFixture(t *testing.T, rdb redis.UniversalClient, prefix string) *fixture {
	t.Helper()
	ctx := context.Background()
	store := stockredis.New(rdb, prefix)
	db := mysqltest.New(t)
	it, err := db.Activities.CreateItem(ctx, "sneaker", 10)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	act, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PerUserLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Stock.Warmup(ctx, reservation.One(it.ID), 2*time.Hour, func(ctx context.Context) (int64, error) { return db.Activities.ItemStock(ctx, it.ID) }); err != nil {
		t.Fatal(err)
	}
	r := reservation.Reservation{OrderNo: order.NewNumberGenerator().Next(it.ID), UserID: fixtureUser, ItemID: it.ID, ActivityID: act.ID,
		Quantity: 1, IdempotencyKey: fixtureKey, At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: 2 * time.Hour}
	if _, err := store.Reservations.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Reservations.Claim(ctx, reservation.One(it.ID), []string{r.OrderNo}); err != nil {
		t.Fatal(err)
	}
	if _, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{{Event: order.Event{Version: order.EventVersion, OrderNo: r.OrderNo,
		IdempotencyKey: r.IdempotencyKey, UserID: r.UserID, ItemID: r.ItemID, ActivityID: r.ActivityID, Quantity: 1,
		ReservedAt: r.At}, PayDeadline: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Reservations.Confirm(ctx, reservation.One(it.ID), []string{r.OrderNo}); err != nil {
		t.Fatal(err)
	}
	buf := &logstest.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", buf.String())
		}
	})
	f := &fixture{t: t, rdb: rdb, prefix: prefix, store: store, db: db, item: it.ID, activity: act.ID, orderNo: r.OrderNo, log: buf}
	f.repairer = &Repairer{
		Checker: &reconcile.Checker{Stock: store.Reconciler, DB: reconcile.DB{Reads: db.Reconcile, Restocks: db.Restocks, OrderLookup: db.Orders,
			Items: db.Activities, Pinger: db.DB}, Log: f.logger(), Warmer: store.Stock, Recheck: 50 * time.Millisecond},
		TryLock: tryLock(lock.New(rdb, lock.Options{Prefix: prefix})),
	}
	return f
}

func (f *fixture) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// watch is a new watch (a consumer starting) over the fixture, with its
// own metrics; record nil means the fixture's MySQL, repair nil the real
// repair.
func (f *fixture) watch(record Record, repair Repair) (*Watch, *prometheus.Registry) {
	if record == nil {
		record = f.db.RedisWatches
	}
	if repair == nil {
		repair = f.repairer.Repair
	}
	reg := prometheus.NewRegistry()
	return &Watch{Redis: f.rdb, Marker: MarkerKey(f.prefix), Record: record, Repair: repair, Every: 20 * time.Millisecond,
		Log: f.logger(), Metrics: metrics.NewHeal(reg)}, reg
}

// lose deletes every key of the fixture's prefix: its data, the marker too.
func (f *fixture) lose() {
	f.t.Helper()
	ctx := context.Background()
	err := redistest.ForEachNode(ctx, f.rdb, func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, f.prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := node.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// healed fails unless Redis holds what MySQL says: the item's stock, the
// buyer's quota key and idempotency record holding the order.
func (f *fixture) healed(what string) {
	f.t.Helper()
	ctx := context.Background()
	snap, err := f.store.Stock.Stock(ctx, reservation.One(f.item))
	if err != nil || !snap.Warmed || snap.Stock != 9 {
		f.t.Fatalf("%s: Redis stock %+v (%v), want 9 (MySQL's)", what, snap, err)
	}
	k := f.store.Keys(reservation.One(f.item))
	if got := f.rdb.Get(ctx, k.Quota(f.activity, fixtureUser)).Val(); got != f.orderNo {
		f.t.Fatalf("%s: quota key of the buyer holds %q, want %s", what, got, f.orderNo)
	}
	if got := f.rdb.Get(ctx, k.Idem(fixtureUser, fixtureKey)).Val(); !strings.Contains(got, f.orderNo) {
		f.t.Fatalf("%s: idempotency record of the buyer's key holds %q, want %s", what, got, f.orderNo)
	}
}

// record reads the fixture's MySQL record.
func (f *fixture) record() heal.RedisWatch {
	f.t.Helper()
	rec, err := f.db.RedisWatches.RedisWatch(context.Background(), MarkerKey(f.prefix))
	if err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// tickUntilHealed ticks w until it has no incident, after at least one
// tick, and the record owes no repair.
func (f *fixture) tickUntilHealed(w *Watch, what string) {
	f.t.Helper()
	ctx := context.Background()
	var err error
	waittest.UntilEvery(f.t, 30*time.Second, w.Every, what+": repaired", func() bool {
		err = w.Tick(ctx)
		rec := f.record()
		return err == nil && !w.Incident() && rec.Healed == rec.Losses
	})
}

// A loss that happened while no watch ran (no consumer: a rolling deploy)
// is noticed at the first tick of the next watch, from the record in
// MySQL: a real restart of Redis with its data lost (the run-id branch),
// the marker rewound with the data (the marker branch); and a new watch
// over a Redis that lost nothing repairs nothing.
func TestWatchHealsLossWhileNoWatchRan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := stockredis.NewClient(stockredis.Config{Addrs: []string{srv.addr}})
	t.Cleanup(func() { rdb.Close() })
	f := newFixture(t, rdb, "hn")
	passes := 0
	counted := func(ctx context.Context) (bool, error) { passes++; return f.repairer.Repair(ctx) }

	w, _ := f.watch(nil, counted)
	for range 3 {
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if passes != 0 || w.Incident() {
		t.Fatalf("%d passes with nothing lost", passes)
	}
	if rec := f.record(); rec.Generation < 1 || rec.RunIDs == "" || rec.Losses != 0 {
		t.Fatalf("record after three ticks %+v, want a generation, the run id, no loss", rec)
	}

	// 1. The consumer stops; Redis restarts empty; a new consumer starts.
	srv.restart(true)
	w, reg := f.watch(nil, counted)
	f.tickUntilHealed(w, "restart while no watch ran")
	f.healed("after the restart")
	if v := value(t, reg, "seckill_heal_detections_total", "reason", metrics.HealRestart); v != 1 {
		t.Fatalf("restart detections %v, want 1", v)
	}

	// 2. The consumer stops; Redis comes back from an older state without
	// a restart the run id shows (a resync from a lagging master): the
	// marker goes back with the data.
	k := f.store.Keys(reservation.One(f.item))
	rdb.Set(ctx, MarkerKey(f.prefix), 1, 0)
	rdb.Del(ctx, k.Quota(f.activity, fixtureUser), k.Idem(fixtureUser, fixtureKey))
	rdb.IncrBy(ctx, k.Stock(), 3)
	w, reg = f.watch(nil, counted)
	f.tickUntilHealed(w, "marker rewound while no watch ran")
	f.healed("after the rewind")
	if v := value(t, reg, "seckill_heal_detections_total", "reason", metrics.HealMarker); v != 1 {
		t.Fatalf("marker detections %v, want 1", v)
	}

	// 3. A consumer restart over a Redis that lost nothing costs nothing.
	n := passes
	w, reg = f.watch(nil, counted)
	for range 3 {
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if passes != n || w.Incident() {
		t.Fatalf("%d passes after a consumer restart with nothing lost", passes-n)
	}
	for _, r := range []string{metrics.HealRestart, metrics.HealNewMaster, metrics.HealMarker} {
		if v := value(t, reg, "seckill_heal_detections_total", "reason", r); v != 0 {
			t.Fatalf("%s detections %v with nothing lost", r, v)
		}
	}
	if rec := f.record(); rec.Losses != 2 || rec.Healed != 2 {
		t.Fatalf("record %+v, want two losses, both healed", rec)
	}
}

// A watch that detected a loss and stopped before repairing it (its
// consumer killed, or the lock busy until then) leaves the loss recorded:
// the next watch repairs it though Redis shows nothing wrong any more
// (the marker and run ids moved on).
func TestWatchRepairsALossAnotherWatchRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	f := newFixture(t, rdb, prefix)
	a, _ := f.watch(nil, func(context.Context) (bool, error) { return false, fmt.Errorf("killed before its pass") })
	if err := a.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	f.lose()
	if err := a.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if !a.Incident() {
		t.Fatal("no incident after the loss")
	}
	if rec := f.record(); rec.Losses != 1 || rec.Healed != 0 || !strings.Contains(rec.LastLoss, "marker") {
		t.Fatalf("record after the detection %+v, want one loss owed, by the marker", rec)
	}
	// a is gone; b starts.
	b, reg := f.watch(nil, nil)
	f.tickUntilHealed(b, "the recorded loss")
	f.healed("after the next watch")
	if v := value(t, reg, "seckill_heal_detections_total", "reason", metrics.HealMarker); v != 0 {
		t.Fatalf("the second watch detected %v times: it should find the loss recorded, not see it", v)
	}
	if !strings.Contains(f.log.String(), "a recorded loss of Redis data is not repaired yet") {
		t.Fatal("no log line for the recorded loss")
	}
}

// Two consumers run the watch at once: with nothing lost, their raises of
// the marker and writes of the record never look like a loss to either;
// after a loss both see it (or find it recorded), the repair runs, and
// the record ends healed.
func TestTwoWatchesAtOnce(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	f := newFixture(t, rdb, prefix)
	var mu sync.Mutex
	passes := 0
	counted := func(ctx context.Context) (bool, error) {
		mu.Lock()
		passes++
		mu.Unlock()
		return f.repairer.Repair(ctx)
	}
	x, regX := f.watch(nil, counted)
	y, regY := f.watch(nil, counted)
	// run ticks both watches at once, n times each (when n is 0: until
	// neither has an incident open and ok; ok runs on the watches'
	// goroutines, so it must not fail the test itself).
	run := func(n int, ok func() bool) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		var done sync.Map
		for _, w := range []*Watch{x, y} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				deadline := time.Now().Add(30 * time.Second)
				for i := 0; n == 0 || i < n; i++ {
					if err := w.Tick(context.Background()); err != nil {
						errs <- err
						return
					}
					if n == 0 {
						done.Store(w, !w.Incident())
						a, _ := done.Load(x)
						b, _ := done.Load(y)
						if a == true && b == true && ok() {
							return
						}
						if time.Now().After(deadline) {
							errs <- fmt.Errorf("not healed within 30s")
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	run(50, nil)
	mu.Lock()
	n := passes
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d repair passes with nothing lost", n)
	}
	for _, reg := range []*prometheus.Registry{regX, regY} {
		if v := value(t, reg, "seckill_heal_detections_total", "reason", metrics.HealMarker); v != 0 {
			t.Fatalf("%v marker detections with nothing lost: two watches' writes looked like a loss", v)
		}
	}

	f.lose()
	run(0, func() bool {
		rec, err := f.db.RedisWatches.RedisWatch(context.Background(), MarkerKey(f.prefix))
		return err == nil && rec.Losses > 0 && rec.Healed == rec.Losses
	})
	f.healed("after the loss")
	if x.Incident() || y.Incident() {
		t.Fatal("an incident still open")
	}
}

// The answer to each write the watch makes is lost at the wire: the raise
// of the marker (no false alarm follows), the record of a loss (the loss
// is seen again and repaired), the record of a repair (it had run: nothing
// more is owed).
func TestWatchLostAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rp := proxytest.Start(t, redistest.Addr(), proxytest.RESP)
	rdb := stockredis.NewClient(stockredis.Config{Addrs: []string{rp.Addr()}})
	t.Cleanup(func() { rdb.Close() })
	_, prefix := redistest.New(t)
	f := newFixture(t, rdb, prefix)
	// The record through a MySQL proxy; statements as text, so the proxy
	// can pick them by their SQL.
	cfg, err := mysqldrv.ParseDSN(f.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	mp := proxytest.Start(t, cfg.Addr, proxytest.MySQL)
	cfg.Addr, cfg.InterpolateParams = mp.Addr(), true
	via, err := orderdb.Open(orderdb.Config{DSN: cfg.FormatDSN(), MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { via.Close() })
	w, reg := f.watch(via.RedisWatches, nil)
	if err := w.Tick(ctx); err != nil {
		t.Fatal(err)
	}

	// The raise's answer: it ran, the record did not follow.
	rp.LoseReply(proxytest.RedisCommand("INCRBY"), 1)
	if err := w.Tick(ctx); err == nil {
		t.Fatal("a tick whose INCRBY answer was lost answered nil")
	}
	rp.WaitLost(t, 1, 5*time.Second)
	for range 5 {
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if v := value(t, reg, "seckill_heal_detections_total", "reason", metrics.HealMarker); v != 0 || w.Incident() {
		t.Fatalf("after a lost raise: %v marker detections, incident %v; want none", v, w.Incident())
	}

	// The loss's record: it ran; the evidence was not moved on, so the
	// next tick sees the loss again.
	f.lose()
	mp.LoseReply(proxytest.MySQLQuery("UPDATE redis_watches SET losses"), 1)
	if err := w.Tick(ctx); err == nil {
		t.Fatal("a tick whose loss record answer was lost answered nil")
	}
	mp.WaitLost(t, 1, 5*time.Second)
	f.tickUntilHealed(w, "after a lost answer to the loss's record")
	f.healed("after a lost answer to the loss's record")
	if rec := f.record(); rec.Losses != 2 {
		t.Fatalf("record %+v, want the loss counted twice (once unanswered)", rec)
	}

	// The repair's record: it ran; nothing more is owed.
	f.lose()
	mp.LoseReply(proxytest.MySQLQuery("UPDATE redis_watches SET healed"), 1)
	f.tickUntilHealed(w, "after a lost answer to the repair's record")
	mp.WaitLost(t, 2, 5*time.Second)
	f.healed("after a lost answer to the repair's record")
	if rec := f.record(); rec.Losses != 3 || rec.Healed != 3 {
		t.Fatalf("record %+v, want three losses, all healed", rec)
	}
}

// A marker key holding something other than a counter (written by hand,
// or by another program) is taken for a lost marker and replaced with a
// counter, so the watch goes on raising it.
func TestWatchReplacesAMarkerOfAnotherKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	f := newFixture(t, rdb, prefix)
	w, reg := f.watch(nil, nil)
	if err := w.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, MarkerKey(prefix), "3f9a2c", 0).Err(); err != nil {
		t.Fatal(err)
	}
	f.tickUntilHealed(w, "a marker of another kind")
	if v := value(t, reg, "seckill_heal_detections_total", "reason", metrics.HealMarker); v != 1 {
		t.Fatalf("marker detections %v, want 1", v)
	}
	for range 3 {
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, err := rdb.Get(ctx, MarkerKey(prefix)).Int64()
	if rec := f.record(); err != nil || got < rec.Generation || rec.Losses != 1 {
		t.Fatalf("marker %d (%v), record %+v: want a counter at least the record's, one loss", got, err, rec)
	}
}
