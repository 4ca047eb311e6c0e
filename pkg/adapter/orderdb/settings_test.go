package orderdb_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
)

// Sales of one item with different bucket counts are created at once, with
// no keys in Redis yet: the item's row lock puts them one after the other,
// so every sale created has the same layout and every other is refused
// (activity.ErrSettingLocked), none half-written.
func TestConcurrentSalesOfAnItemAgreeOnItsLayout(t *testing.T) {
	t.Parallel()
	db, _ := setup(t, 10)
	ctx := context.Background()
	it, err := db.Activities.CreateItem(ctx, "fresh", 10) // no sale yet
	if err != nil {
		t.Fatal(err)
	}
	item := it.ID
	now := time.Now().UTC().Truncate(time.Millisecond) // as MySQL keeps it
	g := activity.KeyGuard{Now: now, KeysUntil: func(a activity.Activity) time.Time { return a.KeysLiveUntil(30 * time.Minute) }}
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Windows one after the other: one sale owns an item at a time.
			at := now.Add(time.Duration(i+1) * time.Hour)
			_, errs[i] = db.Activities.CreateSale(ctx, activity.Activity{ItemID: item, StartsAt: at, EndsAt: at.Add(time.Hour),
				PerUserLimit: 1, StockBuckets: 1 + i%2}, g)
		}()
	}
	wg.Wait()
	refused := 0
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, activity.ErrSettingLocked):
			refused++
		default:
			t.Fatalf("sale %d: %v", i, err)
		}
	}
	var layouts []int
	if err := db.Gorm().Raw("SELECT DISTINCT stock_buckets FROM activities WHERE item_id = ?", item).Scan(&layouts).Error; err != nil {
		t.Fatal(err)
	}
	var sales int
	if err := db.Gorm().Raw("SELECT COUNT(*) FROM activities WHERE item_id = ?", item).Scan(&sales).Error; err != nil {
		t.Fatal(err)
	}
	if len(layouts) != 1 || sales+refused != n || refused != n/2 {
		t.Fatalf("%d sales with layouts %v, %d refused; want %d of one layout, %d refused", sales, layouts, refused, n/2, n/2)
	}
}
