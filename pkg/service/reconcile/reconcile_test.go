package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// fixture is one item with one activity in its own database and key
// prefix, and the steps of the pipeline to put orders anywhere on their
// way.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	db     *mysqltest.DB
	store  *stockredis.Store
	rdb    redis.UniversalClient
	prefix string
	item   int64
	act    activity.Activity
	gen    *order.NumberGenerator
	logBuf *logstest.Buffer
	c      *Checker
	locker *lock.Locker
}

// newFixture creates an item with stock units and an activity that starts
// at start (relative to now) and lasts an hour; the item is warmed when the
// activity has started.
func newFixture(t *testing.T, stock int64, start time.Duration) *fixture {
	t.Helper()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	db := mysqltest.New(t)
	it, err := db.Activities.CreateItem(ctx, "sneaker", stock)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	act, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: now.Add(start), EndsAt: now.Add(start + time.Hour), PerUserLimit: 5})
	if err != nil {
		t.Fatal(err)
	}
	act, _ = db.Activities.Activity(ctx, act.ID)
	store := stockredis.New(rdb, prefix)
	f := &fixture{t: t, ctx: ctx, db: db, store: store, rdb: rdb, prefix: prefix, item: it.ID, act: act,
		gen: order.NewNumberGenerator(), logBuf: &logstest.Buffer{}}
	log := slog.New(slog.NewJSONHandler(f.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.c = &Checker{Stock: store.Reconciler, DB: DB{Reads: db.Reconcile, Restocks: db.Restocks, OrderLookup: db.Orders,
		Items: db.Activities, Pinger: db.DB}, Log: log, Recheck: 20 * time.Millisecond}
	f.locker = lock.New(rdb, lock.Options{Prefix: prefix})
	if start <= 0 {
		f.warm()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", f.logBuf.String())
		}
	})
	return f
}

func (f *fixture) warm() {
	f.t.Helper()
	_, err := f.store.Stock.Warmup(f.ctx, reservation.One(f.item), 2*time.Hour, func(ctx context.Context) (int64, error) { return f.db.Activities.ItemStock(ctx, f.item) })
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) reserve(user int64, qty int) reservation.Reservation {
	f.t.Helper()
	r := reservation.Reservation{OrderNo: f.gen.Next(f.item), UserID: strconv.FormatInt(user, 10), ItemID: f.item, ActivityID: f.act.ID,
		Quantity: qty, IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: 2 * time.Hour}
	if _, err := f.store.Reservations.Reserve(f.ctx, r); err != nil {
		f.t.Fatalf("reserve for user %d: %v", user, err)
	}
	return r
}

// commit claims the reservations and writes their orders to MySQL (the
// consumer up to its commit, before the confirm).
func (f *fixture) commit(rs ...reservation.Reservation) map[string]order.FulfilOutcome {
	f.t.Helper()
	var nos []string
	var reqs []order.FulfilRequest
	for _, r := range rs {
		nos = append(nos, r.OrderNo)
		reqs = append(reqs, order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: r.OrderNo,
			IdempotencyKey: r.IdempotencyKey, UserID: r.UserID, ItemID: r.ItemID, ActivityID: r.ActivityID,
			Quantity: r.Quantity, ReservedAt: r.At}, PayDeadline: time.Now().Add(time.Hour)})
	}
	if _, err := f.store.Reservations.Claim(f.ctx, reservation.One(f.item), nos); err != nil {
		f.t.Fatal(err)
	}
	out, err := mysqltest.Fulfil(f.ctx, f.db.DB, reqs)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// consume is commit then confirm of the created orders, with errors
// returned (for goroutines other than the test's).
func (f *fixture) consume(batch []reservation.Reservation) error {
	var nos []string
	var reqs []order.FulfilRequest
	for _, r := range batch {
		nos = append(nos, r.OrderNo)
		reqs = append(reqs, order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: r.OrderNo,
			IdempotencyKey: r.IdempotencyKey, UserID: r.UserID, ItemID: r.ItemID, ActivityID: r.ActivityID,
			Quantity: r.Quantity, ReservedAt: r.At}, PayDeadline: time.Now().Add(time.Hour)})
	}
	if _, err := f.store.Reservations.Claim(f.ctx, reservation.One(f.item), nos); err != nil {
		return err
	}
	out, err := mysqltest.Fulfil(f.ctx, f.db.DB, reqs)
	if err != nil {
		return err
	}
	var created []string
	for _, no := range nos {
		if out[no].Status == order.Created {
			created = append(created, no)
		}
	}
	_, err = f.store.Reservations.Confirm(f.ctx, reservation.One(f.item), created)
	return err
}

