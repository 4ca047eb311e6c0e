package orderdb_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

var gen = order.NewNumberGenerator()

// req is an order with an Idempotency-Key of its own.
func req(item, user int64, qty int) order.FulfilRequest {
	return reqKey(item, user, qty, "k"+strconv.FormatUint(keySeq.Add(1), 10))
}

var keySeq atomic.Uint64

// reqKey is an order (a new order number) sent with key.
func reqKey(item, user int64, qty int, key string) order.FulfilRequest {
	return order.FulfilRequest{Event: order.Event{
		Version: order.EventVersion, OrderNo: gen.Next(item), IdempotencyKey: key, UserID: strconv.FormatInt(user, 10),
		ItemID: item, ActivityID: 1, Quantity: qty, ReservedAt: time.Now(),
	}, PayDeadline: time.Now().Add(30 * time.Minute)}
}

func setup(t *testing.T, stock int64) (*mysqltest.DB, int64) {
	t.Helper()
	db := mysqltest.New(t)
	ctx := context.Background()
	it, err := db.Activities.CreateItem(ctx, "sneaker", stock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), PerUserLimit: 10}); err != nil {
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
	if err := db.Activities.SetItemStock(ctx, item, -1); err == nil {
		t.Fatal("stock -1 accepted; the CHECK constraint must refuse it")
	}
}

func TestFulfilBatchAndTail(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 5)
	ctx := context.Background()
	// 7 orders for 5 units, one of them quantity 2: the batch cannot be
	// taken whole, so it goes order by order and the tail still sells.
	reqs := []order.FulfilRequest{req(item, 1, 1), req(item, 2, 2), req(item, 3, 1), req(item, 4, 1), req(item, 5, 1), req(item, 6, 1), req(item, 7, 1)}
	out, err := mysqltest.Fulfil(ctx, db.DB, reqs)
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
	if s, err := db.Activities.ItemStock(ctx, item); err != nil || s != 0 {
		t.Fatalf("stock = %d %v, want 0", s, err)
	}
	// Redelivery: nothing changes.
	again, err := mysqltest.Fulfil(ctx, db.DB, reqs)
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
	out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{first, second})
	if err != nil {
		t.Fatal(err)
	}
	if out[first.Event.OrderNo].Status != order.Created || out[second.Event.OrderNo].Reason != order.ReasonAlreadyPurchased {
		t.Fatalf("outcomes: %+v", out)
	}
	if s, _ := db.Activities.ItemStock(ctx, item); s != 9 {
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
			var reqs []order.FulfilRequest
			for u := range 30 {
				reqs = append(reqs, req(item, int64(w*100+u+1), 1))
			}
			out, err := mysqltest.Fulfil(ctx, db.DB, reqs)
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
	live, err := db.Orders.LiveOrderCount(ctx, item)
	if err != nil {
		t.Fatal(err)
	}
	s, err := db.Activities.ItemStock(ctx, item)
	if err != nil || created != 100 || live != 100 || s != 0 {
		t.Fatalf("created %d, live %d, stock %d %v; want 100, 100, 0", created, live, s, err)
	}
}

func TestOrderNotFound(t *testing.T) {
	t.Parallel()
	db, _ := setup(t, 1)
	if _, err := db.Orders.Order(context.Background(), "nope"); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}

