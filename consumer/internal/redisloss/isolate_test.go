package redisloss

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/metrics"
)

// Redis loses the data of two items on sale, and one of them fails its
// check at every pass (its stock key came back as a hash: the read script
// gets WRONGTYPE). The item that lost data is repaired at once all the
// same; the failing one is logged by its item id and counted, and the
// detection stays open and recorded in MySQL until it goes through too.
func TestWatchRepairsTheItemThatLostDataWhileAnotherKeepsFailing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	f := newFixture(t, rdb, prefix)
	bad, err := f.db.Activities.CreateItem(ctx, "hoodie", 10)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := f.db.Activities.CreateActivity(ctx, activity.Activity{ItemID: bad.ID, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	w, reg := f.watch(nil, nil)
	for range 3 {
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if w.Incident() {
		t.Fatal("incident with nothing lost")
	}

	f.lose()
	badKey := f.store.Keys(reservation.One(bad.ID)).Stock()
	if err := rdb.HSet(ctx, badKey, "stock", 10).Err(); err != nil {
		t.Fatal(err)
	}
	// The item that lost data is repaired while the other keeps failing.
	waittest.UntilEvery(t, 15*time.Second, w.Every, "the item that lost data repaired", func() bool {
		_ = w.Tick(ctx)
		s, err := f.store.Stock.Stock(ctx, reservation.One(f.item))
		return err == nil && s.Warmed && s.Stock == 9
	})
	f.healed("while another item fails")
	if !w.Incident() {
		t.Fatal("incident closed while an item still fails its repair")
	}
	if rec := f.record(); rec.Healed >= rec.Losses {
		t.Fatalf("record %+v: the loss is recorded healed while an item still fails", rec)
	}
	if v := value(t, reg, "seckill_heal_items_failing"); v != 1 {
		t.Fatalf("items failing %v, want 1", v)
	}
	if v := value(t, reg, "seckill_heal_repair_passes_total", "outcome", metrics.HealPassPartial); v < 1 {
		t.Fatalf("partial passes %v, want the first pass counted as one", v)
	}
	logged := f.log.String()
	if !strings.Contains(logged, `"item_id":`+strconv.FormatInt(bad.ID, 10)) || !strings.Contains(logged, "WRONGTYPE") {
		t.Fatalf("no log line naming the failing item %d and its error", bad.ID)
	}
	if n := strings.Count(logged, "item not repaired after Redis data loss"); n != 1 {
		t.Fatalf("%d lines about the failing item, want 1 (logged when it starts failing)", n)
	}

	// The fault goes: the next pass repairs that item too, and the
	// incident closes.
	if err := rdb.Del(ctx, badKey).Err(); err != nil {
		t.Fatal(err)
	}
	f.tickUntilHealed(w, "after the fault went")
	if s, err := f.store.Stock.Stock(ctx, reservation.One(bad.ID)); err != nil || !s.Warmed || s.Stock != 10 {
		t.Fatalf("the item that failed: Redis %+v (%v), want stock 10", s, err)
	}
	if v := value(t, reg, "seckill_heal_items_failing"); v != 0 {
		t.Fatalf("items failing %v after the repair, want 0", v)
	}
}