func (f *fixture) confirm(rs ...reservation.Reservation) {
	f.t.Helper()
	var nos []string
	for _, r := range rs {
		nos = append(nos, r.OrderNo)
	}
	if _, err := f.store.Reservations.Confirm(f.ctx, reservation.One(f.item), nos); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) release(r reservation.Reservation, from ...reservation.State) {
	f.t.Helper()
	ref := reservation.Ref{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: r.ItemID, ActivityID: r.ActivityID, IdempotencyKey: r.IdempotencyKey}
	if rel, err := f.store.Reservations.Release(f.ctx, ref, reservation.ReleaseOptions{Reason: "test", From: from}); err != nil || !rel.Released {
		f.t.Fatalf("release %s: %v %s %v", r.OrderNo, rel.Released, rel.State, err)
	}
}

// failInMySQL records the reservation's order as FAILED (MySQL refused it),
// as the consumer's transaction would, without touching stock.
func (f *fixture) failInMySQL(r reservation.Reservation) {
	f.t.Helper()
	err := f.db.Gorm().Exec(`INSERT INTO orders (order_no, user_id, item_id, activity_id, quantity, status, failure_reason,
		idempotency_key, reserved_at, released_at) VALUES (?, ?, ?, ?, ?, 'FAILED', 'OUT_OF_STOCK', 'k', ?, ?)`,
		r.OrderNo, r.UserID, r.ItemID, r.ActivityID, r.Quantity, time.Now().UTC(), time.Now().UTC()).Error
	if err != nil {
		f.t.Fatal(err)
	}
}

// buyThenLoseEverything has users 1..n buy one unit each with reserve, all
// the way to a confirmed order, then deletes every Redis key of the test:
// Redis lost its data.
func (f *fixture) buyThenLoseEverything(n int64, reserve func(user int64) reservation.Reservation) []reservation.Reservation {
	f.t.Helper()
	var bought []reservation.Reservation
	for u := int64(1); u <= n; u++ {
		r := reserve(u)
		f.commit(r)
		f.confirm(r)
		bought = append(bought, r)
	}
	keys, err := f.rdb.Keys(f.ctx, f.prefix+":*").Result()
	if err != nil {
		f.t.Fatal(err)
	}
	f.rdb.Del(f.ctx, keys...)
	return bought
}

func (f *fixture) targets() []Target {
	f.t.Helper()
	ts, err := f.c.Targets(f.ctx, Selection{})
	if err != nil {
		f.t.Fatal(err)
	}
	return ts
}

func (f *fixture) lock() *lock.Lock {
	f.t.Helper()
	l, err := f.locker.TryLock(f.ctx, "reconcile")
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { l.Release(context.Background()) })
	return l
}

// check runs the checker (repairing under a fresh lock for CheckAndRepair)
// and returns the item's line.
func (f *fixture) check(mode Mode) (Report, ItemReport) {
	f.t.Helper()
	var l Lock
	if mode == CheckAndRepair {
		lk := f.lock()
		defer lk.Release(f.ctx)
		l = lk
	}
	rep, err := f.c.Run(f.ctx, f.targets(), mode, l)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(rep.Items) != 1 {
		f.t.Fatalf("%d items in the report, want 1", len(rep.Items))
	}
	return rep, rep.Items[0]
}

