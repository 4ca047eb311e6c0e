package reconcile

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// lifecycle is the buyer's cancel and the closer, on the fixture's stores.
func (f *fixture) lifecycle() *lifecycle.Service {
	return &lifecycle.Service{Tx: f.db, Events: f.db.Outbox, DB: f.db.Orders, Payments: f.db.Payments, Stock: f.store.Reservations, Log: f.c.Log}
}

// cancel closes the order as its buyer's cancel does (MySQL, then the
// Redis release).
func (f *fixture) cancel(r reservation.Reservation) {
	f.t.Helper()
	if o, err := f.lifecycle().Cancel(f.ctx, r.UserID, r.OrderNo); err != nil || o.Status != order.Closed {
		f.t.Fatalf("cancel %s: %+v %v", r.OrderNo, o, err)
	}
}

// timeOut lets the order's payment window pass and runs the closer.
func (f *fixture) timeOut(r reservation.Reservation) {
	f.t.Helper()
	if err := f.db.Gorm().Exec("UPDATE orders SET pay_deadline = ? WHERE order_no = ?",
		time.Now().Add(-time.Second).UTC(), r.OrderNo).Error; err != nil {
		f.t.Fatal(err)
	}
	st, err := f.lifecycle().CloseExpired(f.ctx, time.Now(), 100, nil)
	if err != nil || st.Closed != 1 {
		f.t.Fatalf("closer: %+v %v, want 1 closed", st, err)
	}
}

// wantAgree checks that Redis stock plus what is in flight equals MySQL
// stock, by the stores' own counters and by the reconciler's check.
func (f *fixture) wantAgree(mysql int64) {
	f.t.Helper()
	db, err := f.db.Activities.ItemStock(f.ctx, f.item)
	if err != nil {
		f.t.Fatal(err)
	}
	s := f.redisStock()
	if db != mysql || !s.Warmed || s.Stock+s.Inflight != db {
		f.t.Fatalf("Redis %+v, MySQL %d; want Redis stock + in flight = MySQL = %d", s, db, mysql)
	}
	if rep, it := f.check(CheckOnly); it.Verdict != OK || it.Drift != 0 || rep.ExitCode() != 0 {
		f.t.Fatalf("check: %+v; want OK", it)
	}
}

// Redis came back without the reservation hashes of CREATED orders. An
// order closed before the repair finds no hash (MySQL's figure, which the
// repair loads, has its unit); the repair gives the other CREATED orders
// their hashes back, CONFIRMED, so a cancel and the closer's timeout after
// it credit Redis once each, and Redis and MySQL still agree. The PAID
// order gets none (it never gives units back). Before the restore, the
// releases after the repair found no hash and credited nothing: Redis
// stayed two units below MySQL.
func TestRepairRestoresLostReservationsSoLaterClosesCredit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	bought := f.buyThenLoseEverything(5, func(u int64) reservation.Reservation { return f.reserve(u, 1) })
	if tr, err := f.db.Orders.Pay(f.ctx, "4", bought[3].OrderNo); err != nil || !tr.Won {
		t.Fatalf("pay: %+v %v", tr, err)
	}
	f.cancel(bought[4]) // before the repair: its release finds no hash

	rep, it := f.check(CheckAndRepair)
	if it.Verdict != Repaired || rep.ExitCode() != 0 {
		t.Fatalf("repair: %+v", it)
	}
	f.wantAgree(6)
	f.cancel(bought[0])
	f.timeOut(bought[1])
	f.wantAgree(8)
	// A second close of the same order credits nothing more.
	f.cancel(bought[0])
	f.wantAgree(8)

	if it.ReservationsRestored != 3 {
		t.Fatalf("repair: %+v; want 3 reservations restored", it)
	}
	k := f.store.Keys(reservation.One(f.item))
	wantTTL := time.Until(f.act.KeysLiveUntil(activity.DefaultPaymentWindow))
	for _, b := range bought[2:3] {
		h := f.rdb.HGetAll(f.ctx, k.Reservation(b.OrderNo)).Val()
		if reservation.State(h["state"]) != reservation.StateConfirmed || h["qty"] != "1" || h["user"] != b.UserID ||
			h["activity"] != strconv.FormatInt(f.act.ID, 10) || h["key"] != b.IdempotencyKey || h["bucket"] != "" {
			t.Fatalf("restored reservation of user %s: %v", b.UserID, h)
		}
		if ttl := f.rdb.PTTL(f.ctx, k.Reservation(b.OrderNo)).Val(); ttl < wantTTL-time.Minute || ttl > wantTTL+time.Minute {
			t.Fatalf("restored reservation lives %v, want about %v", ttl, wantTTL)
		}
	}
	if n := f.rdb.Exists(f.ctx, k.Reservation(bought[3].OrderNo), k.Reservation(bought[4].OrderNo)).Val(); n != 0 {
		t.Fatalf("%d reservations restored for the PAID and the CLOSED order", n)
	}
	// Nothing left to restore: the next pass writes nothing.
	if _, it := f.check(CheckAndRepair); it.Verdict != OK || it.ReservationsRestored != 0 || len(it.Repairs) != 0 {
		t.Fatalf("second repair: %+v", it)
	}
}

