package httpapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

// The buyer pays an order of a sale that was cancelled a moment ago, before
// the cancel's closer reached the order: 409 ORDER_NOT_PAYABLE, and the
// order stays unpaid for the closer. An order of a sale still running pays.
func TestPayOfACancelledSale(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	f := newListFixture(t, ts, 10)
	ctx := context.Background()
	cancelled, running := f.activity(), f.activity()
	late, fine := f.created(7, cancelled, 1), f.created(7, running, 1)
	if _, err := ts.db.Activities.EndActivity(ctx, cancelled, time.Now(), activity.CancelNow); err != nil {
		t.Fatal(err)
	}
	pay := func(no string) response {
		return ts.do(t, ts.url, request{method: "POST", path: fmt.Sprintf("/api/v1/orders/%s/pay", no), token: buyerToken(t, 7)})
	}
	wantError(t, pay(late), 409, "ORDER_NOT_PAYABLE")
	if o, err := ts.db.Orders.Order(ctx, late); err != nil || o.Status != order.Created {
		t.Fatalf("the order of the cancelled sale after the refused pay: %+v %v, want CREATED (the closer closes it)", o, err)
	}
	if r := pay(fine); r.status != 200 {
		t.Fatalf("pay of the running sale's order: %d %s", r.status, r.body)
	}
	if o, err := ts.db.Orders.Order(ctx, fine); err != nil || o.Status != order.Paid {
		t.Fatalf("the running sale's order: %+v %v, want PAID", o, err)
	}
}