// The API's FAILED record and the consumer's CREATED row race on the order
// number: whoever writes first decides, every other writer sees that
// decision, and a FAILED record takes no stock.
func TestAbandonRacesFulfil(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 100)
	ctx := context.Background()
	reqs := make([]order.FulfilRequest, 50)
	for i := range reqs {
		reqs[i] = req(item, int64(i+1), 1)
	}
	var (
		wg        sync.WaitGroup
		abandoned = make([]order.Order, len(reqs))
		fulfilled = make([]order.FulfilOutcome, len(reqs))
		errs      = make(chan error, 2*len(reqs))
	)
	for i, r := range reqs {
		wg.Add(2)
		go func() {
			defer wg.Done()
			o, _, err := db.Orders.Abandon(ctx, r.Event, order.ReasonPublishFailed)
			abandoned[i] = o
			errs <- err
		}()
		go func() {
			defer wg.Done()
			out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{r})
			fulfilled[i] = out[r.Event.OrderNo]
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	created := 0
	for i, r := range reqs {
		final, err := db.Orders.Order(ctx, r.Event.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		if abandoned[i].Status != final.Status || fulfilled[i].Status != final.Status {
			t.Fatalf("order %d: the API saw %s, the consumer %s, MySQL holds %s", i, abandoned[i].Status, fulfilled[i].Status, final.Status)
		}
		switch final.Status {
		case order.Created:
			created++
		case order.Failed:
			if final.FailureReason != order.ReasonPublishFailed {
				t.Fatalf("order %d failed for %q", i, final.FailureReason)
			}
		default:
			t.Fatalf("order %d ended %s", i, final.Status)
		}
	}
	stock, err := db.Activities.ItemStock(ctx, item)
	if err != nil {
		t.Fatal(err)
	}
	if stock != int64(100-created) {
		t.Fatalf("stock %d after %d orders created of 100", stock, created)
	}
	t.Logf("%d created, %d recorded FAILED", created, len(reqs)-created)

	// A second Abandon of a decided order changes nothing.
	again, _, err := db.Orders.Abandon(ctx, reqs[0].Event, order.ReasonReserveFailed)
	if err != nil || again.Status != abandoned[0].Status || again.FailureReason != abandoned[0].FailureReason {
		t.Fatalf("second abandon: %+v, %v; first saw %+v", again, err, abandoned[0])
	}
}

// One batch holds the orders of several items of one sale (its sizes): one
// transaction takes each item's units with its own conditional update, and
// when one item is short the batch goes order by order, so the other items
// sell in full and the short one sells its exact tail.
func TestFulfilOrdersOfSeveralItems(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	var items []int64
	for _, stock := range []int64{3, 1} {
		it, err := db.Activities.CreateItem(ctx, "size", stock)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, it.ID)
	}
	now := time.Now()
	act, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: items[0], StartsAt: now, EndsAt: now.Add(time.Hour), PerUserLimit: 1,
		Items: []activity.Item{{ItemID: items[0], Label: "S"}, {ItemID: items[1], Label: "M"}}})
	if err != nil {
		t.Fatal(err)
	}
	sized := func(item, user int64) order.FulfilRequest {
		r := req(item, user, 1)
		r.Event.ActivityID, r.Event.OrderNo = act.ID, gen.Next(items[0])
		return r
	}
	// Both fit: one transaction.
	fit := []order.FulfilRequest{sized(items[0], 1), sized(items[1], 2), sized(items[0], 3)}
	out, err := mysqltest.Fulfil(ctx, db.DB, fit)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range fit {
		if out[r.Event.OrderNo].Status != order.Created {
			t.Fatalf("outcomes %+v, want every order CREATED", out)
		}
	}
	// The second item has nothing left: the first still sells its last unit.
	short := []order.FulfilRequest{sized(items[1], 4), sized(items[0], 5), sized(items[1], 6)}
	out, err = mysqltest.Fulfil(ctx, db.DB, short)
	if err != nil {
		t.Fatal(err)
	}
	if out[short[0].Event.OrderNo].Reason != order.ReasonOutOfStock || out[short[1].Event.OrderNo].Status != order.Created ||
		out[short[2].Event.OrderNo].Reason != order.ReasonOutOfStock {
		t.Fatalf("outcomes %+v, want the second item OUT_OF_STOCK and the first CREATED", out)
	}
	for i, want := range []int64{0, 0} {
		if s, _ := db.Activities.ItemStock(ctx, items[i]); s != want {
			t.Fatalf("item %d stock %d, want %d", i, s, want)
		}
	}
}
