package orderdb_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/mysqltest"
	"github.com/seckill/seckill/pkg/order"
	"github.com/seckill/seckill/pkg/orderdb"
)

var gen = order.NewNumberGenerator()

func req(item, user int64, qty int) orderdb.Request {
	return orderdb.Request{Event: order.Event{
		Version: order.EventVersion, OrderNo: gen.Next(item), IdempotencyKey: "k", UserID: user,
		ItemID: item, ActivityID: 1, Quantity: qty, ReservedAt: time.Now(),
	}, PayDeadline: time.Now().Add(30 * time.Minute)}
}

func setup(t *testing.T, stock int64) (*mysqltest.DB, int64) {
	t.Helper()
	db := mysqltest.New(t)
	ctx := context.Background()
	it, err := db.CreateItem(ctx, "sneaker", stock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateActivity(ctx, order.Activity{ItemID: it.ID, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	return db, it.ID
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
}

func TestSchemaEnforcesInvariants(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 1)
	ctx := context.Background()
	if err := db.SetItemStock(ctx, item, -1); err == nil {
		t.Fatal("stock -1 accepted; the CHECK constraint must refuse it")
	}
}

func TestFulfilBatchAndTail(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 5)
	ctx := context.Background()
	// 7 orders for 5 units, one of them quantity 2: the batch cannot be
	// taken whole, so it goes order by order and the tail still sells.
	reqs := []orderdb.Request{req(item, 1, 1), req(item, 2, 2), req(item, 3, 1), req(item, 4, 1), req(item, 5, 1), req(item, 6, 1), req(item, 7, 1)}
	out, err := db.Fulfil(ctx, item, reqs)
	if err != nil {
		t.Fatal(err)
	}
	units := 0
	failed := 0
	for _, r := range reqs {
		o := out[r.Event.OrderNo]
		switch o.Status {
		case order.Created:
			units += r.Event.Quantity
		case order.Failed:
			failed++
			if o.Reason != order.ReasonOutOfStock {
				t.Fatalf("reason = %q", o.Reason)
			}
		default:
			t.Fatalf("order %s: %+v", r.Event.OrderNo, o)
		}
	}
	if units != 5 || failed != 3 {
		t.Fatalf("sold %d units with %d failed, want 5 and 3", units, failed)
	}
	if s, _ := db.ItemStock(ctx, item); s != 0 {
		t.Fatalf("stock = %d, want 0", s)
	}
	// Redelivery: nothing changes.
	again, err := db.Fulfil(ctx, item, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if !again[r.Event.OrderNo].Existing || again[r.Event.OrderNo].Status != out[r.Event.OrderNo].Status {
			t.Fatalf("redelivery changed %s: %+v", r.Event.OrderNo, again[r.Event.OrderNo])
		}
	}
}

func TestFulfilAlreadyPurchased(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 10)
	ctx := context.Background()
	first, second := req(item, 1, 1), req(item, 1, 1)
	out, err := db.Fulfil(ctx, item, []orderdb.Request{first, second})
	if err != nil {
		t.Fatal(err)
	}
	if out[first.Event.OrderNo].Status != order.Created || out[second.Event.OrderNo].Reason != order.ReasonAlreadyPurchased {
		t.Fatalf("outcomes: %+v", out)
	}
	if s, _ := db.ItemStock(ctx, item); s != 9 {
		t.Fatalf("stock = %d, want 9", s)
	}
}

func TestFulfilConcurrentBatchesNeverOversell(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 100)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var reqs []orderdb.Request
			for u := range 30 {
				reqs = append(reqs, req(item, int64(w*100+u+1), 1))
			}
			out, err := db.Fulfil(ctx, item, reqs)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, o := range out {
				if o.Status == order.Created {
					created++
				}
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	live, _ := db.LiveOrderCount(ctx, item)
	s, _ := db.ItemStock(ctx, item)
	if created != 100 || live != 100 || s != 0 {
		t.Fatalf("created %d, live %d, stock %d; want 100, 100, 0", created, live, s)
	}
}

func TestOrderNotFound(t *testing.T) {
	t.Parallel()
	db, _ := setup(t, 1)
	if _, err := db.Order(context.Background(), "nope"); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}