func (f *fixture) redisStock() reservation.Snapshot {
	f.t.Helper()
	s, err := f.store.Stock.Stock(f.ctx, reservation.One(f.item))
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func wantItem(t *testing.T, it ItemReport, verdict Verdict, mysql, redis, inFlight, drift int64) {
	t.Helper()
	var r int64 = -1
	if it.RedisStock != nil {
		r = *it.RedisStock
	}
	if it.Verdict != verdict || it.MySQLStock != mysql || r != redis || it.InFlight != inFlight || it.Drift != drift {
		t.Fatalf("item %+v (redis %d)\nwant verdict %q, mysql %d, redis %d, in flight %d, drift %d",
			it, r, verdict, mysql, redis, inFlight, drift)
	}
}

// Orders at every step between the stores: none of them is drift.
func TestReconcileAgreesWhileOrdersAreMidway(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 20, -time.Minute)
	undecided := f.reserve(1, 1)
	committed := f.reserve(2, 2)
	f.commit(committed) // CLAIMED, CREATED in MySQL, not confirmed
	done := f.reserve(3, 1)
	f.commit(done)
	f.confirm(done)
	refused := f.reserve(4, 3)
	f.failInMySQL(refused) // FAILED in MySQL, release not run yet
	closing := f.reserve(5, 1)
	f.commit(closing)
	f.confirm(closing)
	if tr, err := f.db.Orders.CloseOrder(f.ctx, "5", closing.OrderNo, order.ReasonCancelled); err != nil || !tr.Won {
		t.Fatalf("close: %+v %v", tr, err)
	} // CLOSED in MySQL (stock back), Redis release not run yet
	closedEarly := f.reserve(6, 2)
	f.commit(closedEarly)
	if _, err := f.db.Orders.CloseOrder(f.ctx, "6", closedEarly.OrderNo, order.ReasonCancelled); err != nil {
		t.Fatal(err)
	} // closed while still CLAIMED

	// Redis: 20-1-2-1-3-1-2 = 10 left; counter 1+2+3+2 = 8.
	// MySQL: 20-2-1 (live) = 17.
	rep, it := f.check(CheckOnly)
	wantItem(t, it, OK, 17, 10, 7, 0)
	wantDetail := InFlightDetail{Inflight: 8, Undecided: 1, Committed: 2, Releasing: 5, Closing: 1, Pending: 4}
	if it.Detail != wantDetail || it.Reads != 1 || rep.ExitCode() != 0 {
		t.Fatalf("detail %+v reads %d exit %d, want %+v, 1 read, exit 0", it.Detail, it.Reads, rep.ExitCode(), wantDetail)
	}
	if q := it.Activities[0]; !q.QuotaChecked || q.LiveOrders != 2 || len(q.QuotaMissing)+len(q.QuotaStale) != 0 {
		t.Fatalf("quota %+v", q)
	}

	// Every order finishes its way: still no drift.
	f.confirm(committed)
	f.release(refused, reservation.StateReserved)
	f.release(closing, reservation.StateConfirmed)
	if err := f.db.Orders.MarkReleased(f.ctx, closing.OrderNo); err != nil {
		t.Fatal(err)
	}
	f.release(closedEarly, reservation.StateClaimed)
	_, it = f.check(CheckOnly)
	wantItem(t, it, OK, 17, 16, 1, 0)
	_ = undecided
}

