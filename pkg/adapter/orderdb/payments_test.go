package orderdb_test

import (
	"context"
	"testing"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/payment"
)

// A payment recorded in a unit whose snapshot was taken before the buyer's
// cancel committed (the payments service writes its refund.owed event in
// that unit, from the order RecordPayment returns): the payment is a
// refund, decided on the CLOSED order, and the order returned is CLOSED
// too, not the CREATED of the unit's snapshot, so the event states the
// status MySQL has.
func TestARefundReturnsTheOrderItWasDecidedOn(t *testing.T) {
	t.Parallel()
	eur := order.Money{Amount: 1500, Currency: "EUR"}
	db, item := setup(t, 10)
	ctx := context.Background()
	r := req(item, 1, 1)
	r.UnitPrice = eur
	no := r.Event.OrderNo
	if out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{r}); err != nil || out[no].Status != order.Created {
		t.Fatalf("fixture order %+v (%v), want CREATED", out[no], err)
	}

	var rec payment.Recorded
	err := db.InTx(ctx, func(ctx context.Context) error {
		// A plain read fixes the unit's snapshot: the order CREATED.
		if o, err := db.Orders.Order(ctx, no); err != nil || o.Status != order.Created {
			t.Fatalf("in the unit: %+v (%v)", o, err)
		}
		// The buyer's cancel commits outside the unit.
		if tr, err := db.Orders.CloseOrder(context.Background(), r.Event.UserID, no, order.ReasonCancelled); err != nil || tr.Order.Status != order.Closed {
			t.Fatalf("cancel: %+v (%v)", tr, err)
		}
		var err error
		rec, err = db.Payments.RecordPayment(ctx, payment.Transaction{TransactionID: "tx-after-cancel", OrderNo: no, Amount: eur})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Payment.Outcome != payment.Refund || rec.Closed {
		t.Fatalf("payment of a cancelled order: %+v, want a refund that closed nothing", rec)
	}
	if rec.Order.Status != order.Closed || rec.Order.FailureReason != order.ReasonCancelled {
		t.Fatalf("the order returned with the refund is %s (%s); MySQL has it CLOSED (CANCELLED)", rec.Order.Status, rec.Order.FailureReason)
	}
}
