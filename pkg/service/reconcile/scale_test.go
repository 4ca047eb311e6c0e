package reconcile

import (
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// loseEverything deletes every key of the fixture's prefix (SCAN, then DEL
// in batches).
func (f *fixture) loseEverything() {
	f.t.Helper()
	iter := f.rdb.Scan(f.ctx, 0, f.prefix+":*", 1000).Iterator()
	var keys []string
	flush := func() {
		if len(keys) > 0 {
			if err := f.rdb.Del(f.ctx, keys...).Err(); err != nil {
				f.t.Fatal(err)
			}
			keys = keys[:0]
		}
	}
	for iter.Next(f.ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 1000 {
			flush()
		}
	}
	if err := iter.Err(); err != nil {
		f.t.Fatal(err)
	}
	flush()
}

// An item with more live orders than one statement may name (MySQL takes
// at most 65,535 placeholders) is checked, and repaired after Redis lost
// every key, as a small one is: the check lists the first MaxListed
// missing quota keys and counts them all, the repair restores every
// reservation, idempotency record and quota key, and the next check is
// clean. Before the checks read page by page, the check failed with
// "Error 1390: Prepared statement contains too many placeholders".
func TestReconcileItemWithSeventyThousandLiveOrders(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 72,000 orders")
	}
	t.Parallel()
	const n, spare = 72_000, 8_000
	f := newFixture(t, n+spare, -time.Minute)
	bought, err := f.db.SeedLive(f.ctx, f.act, n)
	if err != nil {
		t.Fatal(err)
	}
	f.loseEverything()

	rep, it := f.check(CheckOnly)
	q := it.Activities[0]
	if it.Verdict != NotWarmed || rep.ExitCode() != 1 || it.MySQLStock != spare || q.LiveOrders != n ||
		q.QuotaMissingCount != n || len(q.QuotaMissing) != MaxListed || q.QuotaMissing[0].UserID != "1" {
		t.Fatalf("check after the loss: exit %d, %+v\nquota: %d live, %d missing (%d listed, first %+v)",
			rep.ExitCode(), it.Verdict, q.LiveOrders, q.QuotaMissingCount, len(q.QuotaMissing), q.QuotaMissing[:min(1, len(q.QuotaMissing))])
	}

	rep, it = f.check(CheckAndRepair)
	if it.Verdict != Repaired || rep.ExitCode() != 0 || it.ReservationsRestored != n || it.IdemRestored != n {
		t.Fatalf("repair: exit %d, verdict %s, %d reservations and %d idempotency records restored, repairs %q",
			rep.ExitCode(), it.Verdict, it.ReservationsRestored, it.IdemRestored, it.Repairs)
	}
	rep, it = f.check(CheckOnly)
	wantItem(t, it, OK, spare, spare, 0, 0)
	if q := it.Activities[0]; rep.ExitCode() != 0 || q.LiveOrders != n || q.QuotaMissingCount+q.QuotaStaleCount != 0 {
		t.Fatalf("check after the repair: exit %d, quota %+v", rep.ExitCode(), q)
	}
	// The first, a middle and the last buyer cannot buy again, and a retry
	// of their request gets their order back; a new buyer can.
	for _, b := range []order.Event{bought[0], bought[n/2], bought[n-1]} {
		again := reservation.Reservation{OrderNo: f.gen.Next(f.item), UserID: b.UserID, ItemID: f.item, ActivityID: f.act.ID,
			Quantity: 1, IdempotencyKey: b.IdempotencyKey, At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: 2 * time.Hour}
		if res, err := f.store.Reservations.Reserve(f.ctx, again); err != nil || !res.Duplicate || res.OrderNo != b.OrderNo {
			t.Fatalf("user %s retrying: %+v, %v; want their order %s back", b.UserID, res, err, b.OrderNo)
		}
		again.IdempotencyKey = "another"
		if _, err := f.store.Reservations.Reserve(f.ctx, again); !errors.Is(err, order.ErrAlreadyPurchased) {
			t.Fatalf("user %s buying again: %v", b.UserID, err)
		}
	}
	f.reserve(n+1, 1)
}