func TestReconcileStockDriftIsReportedAndRepaired(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30, -time.Minute)
	first := f.reserve(1, 2)
	f.commit(first)
	f.confirm(first)
	inFlight := f.reserve(2, 1)
	k := f.store.Keys(reservation.One(f.item))

	cases := []struct {
		name   string
		inject func()
		mysql  int64
		redis  int64
		drift  int64
	}{
		{"Redis raised by hand", func() { f.rdb.IncrBy(f.ctx, k.Stock(), 5) }, 28, 32, 5},
		{"Redis lowered by hand", func() { f.rdb.Set(f.ctx, k.Stock(), 20, redis.KeepTTL) }, 28, 20, -7},
		{"MySQL restocked by hand", func() { f.db.Activities.SetItemStock(f.ctx, f.item, 40) }, 40, 27, -12},
		{"MySQL lowered by hand", func() { f.db.Activities.SetItemStock(f.ctx, f.item, 10) }, 10, 39, 30},
	}
	for _, c := range cases {
		c.inject()
		rep, it := f.check(CheckOnly)
		wantItem(t, it, Drift, c.mysql, c.redis, 1, c.drift)
		if it.Reads != 2 || rep.ExitCode() != 1 {
			t.Fatalf("%s: %d reads, exit %d; want 2 reads, exit 1", c.name, it.Reads, rep.ExitCode())
		}
		if snap := f.redisStock(); snap.Stock != c.redis {
			t.Fatalf("%s: a check without --repair changed Redis to %d", c.name, snap.Stock)
		}

		rep, it = f.check(CheckAndRepair)
		want := c.mysql - 1
		wantItem(t, it, Repaired, c.mysql, c.redis, 1, c.drift)
		if rep.ExitCode() != 0 || len(it.Repairs) != 1 {
			t.Fatalf("%s: exit %d, repairs %v", c.name, rep.ExitCode(), it.Repairs)
		}
		if snap := f.redisStock(); snap.Stock != want || snap.Inflight != 1 {
			t.Fatalf("%s: after repair Redis %+v, want stock %d with 1 in flight", c.name, snap, want)
		}
		if fence, _ := f.rdb.Get(f.ctx, k.Fence()).Int64(); fence != rep.Fence || fence == 0 {
			t.Fatalf("%s: fence key %d, want the lock's %d", c.name, fence, rep.Fence)
		}
		_, it = f.check(CheckOnly)
		wantItem(t, it, OK, c.mysql, want, 1, 0)
	}
	// The in-flight order still completes against the repaired stock.
	f.commit(inFlight)
	f.confirm(inFlight)
	_, it := f.check(CheckOnly)
	wantItem(t, it, OK, 9, 9, 0, 0)

	logged := f.logBuf.String()
	if n := strings.Count(logged, `"level":"ERROR+4"`); n != 2*len(cases) {
		t.Fatalf("%d alert lines, want one per drifted check (%d):\n%s", n, 2*len(cases), logged)
	}
}

// progressHook calls fn after each item read of the given pass.
type progressHook struct {
	pass int
	fn   func(pass int)
}

func (p *progressHook) Start(string, int) { p.pass++ }
func (p *progressHook) Step()             { p.fn(p.pass) }
func (p *progressHook) Done()             {}

func TestReconcileTransientMismatchIsNotDrift(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	k := f.store.Keys(reservation.One(f.item))
	f.rdb.IncrBy(f.ctx, k.Stock(), 2)
	// Gone by the second read.
	f.c.Progress = &progressHook{fn: func(pass int) {
		if pass == 1 {
			f.rdb.DecrBy(f.ctx, k.Stock(), 2)
		}
	}}
	rep, it := f.check(CheckAndRepair)
	wantItem(t, it, OK, 10, 10, 0, 0)
	if it.Reads != 2 || rep.ExitCode() != 0 || len(it.Repairs) != 0 {
		t.Fatalf("reads %d exit %d repairs %v", it.Reads, rep.ExitCode(), it.Repairs)
	}
}

// The two moves the order of reads cannot place happen right between the
// Redis and the MySQL read: an order reserved and committed, and an order
// closed in MySQL whose Redis release comes later. The read notices and
// reads again at once; no mismatch is seen at all.
func TestReconcileOrdersMovingDuringTheReadAreReadAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	toClose := f.reserve(1, 1)
	f.commit(toClose)
	f.confirm(toClose)
	var moved []reservation.Reservation
	f.c.afterView = func(int64) {
		if moved != nil {
			return
		}
		fast := f.reserve(2, 2)
		f.commit(fast) // not confirmed yet: neither pending then nor confirmed
		if tr, err := f.db.Orders.CloseOrder(f.ctx, "1", toClose.OrderNo, order.ReasonCancelled); err != nil || !tr.Won {
			t.Fatalf("close: %+v %v", tr, err)
		}
		moved = append(moved, fast)
	}
	rep, it := f.check(CheckOnly)
	// Redis 10-1-2 = 7; in flight: counter 2 - committed 2 + closing 1;
	// MySQL 10-1-2+1 = 8. (Read without the retry: Redis 9, MySQL 8.)
	wantItem(t, it, OK, 8, 7, 1, 0)
	if it.Reads != 1 || rep.ExitCode() != 0 || !strings.Contains(f.logBuf.String(), "orders moved during the read") {
		t.Fatalf("reads %d, exit %d; want one read, retried at once", it.Reads, rep.ExitCode())
	}
	if it.Detail.Committed != 2 || it.Detail.Closing != 1 {
		t.Fatalf("detail %+v, want 2 committed and 1 closing", it.Detail)
	}
}

