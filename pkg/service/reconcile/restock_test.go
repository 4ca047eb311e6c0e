package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// A restock MySQL committed whose Redis step never ran (the API answered
// 503 and nobody retried) is counted as restocking, not drift; the repair
// finishes it (Redis gets the units once and the restock is recorded), and
// the API's late retry of the same restock then adds nothing. With one
// stock key and with the stock split over 3 buckets.
func TestRestockLeftHalfDoneIsFinishedByTheRepair(t *testing.T) {
	t.Parallel()
	for _, buckets := range []int{1, 3} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 30, time.Hour) // cold; warmed below
			if _, err := f.store.Stock.WarmupBuckets(f.ctx, reservation.One(f.item), buckets, 2*time.Hour, func(ctx context.Context) (int64, error) {
				return f.db.Activities.ItemStock(ctx, f.item)
			}); err != nil {
				t.Fatal(err)
			}
			rs, created, err := f.db.Restocks.Restock(f.ctx, f.item, "r1", 7)
			if err != nil || !created {
				t.Fatalf("restock in MySQL: %+v %v %v", rs, created, err)
			}

			_, it := f.check(CheckOnly)
			wantItem(t, it, OK, 37, 30, 7, 0)
			if it.Detail.Restocking != 7 {
				t.Fatalf("restocking %d, want the 7 units MySQL has and Redis not yet", it.Detail.Restocking)
			}

			_, it = f.check(CheckAndRepair)
			wantItem(t, it, OK, 37, 37, 0, 0)
			if s := f.redisStock(); s.Stock != 37 {
				t.Fatalf("Redis stock %d after the repair, want 37", s.Stock)
			}
			if p, err := f.db.Restocks.PendingRestocks(f.ctx, f.item); err != nil || len(p) != 0 {
				t.Fatalf("pending restocks after the repair: %v %v, want none", p, err)
			}

			// The API's retry, late: the Redis step finds its markers.
			res, err := f.store.Stock.Restock(f.ctx, reservation.One(f.item), rs.ID, rs.Quantity)
			if err != nil || res.Added != 0 || !res.Warmed {
				t.Fatalf("late retry: %+v %v, want nothing added", res, err)
			}
			_, it = f.check(CheckOnly)
			wantItem(t, it, OK, 37, 37, 0, 0)
		})
	}
}

// A restock that lands while the reconciler reads (MySQL between its Redis
// read and its MySQL snapshot, Redis right after) is not taken for drift:
// the snapshot lists it and the item is read again.
func TestRestockDuringReadIsNotDrift(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30, 0)
	done := false
	f.c.afterView = func(item int64) {
		if done {
			return
		}
		done = true
		rs, _, err := f.db.Restocks.Restock(f.ctx, item, "during-read", 4)
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := f.store.Stock.Restock(f.ctx, reservation.One(item), rs.ID, rs.Quantity); err != nil {
			t.Error(err)
		}
	}
	_, it := f.check(CheckOnly)
	wantItem(t, it, OK, 34, 34, 0, 0)
	if it.Reads != 1 {
		t.Fatalf("%d reads, want 1 (read again at once, not after a pause)", it.Reads)
	}
}

// A warm-up's figure included a restock whose Redis step never ran, and
// the warm-up could not record it as applied in MySQL: the reconciler
// counts it as in Redis (the stock key's record says so, as the restock
// script decides), not as restocking, so it sees no drift and its repair
// adds nothing, only records the restock. With one stock key and with 3
// buckets.
func TestRestockCarriedByWarmupIsNotRestocking(t *testing.T) {
	t.Parallel()
	for _, buckets := range []int{1, 3} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 30, time.Hour) // cold
			rs, _, err := f.db.Restocks.Restock(f.ctx, f.item, "r1", 7)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.store.Stock.WarmupFrom(f.ctx, reservation.One(f.item), buckets, 2*time.Hour, noMark{f.db.Restocks}); err != nil {
				t.Fatal(err)
			}
			if p, err := f.db.Restocks.PendingRestocks(f.ctx, f.item); err != nil || len(p) != 1 {
				t.Fatalf("pending restocks: %v %v, want the one the warm-up did not record", p, err)
			}
			_, it := f.check(CheckOnly)
			wantItem(t, it, OK, 37, 37, 0, 0)
			if it.Detail.Restocking != 0 {
				t.Fatalf("restocking %d, want 0: the warm-up loaded it", it.Detail.Restocking)
			}
			_, it = f.check(CheckAndRepair)
			wantItem(t, it, OK, 37, 37, 0, 0)
			if p, err := f.db.Restocks.PendingRestocks(f.ctx, f.item); err != nil || len(p) != 0 {
				t.Fatalf("pending restocks after the repair: %v %v, want none", p, err)
			}
			if res, err := f.store.Stock.Restock(f.ctx, reservation.One(f.item), rs.ID, rs.Quantity); err != nil || res.Added != 0 || !res.Warmed {
				t.Fatalf("the restock's late retry: %+v %v, want nothing added", res, err)
			}
			if s := f.redisStock(); s.Stock != 37 {
				t.Fatalf("Redis stock %d, want 37", s.Stock)
			}
		})
	}
}

// noMark is MySQL as a warm-up reads it, whose record of the restocks it
// loaded is lost.
type noMark struct{ *orderdb.Restocks }

func (noMark) MarkRestocksWarmed(context.Context, int64, int64) error { return nil }

// Redis lost every key of an item on sale, and a restock's Redis step
// never ran: the restock's step finds no stock key and adds nothing, the
// repair brings the stock back without it (it is restocking) and then, in
// the same pass, finishes it on the key it just wrote: Redis has every
// unit once after one pass (the consumer's heal runs this repair too).
func TestRestockFinishedAfterTheRepairRestoresTheKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30, -time.Minute)
	rs, _, err := f.db.Restocks.Restock(f.ctx, f.item, "r1", 7)
	if err != nil {
		t.Fatal(err)
	}
	f.buyThenLoseEverything(0, nil)
	_, it := f.check(CheckAndRepair)
	if it.Verdict != Repaired {
		t.Fatalf("repair: %+v", it)
	}
	if s := f.redisStock(); s.Stock != 37 {
		t.Fatalf("Redis stock %d after one repair pass, want 37 (the restock included once)", s.Stock)
	}
	if p, err := f.db.Restocks.PendingRestocks(f.ctx, f.item); err != nil || len(p) != 0 {
		t.Fatalf("pending restocks after the repair: %v %v, want none", p, err)
	}
	if res, err := f.store.Stock.Restock(f.ctx, reservation.One(f.item), rs.ID, rs.Quantity); err != nil || res.Added != 0 {
		t.Fatalf("the restock's late retry: %+v %v, want nothing added", res, err)
	}
	_, it = f.check(CheckOnly)
	wantItem(t, it, OK, 37, 37, 0, 0)
}