// The same for a bucketed item that lost everything, its buckets and take
// markers with it: the restored reservation names the order's home bucket
// and that bucket gets its take marker back, so the release after a cancel
// gives the unit back to the bucket.
func TestRepairRestoresLostReservationsOfABucketedItem(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30, time.Hour)
	f.c.Warmer = f.store.Stock
	const buckets = 3
	if err := f.db.Gorm().Exec("UPDATE activities SET stock_buckets = ?, starts_at = ? WHERE id = ?",
		buckets, time.Now().Add(-time.Minute).UTC(), f.act.ID).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Stock.WarmupBuckets(f.ctx, reservation.One(f.item), buckets, 2*time.Hour, func(ctx context.Context) (int64, error) { return f.db.Activities.ItemStock(ctx, f.item) }); err != nil {
		t.Fatal(err)
	}
	bought := f.buyThenLoseEverything(4, func(u int64) reservation.Reservation {
		r := reservation.Reservation{OrderNo: f.gen.Next(f.item), UserID: strconv.FormatInt(u, 10), ItemID: f.item, ActivityID: f.act.ID,
			Quantity: 1, IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: 2 * time.Hour, Buckets: buckets}
		if _, err := f.store.Reservations.Reserve(f.ctx, r); err != nil {
			t.Fatalf("reserve for user %d: %v", u, err)
		}
		return r
	})

	rep, it := f.check(CheckAndRepair)
	if it.Verdict != Repaired || rep.ExitCode() != 0 {
		t.Fatalf("repair: %+v", it)
	}
	f.wantAgree(26)
	k := f.store.Keys(reservation.One(f.item))
	if n, _ := f.rdb.Get(f.ctx, k.BucketMarker()).Int(); n != buckets {
		t.Fatalf("bucket marker %d, want %d", n, buckets)
	}
	f.cancel(bought[0])
	f.timeOut(bought[1])
	f.wantAgree(28)
	f.cancel(bought[0])
	f.wantAgree(28)

	if it.ReservationsRestored != 4 {
		t.Fatalf("repair: %+v; want 4 reservations restored", it)
	}
	for _, b := range bought[2:] {
		if st := f.rdb.HGet(f.ctx, k.Reservation(b.OrderNo), "state").Val(); reservation.State(st) != reservation.StateConfirmed {
			t.Fatalf("reservation of user %s is %q, want CONFIRMED", b.UserID, st)
		}
		if bk := f.rdb.HGet(f.ctx, k.Reservation(b.OrderNo), "bucket").Val(); bk == "" {
			t.Fatalf("restored reservation of user %s names no bucket", b.UserID)
		}
	}
}