func TestReconcileChangingMismatchIsUnsettledAndNotRepaired(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	k := f.store.Keys(reservation.One(f.item))
	f.c.Progress = &progressHook{fn: func(int) { f.rdb.IncrBy(f.ctx, k.Stock(), 1) }}
	f.rdb.IncrBy(f.ctx, k.Stock(), 1)
	rep, it := f.check(CheckAndRepair)
	if it.Verdict != Unsettled || it.Reads != MaxReads || rep.ExitCode() != 1 || len(it.Repairs) != 0 {
		t.Fatalf("item %+v, exit %d; want unsettled after %d reads, exit 1, no repair", it, rep.ExitCode(), MaxReads)
	}
}

func TestReconcileRepairRechecksWhenStockChangesConcurrently(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	k := f.store.Keys(reservation.One(f.item))
	f.rdb.IncrBy(f.ctx, k.Stock(), 4)
	// A buyer reserves between the check and the first write.
	var writes int
	f.c.beforeWrite = func(int64) {
		writes++
		if writes == 1 {
			f.reserve(1, 1)
		}
	}
	_, it := f.check(CheckAndRepair)
	if it.Verdict != Repaired || writes != 2 {
		t.Fatalf("item %+v after %d write attempts; want repaired on the second", it, writes)
	}
	if snap := f.redisStock(); snap.Stock != 9 || snap.Inflight != 1 {
		t.Fatalf("Redis %+v, want stock 9 (10 - 1 in flight)", snap)
	}

	// Buyers keep reserving: it gives up and says so.
	f.rdb.IncrBy(f.ctx, k.Stock(), 4)
	user := int64(10)
	f.c.beforeWrite = func(int64) { user++; f.reserve(user, 1) }
	rep, it := f.check(CheckAndRepair)
	if it.Verdict != Retry || rep.ExitCode() != 1 || !strings.Contains(strings.Join(it.Repairs, ";"), "changed concurrently, retry") {
		t.Fatalf("item %+v exit %d, want retry", it, rep.ExitCode())
	}
	if snap := f.redisStock(); snap.Stock != 13-2 {
		t.Fatalf("Redis stock %d, want 11: only the two reservations changed it", snap.Stock)
	}
}

func TestReconcileRepairRefusesAnOlderFence(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	k := f.store.Keys(reservation.One(f.item))
	f.rdb.Set(f.ctx, k.Fence(), 1_000_000, time.Hour) // a later reconciler wrote here
	f.rdb.IncrBy(f.ctx, k.Stock(), 3)
	_, it := f.check(CheckAndRepair)
	if it.Verdict != Retry || f.redisStock().Stock != 13 {
		t.Fatalf("item %+v, Redis stock %d; want retry and no change", it, f.redisStock().Stock)
	}
	if !strings.Contains(strings.Join(it.Repairs, ";"), "larger fencing token") {
		t.Fatalf("repairs %v", it.Repairs)
	}
}

type lostLock struct{}

func (lostLock) Fence() int64 { return 7 }
func (lostLock) Lost() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

func TestReconcileRepairStopsWhenTheLockIsLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	f.rdb.IncrBy(f.ctx, f.store.Keys(reservation.One(f.item)).Stock(), 3)
	_, err := f.c.Run(f.ctx, f.targets(), CheckAndRepair, lostLock{})
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("err = %v, want ErrLockLost", err)
	}
	if s := f.redisStock().Stock; s != 13 {
		t.Fatalf("Redis stock %d, want 13 untouched", s)
	}
}

