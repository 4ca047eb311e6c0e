package fulfilment_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/fulfilment"
)

// Three consumers write one batch at once, then it is delivered again: the
// batch cannot be taken whole (more units than stock, a buyer twice), so
// it goes order by order. Each order MySQL wrote has exactly one event,
// its first (seq 1), written with it: order.created for the orders that
// got stock, order.failed with MySQL's reason for the others; the writes
// that found the order written and the redelivery add none.
func TestEachWrittenOrderHasItsFirstEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := mysqltest.New(t)
	a := db.OpenSale(t, 5, order.Money{Amount: 700, Currency: "JPY"})
	gen := order.NewNumberGenerator()
	var reqs []order.FulfilRequest
	for u := 1; u <= 9; u++ {
		user := strconv.Itoa(min(u, 8)) // user 8 orders twice
		reqs = append(reqs, order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: gen.Next(a.ItemID),
			IdempotencyKey: "k" + strconv.Itoa(u), UserID: user, ItemID: a.ItemID, ActivityID: a.ID, Quantity: 1, ReservedAt: time.Now()},
			PayDeadline: time.Now().Add(time.Hour), UnitPrice: order.Money{Amount: 700, Currency: "JPY"}})
	}
	svc := &fulfilment.Service{Tx: db, Orders: db.Orders, Events: db.Outbox, Draws: db.Draws}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := svc.Fulfil(ctx, reqs); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if _, err := svc.Fulfil(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	created := 0
	for _, r := range reqs {
		o, err := db.Orders.Order(ctx, r.Event.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := db.Outbox.Stream(ctx, r.Event.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		want := outbox.OrderCreated
		if o.Status == order.Failed {
			want = outbox.OrderFailed
		} else {
			created++
		}
		if len(evs) != 1 {
			t.Fatalf("order %s (%s): %d events, want 1: %+v", o.OrderNo, o.Status, len(evs), evs)
		}
		e := evs[0]
		if e.Type != want || e.Data.Seq != 1 || e.ID != outbox.IDOf(o.OrderNo, 1) || order.Status(e.Data.Status) != o.Status ||
			e.Data.Reason != o.FailureReason || e.Data.Subject != o.UserID || e.Data.Amount == nil || *e.Data.Amount != 700 ||
			e.Data.Currency != "JPY" || e.Time.IsZero() {
			t.Fatalf("order %+v: event %+v", o, e)
		}
	}
	if created != 5 {
		t.Fatalf("%d orders created from 5 units", created)
	}
}
