package reconcile

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// A bucketed item (stock split over 3 keys in other slots): Redis stock is
// the sum of the buckets; drift injected into one bucket is detected and
// repaired by a compare-and-set of every bucket to an even split.
func TestReconcileBucketedStockDriftIsRepaired(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30, time.Hour) // not started: newFixture leaves it cold
	const buckets = 3
	if _, err := f.store.Stock.WarmupBuckets(f.ctx, reservation.One(f.item), buckets, 2*time.Hour, func(ctx context.Context) (int64, error) { return f.db.Activities.ItemStock(ctx, f.item) }); err != nil {
		t.Fatal(err)
	}
	reserve := func(user int64, qty int) reservation.Reservation {
		// Reserved at the sale's start: MySQL refuses an order of a sale
		// that has not started (SALE_NOT_STARTED).
		r := reservation.Reservation{OrderNo: f.gen.Next(f.item), UserID: strconv.FormatInt(user, 10), ItemID: f.item, ActivityID: f.act.ID,
			Quantity: qty, IdempotencyKey: "k", At: f.act.StartsAt, QuotaTTL: time.Hour, ReservationTTL: 2 * time.Hour, Buckets: buckets}
		if _, err := f.store.Reservations.Reserve(f.ctx, r); err != nil {
			t.Fatalf("reserve for user %d: %v", user, err)
		}
		return r
	}
	first := reserve(1, 2)
	f.commit(first)
	f.confirm(first)
	reserve(2, 1) // stays in flight
	_, it := f.check(CheckOnly)
	wantItem(t, it, OK, 28, 27, 1, 0)

	k := f.store.Keys(reservation.One(f.item))
	bucketsNow := func() []int64 {
		out := make([]int64, buckets)
		for i := range out {
			out[i], _ = f.rdb.Get(f.ctx, k.Bucket(i)).Int64()
		}
		return out
	}
	cases := []struct {
		name   string
		inject func()
		redis  int64
		drift  int64
	}{
		{"one bucket raised by hand", func() { f.rdb.IncrBy(f.ctx, k.Bucket(1), 5) }, 32, 5},
		{"one bucket emptied by hand", func() { f.rdb.Set(f.ctx, k.Bucket(2), 0, redis.KeepTTL) }, 18, -9},
	}
	for _, c := range cases {
		c.inject()
		rep, it := f.check(CheckOnly)
		wantItem(t, it, Drift, 28, c.redis, 1, c.drift)
		if rep.ExitCode() != 1 {
			t.Fatalf("%s: exit %d, want 1", c.name, rep.ExitCode())
		}
		rep, it = f.check(CheckAndRepair)
		wantItem(t, it, Repaired, 28, c.redis, 1, c.drift)
		if rep.ExitCode() != 0 {
			t.Fatalf("%s: exit %d, repairs %v", c.name, rep.ExitCode(), it.Repairs)
		}
		if got := bucketsNow(); got[0] != 9 || got[1] != 9 || got[2] != 9 {
			t.Fatalf("%s: buckets %v after repair, want [9 9 9]", c.name, got)
		}
		if fence, _ := f.rdb.Get(f.ctx, k.Fence()).Int64(); fence != rep.Fence || fence == 0 {
			t.Fatalf("%s: fence key %d, want the lock's %d", c.name, fence, rep.Fence)
		}
		_, it = f.check(CheckOnly)
		wantItem(t, it, OK, 28, 27, 1, 0)
	}
	if f.rdb.Exists(f.ctx, k.Stock()).Val() != 0 {
		t.Fatal("the repair created the main-tag stock key of a bucketed item")
	}
}