func TestReconcileQuotaMissingAndStaleAreRepaired(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 20, -time.Minute)
	k := f.store.Keys(reservation.One(f.item))
	lost := f.reserve(1, 1) // live order, its quota key lost
	f.commit(lost)
	f.confirm(lost)
	f.rdb.Del(f.ctx, k.Quota(f.act.ID, "1"))
	wrong := f.reserve(2, 1) // live order, key holds an order that is gone
	f.commit(wrong)
	f.confirm(wrong)
	ghost := f.gen.Next(f.item)
	f.rdb.Set(f.ctx, k.Quota(f.act.ID, "2"), ghost, time.Hour)
	f.rdb.Set(f.ctx, k.Quota(f.act.ID, "3"), ghost, time.Hour) // no order at all: stale
	onWay := f.reserve(4, 1)                                   // in flight: its key is fine
	failed := f.reserve(5, 1)                                  // FAILED in MySQL, release pending: fine
	f.failInMySQL(failed)

	rep, it := f.check(CheckOnly)
	q := it.Activities[0]
	wantMissing := []QuotaIssue{{UserID: "1", OrderNo: lost.OrderNo}, {UserID: "2", OrderNo: wrong.OrderNo, Holder: ghost}}
	wantStale := []QuotaIssue{{UserID: "3", Holder: ghost}}
	if it.Verdict != Drift || rep.ExitCode() != 1 || q.LiveOrders != 2 ||
		!equalIssues(q.QuotaMissing, wantMissing) || !equalIssues(q.QuotaStale, wantStale) {
		t.Fatalf("item %+v\nquota %+v\nwant missing %+v stale %+v", it, q, wantMissing, wantStale)
	}
	if it.Drift != 0 {
		t.Fatalf("stock drift %d, want 0", it.Drift)
	}

	_, it = f.check(CheckAndRepair)
	if it.Verdict != Repaired || len(it.Repairs) != 3 {
		t.Fatalf("repair: %+v", it)
	}
	for u, want := range map[int64]string{1: lost.OrderNo, 2: wrong.OrderNo, 4: onWay.OrderNo, 5: failed.OrderNo} {
		if got := f.rdb.Get(f.ctx, k.Quota(f.act.ID, strconv.FormatInt(u, 10))).Val(); got != want {
			t.Fatalf("quota of user %d = %q, want %q", u, got, want)
		}
	}
	if ttl := f.rdb.PTTL(f.ctx, k.Quota(f.act.ID, "1")).Val(); ttl < time.Hour || ttl > 26*time.Hour {
		t.Fatalf("restored quota TTL %v, want the activity's end + 24h", ttl)
	}
	if f.rdb.Exists(f.ctx, k.Quota(f.act.ID, "3")).Val() != 0 {
		t.Fatal("stale quota key kept")
	}
	_, it = f.check(CheckOnly)
	if it.Verdict != OK {
		t.Fatalf("after repair: %+v", it)
	}
	// The restored quota holds: user 1 cannot buy again; user 3 can.
	r := reservation.Reservation{OrderNo: f.gen.Next(f.item), UserID: "1", ItemID: f.item, ActivityID: f.act.ID,
		Quantity: 1, IdempotencyKey: "again", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour}
	if _, err := f.store.Reservations.Reserve(f.ctx, r); !errors.Is(err, order.ErrAlreadyPurchased) {
		t.Fatalf("user 1 buying again: %v, want ErrAlreadyPurchased", err)
	}
	f.reserve(3, 1)
}

