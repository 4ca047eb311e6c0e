package redisloss

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/service/reconcile"
)

// privateRedis is a redis-server of the test's own, on a free loopback
// port with its own directory (AOF on, as the shared one), so the test can
// kill and restart it without disturbing anyone.
type privateRedis struct {
	t    *testing.T
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startPrivateRedis(t *testing.T) *privateRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	r := &privateRedis{t: t, addr: addr, dir: t.TempDir()}
	r.start()
	t.Cleanup(r.kill)
	return r
}

func (r *privateRedis) start() {
	r.t.Helper()
	_, port, _ := net.SplitHostPort(r.addr)
	r.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", port, "--dir", r.dir,
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no")
	var out bytes.Buffer
	r.cmd.Stdout, r.cmd.Stderr = &out, &out
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.done = make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	c := redis.NewClient(&redis.Options{Addr: r.addr})
	defer c.Close()
	defer func() {
		if r.t.Failed() {
			r.t.Logf("private redis-server on %s:\n%s", r.addr, out.String())
		}
	}()
	waittest.UntilEvery(r.t, 10*time.Second, 20*time.Millisecond, "private redis-server on "+r.addr+" answers", func() bool {
		return c.Ping(context.Background()).Err() == nil
	})
}

// kill is kill -9: what Redis had written to its AOF survives.
func (r *privateRedis) kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// restart kills the server and starts it again, from its files as they
// are, or with them deleted first (lose) : Redis comes back empty.
func (r *privateRedis) restart(lose bool) {
	r.t.Helper()
	r.kill()
	if lose {
		if err := os.RemoveAll(filepath.Join(r.dir, "appendonlydir")); err != nil {
			r.t.Fatal(err)
		}
	}
	r.start()
}

