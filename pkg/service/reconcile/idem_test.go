package reconcile

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// failedInMySQL records the reservation's order as FAILED for reason, as
// the consumer (OUT_OF_STOCK) or the API (PUBLISH_FAILED, before its 503)
// would, and releases the reservation as they do: the API's 503 frees the
// idempotency key, the consumer's refusal keeps it.
func (f *fixture) failedInMySQL(r reservation.Reservation, reason string) {
	f.t.Helper()
	err := f.db.Gorm().Exec(`INSERT INTO orders (order_no, user_id, item_id, activity_id, quantity, status, failure_reason,
		idempotency_key, reserved_at, released_at) VALUES (?, ?, ?, ?, ?, 'FAILED', ?, ?, ?, ?)`,
		r.OrderNo, r.UserID, r.ItemID, r.ActivityID, r.Quantity, reason, r.IdempotencyKey, time.Now().UTC(), time.Now().UTC()).Error
	if err != nil {
		f.t.Fatal(err)
	}
	ref := reservation.Ref{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: r.ItemID, ActivityID: r.ActivityID, IdempotencyKey: r.IdempotencyKey}
	if rel, err := f.store.Reservations.Release(f.ctx, ref, reservation.ReleaseOptions{Reason: reason, From: []reservation.State{reservation.StateReserved}, FreeKey: order.AnsweredUnavailable(reason)}); err != nil || !rel.Released {
		f.t.Fatalf("release %s: %v %s %v", r.OrderNo, rel.Released, rel.State, err)
	}
}

// bought takes user's order all the way: reserved, CREATED, confirmed.
func (f *fixture) bought(user int64) reservation.Reservation {
	f.t.Helper()
	r := f.reserve(user, 1)
	f.commit(r)
	f.confirm(r)
	return r
}