func equalIssues(a, b []QuotaIssue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Redis lost every key: the item is reported not warmed with every quota
// missing, and the repair brings back stock and quotas.
func TestReconcileRedisLostEverything(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	bought := f.buyThenLoseEverything(4, func(u int64) reservation.Reservation { return f.reserve(u, 1) })

	rep, it := f.check(CheckOnly)
	wantItem(t, it, NotWarmed, 6, -1, 0, -6)
	if rep.ExitCode() != 1 || len(it.Activities[0].QuotaMissing) != 4 {
		t.Fatalf("exit %d, quota %+v", rep.ExitCode(), it.Activities[0])
	}

	_, it = f.check(CheckAndRepair)
	if it.Verdict != Repaired || len(it.Repairs) != 4 || it.IdemRestored != 4 || it.ReservationsRestored != 4 {
		t.Fatalf("repair: %+v", it)
	}
	// Reservations (before the reads), idempotency records and quotas were
	// restored before the stock.
	if !strings.HasPrefix(it.Repairs[0], "4 reservations") || !strings.HasPrefix(it.Repairs[1], "4 idempotency records") ||
		!strings.HasPrefix(it.Repairs[2], "4 quota keys") || !strings.HasPrefix(it.Repairs[3], "stock set from missing to 6") {
		t.Fatalf("repairs in this order: %q", it.Repairs)
	}
	snap := f.redisStock()
	if !snap.Warmed || snap.Stock != 6 {
		t.Fatalf("Redis %+v, want stock 6", snap)
	}
	ttl := f.rdb.PTTL(f.ctx, f.store.Keys(reservation.One(f.item)).Stock()).Val()
	wantTTL := time.Until(f.act.EndsAt.Add(activity.DefaultPaymentWindow + order.KeyMargin))
	if ttl < wantTTL-time.Minute || ttl > wantTTL+time.Minute {
		t.Fatalf("stock TTL %v, want about %v", ttl, wantTTL)
	}
	if items, _ := f.store.Stock.WarmedItems(f.ctx); len(items) != 1 || items[0] != reservation.One(f.item) {
		t.Fatalf("warmed items %v", items)
	}
	_, it = f.check(CheckOnly)
	wantItem(t, it, OK, 6, 6, 0, 0)
	// A buyer from before cannot buy again; a new one can.
	for _, b := range bought {
		r := b
		r.OrderNo, r.IdempotencyKey = f.gen.Next(f.item), "new-key"
		if _, err := f.store.Reservations.Reserve(f.ctx, r); !errors.Is(err, order.ErrAlreadyPurchased) {
			t.Fatalf("user %s buying again: %v", b.UserID, err)
		}
	}
	f.reserve(99, 1)
}

func TestReconcileNotStartedIsNotDrift(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, time.Hour)
	rep, it := f.check(CheckAndRepair)
	wantItem(t, it, NotStarted, 10, -1, 0, -10)
	if rep.ExitCode() != 0 || len(it.Repairs) != 0 || it.Reads != 1 {
		t.Fatalf("exit %d, %+v", rep.ExitCode(), it)
	}
	if f.redisStock().Warmed {
		t.Fatal("repair warmed an item whose sale has not started")
	}
}

func TestReconcileTargets(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	ctx := f.ctx
	other, _ := f.db.Activities.CreateItem(ctx, "other", 5)
	old, _ := f.db.Activities.CreateActivity(ctx, activity.Activity{ItemID: other.ID, StartsAt: time.Now().Add(-72 * time.Hour),
		EndsAt: time.Now().Add(-48 * time.Hour), PerUserLimit: 1})
	bare, _ := f.db.Activities.CreateItem(ctx, "no activity", 1)

	cases := []struct {
		name  string
		sel   Selection
		items []int64
	}{
		{"live activities only", Selection{}, []int64{f.item}},
		{"an ended activity by id", Selection{Activities: []int64{old.ID}}, []int64{other.ID}},
		{"items by id", Selection{Items: []int64{other.ID, bare.ID}}, []int64{other.ID, bare.ID}},
	}
	for _, c := range cases {
		ts, err := f.c.Targets(ctx, c.sel)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []int64
		for _, tg := range ts {
			got = append(got, tg.ItemID)
		}
		if len(got) != len(c.items) || got[0] != c.items[0] || got[len(got)-1] != c.items[len(c.items)-1] {
			t.Fatalf("%s: items %v, want %v", c.name, got, c.items)
		}
	}
	if _, err := f.c.Targets(ctx, Selection{Activities: []int64{9999}}); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("unknown activity: %v", err)
	}
	// The ended activity's quota is not checked (its keys expired by
	// design), its stock is.
	ts, _ := f.c.Targets(ctx, Selection{Activities: []int64{old.ID}})
	rep, err := f.c.Run(ctx, ts, CheckOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	if it := rep.Items[0]; it.Verdict != NotWarmed || it.Activities[0].QuotaChecked {
		t.Fatalf("ended activity: %+v", it)
	}
}

