package fulfil_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/consumer/internal/fulfil"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// An order records the sale's price at the time it is written: the unit
// price, amount = unit price × quantity, and the currency; a sale without
// a price writes orders without one, as before prices existed.
func TestHandleRecordsThePrice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	cases := []struct {
		name      string
		listPrice order.Money // the item's
		salePrice order.Money // the activity's own; zero takes the item's
		qty       int
		want      order.Money // unit price recorded
	}{
		{name: "sale price of its own", listPrice: order.Money{Amount: 2500, Currency: "EUR"},
			salePrice: order.Money{Amount: 1999, Currency: "EUR"}, qty: 3, want: order.Money{Amount: 1999, Currency: "EUR"}},
		{name: "the item's price by default", listPrice: order.Money{Amount: 700, Currency: "JPY"}, qty: 2,
			want: order.Money{Amount: 700, Currency: "JPY"}},
		{name: "free", listPrice: order.Money{Amount: 0, Currency: "USD"}, qty: 1, want: order.Money{Amount: 0, Currency: "USD"}},
		{name: "no price", qty: 2},
	}
	for i, c := range cases {
		it, err := e.db.Activities.CreatePricedItem(ctx, "priced", 10, c.listPrice)
		if err != nil {
			t.Fatal(err)
		}
		act, err := e.db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: time.Now().Add(-time.Hour),
			EndsAt: time.Now().Add(time.Hour), PerUserLimit: 5, SalePrice: c.salePrice})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Stock.Warmup(ctx, reservation.One(it.ID), 2*time.Hour, func(ctx context.Context) (int64, error) { return 10, nil }); err != nil {
			t.Fatal(err)
		}
		ev := e.reserve(sale{item: it.ID, activity: act.ID}, int64(100+i), c.qty)
		if res := e.handler.Handle(ctx, []order.Event{ev}); fulfil.OutcomeOf(res[0]) != fulfil.Created {
			t.Fatalf("%s: outcome %s (%v), want Created", c.name, fulfil.OutcomeOf(res[0]), res[0].Err)
		}
		o, err := e.db.Orders.Order(ctx, ev.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		wantAmount := c.want.Times(c.qty)
		if o.UnitPrice != c.want || o.Amount != wantAmount {
			t.Errorf("%s: unit price %v, amount %v; want %v and %v", c.name, o.UnitPrice, o.Amount, c.want, wantAmount)
		}
		if got := e.state(ev); got != reservation.StateConfirmed {
			t.Errorf("%s: reservation %s, want CONFIRMED", c.name, got)
		}
	}
}