// A close races the repair: MySQL closes the order after the repair read
// it as CREATED, and its release runs, finding no hash, before the repair
// writes the hash back; the lifecycle records the release only after the
// repair read the item (a slow MySQL). The restored hash would stand for
// units on their way back that no release brings (Redis one unit short for
// good): the repair takes it back before it reads, and its read then counts
// the unit where MySQL has it.
func TestRepairTakesBackAReservationClosedMeanwhile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	bought := f.buyThenLoseEverything(3, func(u int64) reservation.Reservation { return f.reserve(u, 1) })
	racer := bought[0]
	closed := false
	f.c.beforeWrite = func(int64) {
		if closed {
			return
		}
		closed = true // before the first write: the reservations' restore
		if tr, err := f.db.Orders.CloseOrder(f.ctx, racer.UserID, racer.OrderNo, order.ReasonCancelled); err != nil || !tr.Won {
			t.Errorf("close: %+v %v", tr, err)
		}
		ref := reservation.Ref{OrderNo: racer.OrderNo, UserID: racer.UserID, ItemID: racer.ItemID, ActivityID: racer.ActivityID,
			IdempotencyKey: racer.IdempotencyKey}
		if rel, err := f.store.Reservations.Release(f.ctx, ref, reservation.ReleaseOptions{Reason: order.ReasonCancelled, From: []reservation.State{reservation.StateConfirmed}}); err != nil || rel.Released || rel.State != reservation.StateMissing {
			t.Errorf("release before the restore: %v %s %v, want MISSING", rel.Released, rel.State, err)
		}
	}
	rep, it := f.check(CheckAndRepair)
	f.c.beforeWrite = nil
	if it.Verdict != Repaired || rep.ExitCode() != 0 {
		t.Fatalf("repair: %+v", it)
	}
	if err := f.db.Orders.MarkReleased(f.ctx, racer.OrderNo); err != nil { // the lifecycle, late
		t.Fatal(err)
	}
	f.wantAgree(8)
	if f.rdb.Exists(f.ctx, f.store.Keys(reservation.One(f.item)).Reservation(racer.OrderNo)).Val() != 0 {
		t.Fatalf("the reservation of the order closed meanwhile is still there (repairs %q)", it.Repairs)
	}
	f.cancel(bought[1])
	f.wantAgree(9)
}

// A quota key the repair gives back to an order that is closed, and
// released, between the repair's read of the live orders and its write is
// taken back: the buyer may buy again.
func TestRepairTakesBackAQuotaKeyClosedMeanwhile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	k := f.store.Keys(reservation.One(f.item))
	var bought []reservation.Reservation
	for u := int64(1); u <= 3; u++ {
		r := f.reserve(u, 1)
		f.commit(r)
		f.confirm(r)
		bought = append(bought, r)
		// Redis loses the buyer's quota key and idempotency record.
		f.rdb.Del(f.ctx, k.Quota(f.act.ID, r.UserID), k.Idem(r.UserID, r.IdempotencyKey))
	}
	racer := bought[0]
	closed := false
	f.c.beforeWrite = func(int64) {
		if closed || f.rdb.Exists(f.ctx, k.Idem(racer.UserID, racer.IdempotencyKey)).Val() == 0 {
			return
		}
		closed = true // the idempotency records are back; the quota keys are next
		if tr, err := f.db.Orders.CloseOrder(f.ctx, racer.UserID, racer.OrderNo, order.ReasonCancelled); err != nil || !tr.Won {
			t.Errorf("close: %+v %v", tr, err)
		}
		ref := reservation.Ref{OrderNo: racer.OrderNo, UserID: racer.UserID, ItemID: racer.ItemID, ActivityID: racer.ActivityID,
			IdempotencyKey: racer.IdempotencyKey}
		if rel, err := f.store.Reservations.Release(f.ctx, ref, reservation.ReleaseOptions{Reason: order.ReasonCancelled, From: []reservation.State{reservation.StateConfirmed}}); err != nil || !rel.Released {
			t.Errorf("release: %v %v", rel.Released, err)
		}
	}
	rep, it := f.check(CheckAndRepair)
	f.c.beforeWrite = nil
	if !closed || it.Verdict != Repaired || rep.ExitCode() != 0 {
		t.Fatalf("repair (closed meanwhile: %v): %+v", closed, it)
	}
	if err := f.db.Orders.MarkReleased(f.ctx, racer.OrderNo); err != nil {
		t.Fatal(err)
	}
	if got := f.rdb.Get(f.ctx, k.Quota(f.act.ID, racer.UserID)).Val(); got != "" {
		t.Fatalf("the quota key of the order closed meanwhile holds %q (repairs %q)", got, it.Repairs)
	}
	f.wantAgree(8)
	again := racer
	again.OrderNo, again.IdempotencyKey = f.gen.Next(f.item), "again"
	if _, err := f.store.Reservations.Reserve(f.ctx, again); err != nil {
		t.Fatalf("the buyer of the closed order buying again: %v", err)
	}
}