// Checks run while buyers reserve and the consumer commits and confirms
// never report drift.
func TestReconcileNoFalseDriftUnderConcurrentOrders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 400, -time.Minute)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	var wg sync.WaitGroup
	reserved := make(chan reservation.Reservation, 1000)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := int64(w*1000 + 1); u <= int64(w*1000+100) && ctx.Err() == nil; u++ {
				r := reservation.Reservation{OrderNo: f.gen.Next(f.item), UserID: strconv.FormatInt(u, 10), ItemID: f.item, ActivityID: f.act.ID,
					Quantity: 1, IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour}
				if _, err := f.store.Reservations.Reserve(ctx, r); err == nil {
					reserved <- r
				}
			}
		}()
	}
	consumed := make(chan struct{})
	go func() { // the consumer: batches of what arrived, commit then confirm
		defer close(consumed)
		for r := range reserved {
			batch := []reservation.Reservation{r}
		more:
			for len(batch) < 20 {
				select {
				case r, ok := <-reserved:
					if !ok {
						break more
					}
					batch = append(batch, r)
				default:
					break more
				}
			}
			if err := f.consume(batch); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() { wg.Wait(); close(reserved) }()

	checks := 0
	for {
		select {
		case <-consumed:
		default:
			rep, err := f.c.Run(f.ctx, f.targets(), CheckOnly, nil)
			if err != nil {
				t.Fatal(err)
			}
			if it := rep.Items[0]; it.Verdict != OK {
				t.Fatalf("check %d while orders flow: %+v", checks, it)
			}
			checks++
			continue
		}
		break
	}
	_, it := f.check(CheckOnly)
	wantItem(t, it, OK, 0, 0, 0, 0)
	t.Logf("%d checks while orders flowed; %d needed a second read", checks,
		strings.Count(f.logBuf.String(), "reading again after a pause"))
}

// Redis came back from an older state: a buyer's quota key and CONFIRMED
// reservation are back although MySQL has since closed the order (and
// recorded its release), and another buyer's key holds an order MySQL
// failed whose reservation is gone. Both keys are stale and removed, the
// closed order's unit goes back to Redis stock, and both buyers can buy
// again.
func TestReconcileStaleQuotaAfterRestoreIsRemoved(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	k := f.store.Keys(reservation.One(f.item))
	closed := f.reserve(1, 1)
	f.commit(closed)
	f.confirm(closed)
	// What happened after the older state was taken: the order closed in
	// MySQL, its unit back, its release recorded.
	g := f.db.Gorm()
	if err := g.Exec("UPDATE orders SET status = 'CLOSED', released_at = ? WHERE order_no = ?", time.Now().UTC(), closed.OrderNo).Error; err != nil {
		t.Fatal(err)
	}
	if err := g.Exec("UPDATE item_stock SET stock = stock + 1 WHERE item_id = ?", f.item).Error; err != nil {
		t.Fatal(err)
	}
	failed := f.reserve(2, 1)
	f.failInMySQL(failed)
	f.release(failed, reservation.StateReserved)
	f.rdb.Set(f.ctx, k.Quota(f.act.ID, "2"), failed.OrderNo, time.Hour) // the restored key
	f.rdb.Del(f.ctx, k.Reservation(failed.OrderNo))

	rep, it := f.check(CheckOnly)
	want := []QuotaIssue{{UserID: "1", Holder: closed.OrderNo}, {UserID: "2", Holder: failed.OrderNo}}
	if q := it.Activities[0]; it.Verdict != Drift || rep.ExitCode() != 1 || !equalIssues(q.QuotaStale, want) || it.Drift != -1 {
		t.Fatalf("item %+v\nquota %+v\nwant stale %+v and drift -1", it, q, want)
	}
	_, it = f.check(CheckAndRepair)
	if it.Verdict != Repaired {
		t.Fatalf("repair: %+v", it)
	}
	for _, u := range []int64{1, 2} {
		if f.rdb.Exists(f.ctx, k.Quota(f.act.ID, strconv.FormatInt(u, 10))).Val() != 0 {
			t.Fatalf("stale quota key of user %d kept (repairs %q)", u, it.Repairs)
		}
	}
	_, it = f.check(CheckOnly)
	wantItem(t, it, OK, 10, 10, 0, 0)
	f.reserve(1, 1)
	f.reserve(2, 1)
}
