package redisloss

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// After Redis lost every key, the watch repairs a sale with more live
// orders than one statement may name (MySQL takes at most 65,535
// placeholders) as it repairs a small one, and the small item beside it
// too. Before the reconciler read page by page, every pass failed at the
// big item ("Error 1390: Prepared statement contains too many
// placeholders") and the small one was never repaired either.
func TestWatchHealsAnItemWithSeventyThousandLiveOrders(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 72,000 orders")
	}
	t.Parallel()
	const n, spare = 72_000, 500
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	f := newFixture(t, rdb, prefix)
	big, err := f.db.Activities.CreateItem(ctx, "coupon", n+spare)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	act, err := f.db.Activities.CreateActivity(ctx, activity.Activity{ItemID: big.ID, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PerUserLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if act, err = f.db.Activities.Activity(ctx, act.ID); err != nil {
		t.Fatal(err)
	}
	bought, err := f.db.SeedLive(ctx, act, n)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := f.watch(nil, nil)
	if err := w.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	f.lose()

	var tickErr error
	waittest.UntilEvery(t, 3*time.Minute, 100*time.Millisecond, "both items repaired", func() bool {
		tickErr = w.Tick(ctx)
		rec := f.record()
		return tickErr == nil && !w.Incident() && rec.Healed == rec.Losses && rec.Losses > 0
	})
	f.healed("the small item")
	snap, err := f.store.Stock.Stock(ctx, reservation.One(big.ID))
	if err != nil || !snap.Warmed || snap.Stock != spare {
		t.Fatalf("the big item's Redis stock %+v (%v), want %d (MySQL's)", snap, err, spare)
	}
	k := f.store.Keys(reservation.One(big.ID))
	for _, b := range []order.Event{bought[0], bought[n/2], bought[n-1]} {
		if got := rdb.Get(ctx, k.Quota(act.ID, b.UserID)).Val(); got != b.OrderNo {
			t.Fatalf("quota key of buyer %s holds %q, want %s", b.UserID, got, b.OrderNo)
		}
	}
}