// Redis lost every key of a bucketed item, its bucket marker with them: the
// repair lays the buckets out again from the activity's stock_buckets in
// MySQL (not as one stock key), restores the quotas, and the item sells
// from its buckets again.
func TestReconcileBucketedItemLostEverythingIsLaidOutFromTheActivity(t *testing.T) {
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
	reserve := func(user int64) reservation.Reservation {
		r := reservation.Reservation{OrderNo: f.gen.Next(f.item), UserID: strconv.FormatInt(user, 10), ItemID: f.item, ActivityID: f.act.ID,
			Quantity: 1, IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: 2 * time.Hour, Buckets: buckets}
		if _, err := f.store.Reservations.Reserve(f.ctx, r); err != nil {
			t.Fatalf("reserve for user %d: %v", user, err)
		}
		return r
	}
	bought := f.buyThenLoseEverything(5, reserve)

	_, it := f.check(CheckOnly)
	wantItem(t, it, NotWarmed, 25, -1, 0, -25)
	rep, it := f.check(CheckAndRepair)
	if it.Verdict != Repaired || rep.ExitCode() != 0 {
		t.Fatalf("repair: %+v", it)
	}
	k := f.store.Keys(reservation.One(f.item))
	if f.rdb.Exists(f.ctx, k.Stock()).Val() != 0 {
		t.Fatalf("the repair created the main-tag stock key of a bucketed item: %q", it.Repairs)
	}
	if n, _ := f.rdb.Get(f.ctx, k.BucketMarker()).Int(); n != buckets {
		t.Fatalf("bucket marker %d, want %d (repairs %q)", n, buckets, it.Repairs)
	}
	var sum int64
	for i := range buckets {
		v, err := f.rdb.Get(f.ctx, k.Bucket(i)).Int64()
		if err != nil || v < 8 || v > 9 {
			t.Fatalf("bucket %d = %d (%v), want an even split of 25", i, v, err)
		}
		sum += v
	}
	if sum != 25 {
		t.Fatalf("buckets hold %d, want 25", sum)
	}
	_, it = f.check(CheckOnly)
	wantItem(t, it, OK, 25, 25, 0, 0)
	for _, b := range bought {
		r := b
		r.OrderNo, r.IdempotencyKey = f.gen.Next(f.item), "new-key"
		if _, err := f.store.Reservations.Reserve(f.ctx, r); !errors.Is(err, order.ErrAlreadyPurchased) {
			t.Fatalf("user %s buying again: %v", b.UserID, err)
		}
	}
	reserve(99)
	if s := f.redisStock(); !s.Warmed || s.Stock != 24 {
		t.Fatalf("Redis %+v after one more sale, want 24", s)
	}
}

// The item's last sale was bucketed (3 keys) and its keys are gone; the
// sale now running has one stock key, which drifts. The repair sets that
// key, the one the running sale sells from: it never lays out buckets from
// the older sale (nobody would sell from them, and the reconciler would
// then check them and call the item OK while the live key drifts).
func TestReconcileRepairsTheLiveKeyNotTheOldSalesBuckets(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30, -time.Minute) // warmed: one stock key
	f.c.Warmer = f.store.Stock
	now := time.Now()
	if _, err := f.db.Activities.CreateActivity(f.ctx, activity.Activity{ItemID: f.item, StartsAt: now.Add(-3 * time.Hour),
		EndsAt: now.Add(-2 * time.Hour), PerUserLimit: 1, StockBuckets: 3}); err != nil {
		t.Fatal(err)
	}
	k := f.store.Keys(reservation.One(f.item))
	f.rdb.IncrBy(f.ctx, k.Stock(), 5)
	_, it := f.check(CheckOnly)
	wantItem(t, it, Drift, 30, 35, 0, 5)

	rep, it := f.check(CheckAndRepair)
	if it.Verdict != Repaired || rep.ExitCode() != 0 {
		t.Fatalf("repair: %+v", it)
	}
	if n := f.rdb.Exists(f.ctx, k.BucketMarker(), k.Bucket(0), k.Bucket(1), k.Bucket(2)).Val(); n != 0 {
		t.Fatalf("the repair laid out the old sale's buckets (%d keys): %q", n, it.Repairs)
	}
	if v, _ := f.rdb.Get(f.ctx, k.Stock()).Int64(); v != 30 {
		t.Fatalf("the live stock key holds %d after the repair, want 30 (repairs %q)", v, it.Repairs)
	}
	_, it = f.check(CheckOnly)
	wantItem(t, it, OK, 30, 30, 0, 0)
}

// An item whose keys hold two layouts at once (a bucket marker with its
// buckets, and the one stock key a later sale sells from: a layout changed
// while the old keys lived) is a problem the check reports, naming both,
// never OK because the buckets the marker names agree with MySQL.
func TestReconcileReportsTwoLayoutsAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30, -time.Minute) // warmed: one stock key
	k := f.store.Keys(reservation.One(f.item))
	// An older sale's layout, as a warm-up before the checks wrote it
	// (warm-ups refuse to now).
	f.rdb.Set(f.ctx, k.BucketMarker(), 3, time.Hour)
	for i := range 3 {
		f.rdb.Set(f.ctx, k.Bucket(i), 10, time.Hour)
	}
	f.rdb.IncrBy(f.ctx, k.Stock(), 5) // the live key drifts
	rep, it := f.check(CheckOnly)
	if it.Verdict != Drift || rep.ExitCode() != 1 {
		t.Fatalf("two layouts: verdict %q, exit %d, problems %q; want drift, exit 1", it.Verdict, rep.ExitCode(), it.Problems)
	}
	if len(it.Problems) == 0 || !strings.Contains(it.Problems[0], "one stock key") || !strings.Contains(it.Problems[0], "3 stock buckets") {
		t.Fatalf("problems %q do not name both layouts", it.Problems)
	}
	// A repair does not pick one for the operator.
	_, it = f.check(CheckAndRepair)
	if it.Verdict != Drift || f.rdb.Exists(f.ctx, k.Stock()).Val() != 1 || f.rdb.Exists(f.ctx, k.BucketMarker()).Val() != 1 {
		t.Fatalf("repair of two layouts: %+v", it)
	}
}