// Redis came back from an older state and lost the idempotency records of
// a CREATED, a PAID, a CLOSED and a FAILED (OUT_OF_STOCK) order: the
// repair writes the four back with the quota keys' TTL, and a retry with
// the same key then finds its order instead of reserving anew. The record
// of an order the API refused with 503 (PUBLISH_FAILED) stays free, and a
// record that names another order is left alone.
func TestReconcileRestoresLostIdempotencyRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	k := f.store.Keys(reservation.One(f.item))

	created := f.bought(1)
	paid := f.bought(2)
	if tr, err := f.db.Orders.Pay(f.ctx, "2", paid.OrderNo); err != nil || !tr.Won {
		t.Fatalf("pay: %+v %v", tr, err)
	}
	closed := f.bought(3)
	if tr, err := f.db.Orders.CloseOrder(f.ctx, "3", closed.OrderNo, order.ReasonCancelled); err != nil || !tr.Won {
		t.Fatalf("close: %+v %v", tr, err)
	}
	f.release(closed, reservation.StateConfirmed)
	if err := f.db.Orders.MarkReleased(f.ctx, closed.OrderNo); err != nil {
		t.Fatal(err)
	}
	outOfStock := f.reserve(4, 1)
	f.failedInMySQL(outOfStock, order.ReasonOutOfStock)
	publishFailed := f.reserve(5, 1)
	f.failedInMySQL(publishFailed, order.ReasonPublishFailed)
	other := f.bought(6)

	restored := []reservation.Reservation{created, paid, closed, outOfStock}
	for _, r := range append(restored, publishFailed) {
		f.rdb.Del(f.ctx, k.Idem(r.UserID, r.IdempotencyKey)) // lost with the restore
	}
	const elsewhere = "01KBOTHERORDER0000000000000-1"
	f.rdb.Set(f.ctx, k.Idem("6", other.IdempotencyKey), elsewhere, time.Hour)

	// A check alone does not look at idempotency records.
	if _, it := f.check(CheckOnly); it.Verdict != OK || it.IdemRestored != 0 {
		t.Fatalf("check: %+v", it)
	}
	rep, it := f.check(CheckAndRepair)
	if it.Verdict != Repaired || it.IdemRestored != 4 || rep.ExitCode() != 0 || len(it.Repairs) != 1 {
		t.Fatalf("repair: %+v, want verdict repaired with 4 idempotency records restored", it)
	}
	minTTL := time.Until(f.act.EndsAt.Add(order.KeyMargin)) - time.Minute
	for _, r := range restored {
		key := k.Idem(r.UserID, r.IdempotencyKey)
		if got := f.rdb.Get(f.ctx, key).Val(); got != r.OrderNo {
			t.Fatalf("idempotency record of user %s holds %q, want %s", r.UserID, got, r.OrderNo)
		}
		if ttl := f.rdb.PTTL(f.ctx, key).Val(); ttl < minTTL || ttl > order.KeyMargin+time.Hour {
			t.Fatalf("idempotency record of user %s lives %v, want the activity's end + %v", r.UserID, ttl, order.KeyMargin)
		}
	}
	if err := f.rdb.Get(f.ctx, k.Idem("5", publishFailed.IdempotencyKey)).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("the key of the order refused with 503 was restored: %v", err)
	}
	if got := f.rdb.Get(f.ctx, k.Idem("6", other.IdempotencyKey)).Val(); got != elsewhere {
		t.Fatalf("a record naming another order was overwritten: %q", got)
	}

	// Retries: the same key gets the same order; the 503'd key buys anew.
	for _, r := range restored {
		again := r
		again.OrderNo = f.gen.Next(f.item)
		res, err := f.store.Reservations.Reserve(f.ctx, again)
		if err != nil || !res.Duplicate || res.OrderNo != r.OrderNo {
			t.Fatalf("retry of user %s with the same key: %+v %v, want duplicate of %s", r.UserID, res, err, r.OrderNo)
		}
	}
	again := publishFailed
	again.OrderNo = f.gen.Next(f.item)
	if res, err := f.store.Reservations.Reserve(f.ctx, again); err != nil || res.Duplicate {
		t.Fatalf("retry after the 503: %+v %v, want a new reservation", res, err)
	}

	// Nothing left to restore: the next repair pass changes nothing.
	if _, it := f.check(CheckAndRepair); it.Verdict != OK || it.IdemRestored != 0 || len(it.Repairs) != 0 {
		t.Fatalf("second repair: %+v", it)
	}
}

// A buyer's order was closed, Redis then lost the key's record, and a
// retry with the same key reserved a new order that MySQL refused
// (DUPLICATE_REQUEST, uk_orders_key). Redis loses the record again: the
// repair gives the key back its one order, the closed one, never the
// refused retry.
func TestReconcileRestoresTheKeysOrderNotItsRefusedRetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	k := f.store.Keys(reservation.One(f.item))

	closed := f.bought(1)
	if tr, err := f.db.Orders.CloseOrder(f.ctx, "1", closed.OrderNo, order.ReasonCancelled); err != nil || !tr.Won {
		t.Fatalf("close: %+v %v", tr, err)
	}
	f.release(closed, reservation.StateConfirmed)
	if err := f.db.Orders.MarkReleased(f.ctx, closed.OrderNo); err != nil {
		t.Fatal(err)
	}
	idem := k.Idem(closed.UserID, closed.IdempotencyKey)
	f.rdb.Del(f.ctx, idem) // lost with a restore
	retry := f.reserve(1, 1)
	f.failedInMySQL(retry, order.ReasonDuplicateRequest)
	f.rdb.Del(f.ctx, idem) // and lost again

	if _, it := f.check(CheckAndRepair); it.IdemRestored != 1 {
		t.Fatalf("repair: %+v, want one idempotency record restored", it)
	}
	if got := f.rdb.Get(f.ctx, idem).Val(); got != closed.OrderNo {
		t.Fatalf("the key's record names %q, want its closed order %s (not the refused retry %s)", got, closed.OrderNo, retry.OrderNo)
	}
}