// value reads one series of the registry (labels as name=value pairs).
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
				}
				if !found {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

// A restart of Redis that lost its data is detected by the run_id, and the
// reconciler's repair puts the item's stock and its buyers' quota keys
// back from MySQL; the items come from MySQL's activities (Redis's list of
// warmed items went with the data). A FLUSHALL without a restart is
// detected by the generation marker. A restart that lost nothing is
// detected too and costs one pass that finds everything in order.
func TestWatchRepairsAfterRedisLostData(t *testing.T) {
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := stockredis.NewClient(stockredis.Config{Addrs: []string{srv.addr}})
	t.Cleanup(func() { rdb.Close() })
	const prefix = "hw"
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
	// One buyer's order, all the way through.
	gen := order.NewNumberGenerator()
	r := reservation.Reservation{OrderNo: gen.Next(it.ID), UserID: "7", ItemID: it.ID, ActivityID: act.ID, Quantity: 1,
		IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: 2 * time.Hour}
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
	reg := prometheus.NewRegistry()
	w := &Watch{Redis: rdb, Marker: MarkerKey(prefix), Record: db.RedisWatches, Every: 20 * time.Millisecond, Log: log,
		Metrics: metrics.NewHeal(reg),
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

	// Nothing lost: the first ticks only record what they see.
	for range 3 {
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(calls()) != 0 || w.Incident() {
		t.Fatalf("repair ran %d times with nothing lost", len(calls()))
	}

	// tickUntilHealed ticks (Redis may refuse a moment) until the incident
	// is closed, and returns how long that took.
	tickUntilHealed := func(what string) time.Duration {
		t.Helper()
		start := time.Now()
		var err error
		defer func() {
			if t.Failed() {
				t.Logf("%s: last tick error %v, passes %v", what, err, calls())
			}
		}()
		waittest.UntilEvery(t, 30*time.Second, w.Every, what+": repaired", func() bool {
			err = w.Tick(ctx)
			return err == nil && !w.Incident() && len(calls()) > 0
		})
		return time.Since(start)
	}
	k := store.Keys(reservation.One(it.ID))
	check := func(what string) {
		t.Helper()
		snap, err := store.Stock.Stock(ctx, reservation.One(it.ID))
		if err != nil || !snap.Warmed || snap.Stock != 9 {
			t.Fatalf("%s: Redis stock %+v (%v), want 9 (MySQL's)", what, snap, err)
		}
		if got := rdb.Get(ctx, k.Quota(act.ID, "7")).Val(); got != r.OrderNo {
			t.Fatalf("%s: quota key of the buyer holds %q, want %s", what, got, r.OrderNo)
		}
	}

	// 1. Redis restarts empty: detected by its run_id, repaired.
	srv.restart(true)
	if rdb.Exists(ctx, k.Stock(), k.Quota(act.ID, "7")).Val() != 0 {
		t.Fatal("the restarted Redis still has the item's keys")
	}
	took := tickUntilHealed("restart with the data lost")
	t.Logf("restart with the data lost: repaired %v after Redis answered again", took)
	check("after the restart")
	if p := calls(); len(p) < 2 || !p[0] || p[len(p)-1] {
		t.Fatalf("passes %v: want a pass that repaired, then one that found everything in order", p)
	}
	if v := value(t, reg, "seckill_heal_detections_total", "reason", metrics.HealRestart); v != 1 {
		t.Fatalf("restart detections %v, want 1", v)
	}
	if v := value(t, reg, "seckill_heal_repair_seconds"); v != 1 {
		t.Fatalf("repair_seconds has %v samples, want 1", v)
	}
	if !strings.Contains(logBuf.String(), `"reason":"restart"`) {
		t.Fatal("no log line with the detection's reason")
	}

	// 2. FLUSHALL, no restart: detected by the generation marker.
	n := len(calls())
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	took = tickUntilHealed("flushall")
	t.Logf("flushall: repaired %v after it", took)
	check("after the flush")
	if len(calls()) <= n {
		t.Fatal("no repair pass after the flush")
	}
	if v := value(t, reg, "seckill_heal_detections_total", "reason", metrics.HealMarker); v != 1 {
		t.Fatalf("marker detections %v, want 1", v)
	}

	// 3. Redis lost an acknowledged write (stock raised by hand, a quota
	// key deleted: what an older AOF holds), then restarts keeping its
	// files: detected, and the repair finds the drift.
	rdb.IncrBy(ctx, k.Stock(), 3)
	rdb.Del(ctx, k.Quota(act.ID, "7"))
	srv.restart(false)
	n = len(calls())
	tickUntilHealed("restart keeping the files")
	check("after the second restart")
	if p := calls()[n:]; len(p) < 2 || !p[0] {
		t.Fatalf("passes %v after the second restart: want a repair", p)
	}

	// 4. A restart that lost nothing: one clean pass, nothing changed.
	srv.restart(false)
	n = len(calls())
	tickUntilHealed("restart that lost nothing")
	check("after the third restart")
	if p := calls()[n:]; len(p) != 1 || p[0] {
		t.Fatalf("passes %v after a restart that lost nothing: want one clean pass", p)
	}
	if v := value(t, reg, "seckill_heal_detections_total", "reason", metrics.HealRestart); v != 3 {
		t.Fatalf("restart detections %v, want 3", v)
	}
}

// A pass that cannot run cleanly (here: a reconciler holds the lock) is
// retried at the next tick until one runs; the incident stays open till
// then.
func TestWatchRetriesUntilAPassRunsCleanly(t *testing.T) {
	ctx := context.Background()
	srv := startPrivateRedis(t)
	rdb := stockredis.NewClient(stockredis.Config{Addrs: []string{srv.addr}})
	t.Cleanup(func() { rdb.Close() })
	db := mysqltest.New(t)
	store := stockredis.New(rdb, "hr")
	locker := lock.New(rdb, lock.Options{Prefix: "hr"})
	repairer := &Repairer{TryLock: tryLock(locker),
		Checker: &reconcile.Checker{Stock: store.Reconciler, DB: reconcile.DB{Reads: db.Reconcile, Restocks: db.Restocks, OrderLookup: db.Orders,
			Items: db.Activities, Pinger: db.DB}, Log: slog.New(slog.DiscardHandler), Warmer: store.Stock}}
	reg := prometheus.NewRegistry()
	w := &Watch{Redis: rdb, Marker: MarkerKey("hr"), Record: db.RedisWatches, Repair: repairer.Repair, Log: slog.New(slog.DiscardHandler),
		Metrics: metrics.NewHeal(reg)}
	if err := w.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	srv.restart(true)
	held, err := locker.TryLock(ctx, reconcile.LockName)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		if !w.Incident() {
			t.Fatal("incident closed while the lock was held by another")
		}
	}
	if v := value(t, reg, "seckill_heal_repair_passes_total", "outcome", metrics.HealPassFailed); v != 3 {
		t.Fatalf("failed passes %v, want 3", v)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Tick(ctx); err != nil || w.Incident() {
		t.Fatalf("after the lock was released: err %v, incident open %v", err, w.Incident())
	}
	if v := value(t, reg, "seckill_heal_repair_passes_total", "outcome", metrics.HealPassClean); v != 1 {
		t.Fatalf("clean passes %v, want 1", v)
	}
	if v := value(t, reg, "seckill_heal_repair_seconds"); v != 1 {
		t.Fatalf("repair_seconds samples %v, want 1", v)
	}
}

// On a Redis Cluster the watch reads the run_id of every master, and a
// master it has not seen before (a promoted replica) is a detection.
func TestWatchReadsEveryClusterMaster(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := redistest.NewCluster(t)
	db := mysqltest.New(t)
	var mu sync.Mutex
	passes := 0
	reg := prometheus.NewRegistry()
	w := &Watch{Redis: rdb, Marker: MarkerKey(prefix), Record: db.RedisWatches, Log: slog.New(slog.DiscardHandler), Metrics: metrics.NewHeal(reg),
		Repair: func(context.Context) (bool, error) { mu.Lock(); defer mu.Unlock(); passes++; return false, nil }}
	ids, err := w.readRunIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(redistest.ClusterAddrs()) {
		t.Fatalf("run ids %v, want one per master of %v", ids, redistest.ClusterAddrs())
	}
	seen := map[string]bool{}
	for addr, id := range ids {
		if len(id) != 40 || seen[id] {
			t.Fatalf("master %s: run_id %q (all: %v)", addr, id, ids)
		}
		seen[id] = true
	}
	for range 2 {
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if passes != 0 {
		t.Fatalf("%d repair passes with nothing lost", passes)
	}
	// A master the record has not seen: as after a failover.
	rec, err := db.RedisWatches.RedisWatch(ctx, w.Marker)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeRunIDs(rec.RunIDs); len(got) != len(ids) {
		t.Fatalf("recorded run ids %q, want the %d masters' %v", rec.RunIDs, len(ids), ids)
	}
	moved := map[string]string{}
	for addr, id := range ids {
		moved[addr] = id
	}
	for addr := range moved {
		moved["127.0.0.1:1"] = moved[addr]
		delete(moved, addr)
		break
	}
	if err := db.RedisWatches.RecordRedisSeen(ctx, w.Marker, rec.RunIDs, encodeRunIDs(moved), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if passes != 1 || w.Incident() {
		t.Fatalf("after a new master: %d passes, incident open %v; want one clean pass", passes, w.Incident())
	}
	if v := value(t, reg, "seckill_heal_detections_total", "reason", metrics.HealNewMaster); v != 1 {
		t.Fatalf("new-master detections %v, want 1", v)
	}
}

// tryLock is locker's TryLock as a Repairer takes it (the consumer's
// wiring does the same).
func tryLock(locker *lock.Locker) func(context.Context, string, time.Duration) (Lock, error) {
	return func(ctx context.Context, name string, ttl time.Duration) (Lock, error) {
		l, err := locker.TryLock(ctx, name, lock.WithTTL(ttl))
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}
