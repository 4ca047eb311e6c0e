package orderdb_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/order"
)

func TestActivitiesFilter(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 5) // activity 1: now .. now+1h
	ctx := context.Background()
	other, err := db.Activities.CreateItem(ctx, "other", 1)
	if err != nil {
		t.Fatal(err)
	}
	old, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: other.ID, StartsAt: time.Now().Add(-72 * time.Hour),
		EndsAt: time.Now().Add(-48 * time.Hour), PerUserLimit: 2, PaymentWindow: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(as []activity.Activity, err error) []int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	cases := []struct {
		name string
		f    drift.ActivityFilter
		want []int64
	}{
		{"all", drift.ActivityFilter{}, []int64{1, old.ID}},
		{"ending after a day ago", drift.ActivityFilter{EndsAfter: time.Now().Add(-24 * time.Hour)}, []int64{1}},
		{"by id", drift.ActivityFilter{IDs: []int64{old.ID}}, []int64{old.ID}},
		{"by item", drift.ActivityFilter{Items: []int64{item}}, []int64{1}},
		{"empty id list", drift.ActivityFilter{IDs: []int64{}}, nil},
	}
	for _, c := range cases {
		got := ids(db.Reconcile.Activities(ctx, c.f))
		if len(got) != len(c.want) || (len(got) > 0 && (got[0] != c.want[0] || got[len(got)-1] != c.want[len(c.want)-1])) {
			t.Fatalf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	as, _ := db.Reconcile.Activities(ctx, drift.ActivityFilter{IDs: []int64{old.ID}})
	if as[0].PaymentWindow != 90*time.Second || as[0].ItemID != other.ID || as[0].PerUserLimit != 2 {
		t.Fatalf("activity %+v", as[0])
	}
}

func TestStockSnapshotAndOrders(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 10)
	ctx := context.Background()
	a, b, dup := req(item, 1, 2), req(item, 2, 1), req(item, 1, 1)
	if _, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{a, b, dup}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Orders.CloseOrder(ctx, "2", b.Event.OrderNo, order.ReasonCancelled); err != nil {
		t.Fatal(err)
	}
	snap, err := db.Reconcile.StockSnapshot(ctx, item, []string{a.Event.OrderNo, b.Event.OrderNo, dup.Event.OrderNo, "nope"}, drift.ReadMark{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stock != 8 || len(snap.Orders) != 3 {
		t.Fatalf("snapshot %+v, want stock 8 and 3 orders", snap)
	}
	want := map[string]drift.OrderState{
		a.Event.OrderNo:   {Status: order.Created, Quantity: 2},
		b.Event.OrderNo:   {Status: order.Closed, Quantity: 1},
		dup.Event.OrderNo: {Status: order.Failed, Quantity: 1},
	}
	for no, w := range want {
		if snap.Orders[no] != w {
			t.Fatalf("%s: %+v, want %+v", no, snap.Orders[no], w)
		}
	}
	if _, err := db.Reconcile.StockSnapshot(ctx, item+100, nil, drift.ReadMark{}); err == nil {
		t.Fatal("snapshot of an unknown item succeeded")
	}

	closing, err := db.Reconcile.ClosingOrders(ctx, item)
	if err != nil {
		t.Fatal(err)
	}
	if len(closing) != 1 || closing[b.Event.OrderNo].Quantity != 1 {
		t.Fatalf("closing %+v", closing)
	}
	if err := db.Orders.MarkReleased(ctx, b.Event.OrderNo); err != nil {
		t.Fatal(err)
	}
	if closing, _ := db.Reconcile.ClosingOrders(ctx, item); len(closing) != 0 {
		t.Fatalf("closing after the release was recorded: %+v", closing)
	}

	page, err := db.Reconcile.LiveOrderPage(ctx, 1, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].UserID != "1" || page[0].OrderNo != a.Event.OrderNo || page[0].Status != order.Created {
		t.Fatalf("live %+v, want user 1 -> %s", page, a.Event.OrderNo)
	}
	if page, err := db.Reconcile.LiveOrderPage(ctx, 1, "1", 10); err != nil || len(page) != 0 {
		t.Fatalf("the page after user 1: %+v, %v", page, err)
	}
	live, err := db.Reconcile.LiveOrdersOf(ctx, 1, []string{"1", "2", "9"})
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live["1"] != a.Event.OrderNo {
		t.Fatalf("live %v, want user 1 -> %s", live, a.Event.OrderNo)
	}
}

// The snapshot's stock and order statuses are from one instant: a batch
// that commits while it reads never shows up in one and not the other.
func TestStockSnapshotIsConsistent(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 1000)
	ctx := context.Background()
	var reqs []order.FulfilRequest
	for u := range 400 {
		reqs = append(reqs, req(item, int64(u+1), 1))
	}
	var nos []string
	for _, r := range reqs {
		nos = append(nos, r.Event.OrderNo)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < len(reqs); i += 20 {
			if _, err := mysqltest.Fulfil(ctx, db.DB, reqs[i:i+20]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 50 {
		snap, err := db.Reconcile.StockSnapshot(ctx, item, nos, drift.ReadMark{})
		if err != nil {
			t.Fatal(err)
		}
		if snap.Stock+int64(len(snap.Orders)) != 1000 {
			t.Fatalf("stock %d with %d orders, want them to sum to 1000", snap.Stock, len(snap.Orders))
		}
	}
	wg.Wait()
}

// What moved after the mark and is not among the orders asked about is
// reported: a live order created since, an order closed since; an order
// that was closing at the mark is not.
func TestStockSnapshotReportsWhatMoved(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 10)
	ctx := context.Background()
	old, closing, later := req(item, 1, 1), req(item, 2, 1), req(item, 3, 1)
	if _, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{old, closing, later}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Orders.CloseOrder(ctx, "2", closing.Event.OrderNo, order.ReasonCancelled); err != nil {
		t.Fatal(err)
	}
	mark, err := db.Reconcile.ReadMark(ctx, item)
	if err != nil {
		t.Fatal(err)
	}
	if len(mark.Closing) != 1 || mark.MaxID < 3 || mark.At.IsZero() {
		t.Fatalf("mark %+v", mark)
	}
	snap, err := db.Reconcile.StockSnapshot(ctx, item, nil, mark)
	if err != nil || len(snap.Moved) != 0 {
		t.Fatalf("nothing moved: %+v %v", snap, err)
	}

	created := req(item, 4, 1)
	if _, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{created}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Orders.CloseOrder(ctx, "3", later.Event.OrderNo, order.ReasonCancelled); err != nil {
		t.Fatal(err)
	}
	if err := db.Orders.MarkReleased(ctx, closing.Event.OrderNo); err != nil {
		t.Fatal(err)
	}
	snap, err = db.Reconcile.StockSnapshot(ctx, item, nil, mark)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{created.Event.OrderNo: true, later.Event.OrderNo: true}
	if len(snap.Moved) != 2 || !want[snap.Moved[0]] || !want[snap.Moved[1]] {
		t.Fatalf("moved %v, want %v", snap.Moved, want)
	}
	// Asked about: accounted for by the caller, not moved.
	snap, _ = db.Reconcile.StockSnapshot(ctx, item, []string{created.Event.OrderNo, later.Event.OrderNo}, mark)
	if len(snap.Moved) != 0 {
		t.Fatalf("moved %v, want none", snap.Moved)
	}
}
