package orderdb_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

// ownerGuard is the guard a create or change of a sale is checked with,
// at now, with no keys in Redis.
func ownerGuard(now time.Time) activity.KeyGuard {
	return activity.KeyGuard{Now: now, KeysUntil: func(a activity.Activity) time.Time { return a.KeysLiveUntil(30 * time.Minute) }}
}

// items creates n items of stock 10.
func items(t *testing.T, db *mysqltest.DB, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		it, err := db.Activities.CreateItem(context.Background(), "size", 10)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = it.ID
	}
	return ids
}

// salesOf counts the sales that sell item, as first item or listed.
func salesOf(t *testing.T, db *mysqltest.DB, item int64) int {
	t.Helper()
	var n int
	if err := db.Gorm().Raw(`SELECT COUNT(*) FROM activities WHERE item_id = ? OR id IN
		(SELECT activity_id FROM activity_items WHERE item_id = ?)`, item, item).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// Sales whose windows overlap, each sharing an item with every other, are
// created at the same instant: exactly one is made, every other is refused
// with order.ErrItemInAnotherSale, and no item is in two sales. The sales
// of several items lock their rows in one order and read the items' sales
// after the lock, so a sale committed while another waited is seen.
func TestConcurrentOverlappingSalesOneWins(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond) // as MySQL keeps it
	for round := range 4 {
		ids := items(t, db, 3)
		a, b, c := ids[0], ids[1], ids[2]
		// Every two share an item, no item is in them all.
		kinds := [][]int64{{a, b}, {b, c}, {c, a}, {b, a}, {a, b, c}, {c, b}}
		const n = 16
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				act := activity.Activity{StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour), PerUserLimit: 1}
				if round%2 == 0 { // all of one item
					act.ItemID = a
				} else {
					k := kinds[i%len(kinds)]
					act.ItemID = k[0]
					for j, id := range k {
						act.Items = append(act.Items, activity.Item{ItemID: id, Label: string(rune('S' + j))})
					}
				}
				_, errs[i] = db.Activities.CreateSale(ctx, act, ownerGuard(now))
			}()
		}
		wg.Wait()
		made := 0
		for i, err := range errs {
			switch {
			case err == nil:
				made++
			case !errors.Is(err, activity.ErrItemInAnotherActivity):
				t.Fatalf("round %d sale %d: %v", round, i, err)
			}
		}
		if made != 1 {
			t.Fatalf("round %d: %d overlapping sales made, want 1", round, made)
		}
		for _, id := range ids {
			if s := salesOf(t, db, id); s > 1 {
				t.Fatalf("round %d: item %d is in %d sales", round, id, s)
			}
		}
	}
}

// A change of one sale's window and a create of another sale of its item,
// at once, that would overlap: one of the two is refused.
func TestConcurrentPatchAndCreateOneWins(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	h := func(n int) time.Time { return now.Add(time.Duration(n) * time.Hour) }
	for round := range 6 {
		item := items(t, db, 1)[0]
		first, err := db.Activities.CreateSale(ctx, activity.Activity{ItemID: item, StartsAt: h(1), EndsAt: h(2), PerUserLimit: 1}, ownerGuard(now))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var errPatch, errCreate error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, errPatch = db.Activities.PatchActivity(ctx, first.ID, activity.Patch{StartsAt: ptrTo(h(3)), EndsAt: ptrTo(h(5))}, now)
		}()
		go func() {
			defer wg.Done()
			_, errCreate = db.Activities.CreateSale(ctx, activity.Activity{ItemID: item, StartsAt: h(4), EndsAt: h(6), PerUserLimit: 1}, ownerGuard(now))
		}()
		wg.Wait()
		patched, created := errPatch == nil, errCreate == nil
		for _, err := range []error{errPatch, errCreate} {
			if err != nil && !errors.Is(err, activity.ErrItemInAnotherActivity) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if patched == created {
			t.Fatalf("round %d: patched %v, created %v: want exactly one", round, patched, created)
		}
		got, err := db.Activities.Activity(ctx, first.ID)
		if err != nil {
			t.Fatal(err)
		}
		if patched != got.StartsAt.Equal(h(3).Truncate(time.Millisecond)) || salesOf(t, db, item) != map[bool]int{true: 1, false: 2}[patched] {
			t.Fatalf("round %d: patched %v but the sale starts %s, %d sales of the item", round, patched, got.StartsAt, salesOf(t, db, item))
		}
	}
}

// What owns an item at a time, through the store: an overlapping sale is
// refused with a message naming the other sale and the item; windows that
// only touch, a sale that ended and a cancelled one do not block; a change
// of window or items into another sale's window is refused, nothing
// written.
func TestOneSaleOwnsAnItem(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	h := func(n int) time.Time { return now.Add(time.Duration(n) * time.Hour) }
	ids := items(t, db, 2)
	x, y := ids[0], ids[1]
	first, err := db.Activities.CreateSale(ctx, activity.Activity{ItemID: x, StartsAt: h(1), EndsAt: h(2), PerUserLimit: 1}, ownerGuard(now))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Activities.CreateSale(ctx, activity.Activity{ItemID: y, StartsAt: h(1), EndsAt: h(3), PerUserLimit: 1,
		Items: []activity.Item{{ItemID: y, Label: "S"}, {ItemID: x, Label: "M"}}}, ownerGuard(now))
	var oe *order.Error
	if !errors.As(err, &oe) || !errors.Is(err, activity.ErrItemInAnotherActivity) {
		t.Fatalf("overlapping sale of sizes: %v, want ErrItemInAnotherSale", err)
	}
	for _, want := range []string{"item " + strconv.FormatInt(x, 10), "sale " + strconv.FormatInt(first.ID, 10)} {
		if !strings.Contains(oe.Message, want) {
			t.Fatalf("message %q does not name %q", oe.Message, want)
		}
	}
	if n := salesOf(t, db, y); n != 0 {
		t.Fatalf("refused sale written: %d sales of item %d", n, y)
	}
	// Touching windows: [2h, 3h) after [1h, 2h).
	_, err = db.Activities.CreateSale(ctx, activity.Activity{ItemID: x, StartsAt: h(2), EndsAt: h(3), PerUserLimit: 1}, ownerGuard(now))
	if err != nil {
		t.Fatalf("a sale starting when the other ends: %v", err)
	}
	// A change of the first sale's window into the second's is refused.
	if _, err := db.Activities.PatchActivity(ctx, first.ID, activity.Patch{EndsAt: ptrTo(h(2).Add(time.Minute))}, now); !errors.Is(err, activity.ErrItemInAnotherActivity) {
		t.Fatalf("window patched into another sale's: %v", err)
	}
	// So is a change of items of a sale of y alone into x's.
	third, err := db.Activities.CreateSale(ctx, activity.Activity{ItemID: y, StartsAt: h(1), EndsAt: h(2), PerUserLimit: 1}, ownerGuard(now))
	if err != nil {
		t.Fatal(err)
	}
	g := ownerGuard(now)
	_, err = db.Activities.PatchActivity(ctx, third.ID, activity.Patch{Items: []activity.Item{{ItemID: y, Label: "S"}, {ItemID: x, Label: "M"}}, Guard: &g}, now)
	if !errors.Is(err, activity.ErrItemInAnotherActivity) {
		t.Fatalf("items patched into another sale's: %v", err)
	}
	if got, err := db.Activities.Activity(ctx, third.ID); err != nil || len(got.Items) != 1 {
		t.Fatalf("refused change written: %+v, %v", got.Items, err)
	}
	// The sale's own window moving within itself is no overlap with itself.
	if _, err := db.Activities.PatchActivity(ctx, first.ID, activity.Patch{StartsAt: ptrTo(h(1).Add(time.Minute))}, now); err != nil {
		t.Fatalf("a sale's own change: %v", err)
	}
	// A sale that ended and a cancelled one give the item up.
	z := items(t, db, 1)[0]
	ended, err := db.Activities.CreateSale(ctx, activity.Activity{ItemID: z, StartsAt: now.Add(-time.Hour), EndsAt: h(1), PerUserLimit: 1}, ownerGuard(now))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Activities.EndActivity(ctx, ended.ID, now, activity.CancelNow); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Activities.CreateSale(ctx, activity.Activity{ItemID: z, StartsAt: now.Add(-time.Minute), EndsAt: h(1), PerUserLimit: 1}, ownerGuard(now.Add(time.Second))); err != nil {
		t.Fatalf("a sale of an item whose other sale was cancelled: %v", err)
	}
}
