package outbox_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/schematest"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// Every kind of event, as the services build it, follows the documented
// schema; an event missing what its kind needs does not.
func TestEventsFollowTheSchema(t *testing.T) {
	o := order.Order{OrderNo: "01ABC-1", UserID: "alice", ItemID: 3, ActivityID: 2, Quantity: 1, Status: order.Created,
		IdempotencyKey: order.DrawKey("e1"), Amount: order.Money{Amount: 900, Currency: "EUR"}}
	closed := o
	closed.Status, closed.FailureReason = order.Closed, order.ReasonCancelled
	failed := o
	failed.Status, failed.FailureReason, failed.Amount = order.Failed, order.ReasonOutOfStock, order.Money{}
	pick := draw.Picked{ActivityID: 2, EntryID: "e1", Rank: 4, ItemID: 3, Quantity: 1, UserID: "alice", Outcome: draw.Alternate}
	promoted := pick
	promoted.OrderNo = o.OrderNo
	good := []outbox.Event{outbox.New(o), outbox.New(failed), outbox.Of(outbox.OrderPaid, o), outbox.Of(outbox.OrderClosed, closed),
		outbox.Refund(closed, "tx-1", o.Amount), outbox.Drawn(2, pick), outbox.Promoted(promoted),
		outbox.NotSelected(pick, order.ReasonSaleEnded), outbox.NotSelected(pick, order.ReasonSaleCancelled)}
	for i, e := range good {
		e.Data.Seq = max(e.Data.Seq, 2)
		e.ID, e.Time = outbox.IDOf(e.Stream(), e.Data.Seq), time.Now().UTC()
		if err := e.Check(); err != nil {
			t.Fatal(err)
		}
		if err := schematest.CheckEvent(t, e); err != nil {
			t.Fatalf("event %d (%s) does not follow the schema: %v", i, e.Type, err)
		}
	}
	if good[0].Data.EntryID != "e1" || good[5].Stream() != "entry_e1" {
		t.Fatalf("a draw's order names its entry (%q); an entry's stream is its own (%q)", good[0].Data.EntryID, good[5].Stream())
	}
	for _, e := range good[5:] {
		if e.Stream() != "entry_e1" || e.Data.SaleID != 2 || e.Data.Rank != 4 || e.Data.Subject != "alice" {
			t.Fatalf("an entry's event %+v: stream %s", e, e.Stream())
		}
	}
	if p := good[6].Data; p.OrderNo != o.OrderNo || p.Status != outbox.StatusPromoted || p.Seq != 0 {
		t.Fatalf("entry.promoted: %+v (numbered when recorded)", p)
	}
	if n := good[7].Data; n.Status != outbox.StatusNotSelected || n.Reason != order.ReasonSaleEnded || n.OrderNo != "" || n.Seq != 0 {
		t.Fatalf("entry.not_selected: %+v", n)
	}
	noOrder := good[2]
	noOrder.Data.OrderNo = ""
	noRank := good[5]
	noRank.Data.Rank = 0
	promotedToNothing := good[6]
	promotedToNothing.Data.OrderNo = ""
	noReason := good[7]
	noReason.Data.Reason = ""
	for _, e := range []outbox.Event{noOrder, noRank, promotedToNothing, noReason} {
		e.Data.Seq = 2
		e.ID = outbox.IDOf(e.Stream(), 2)
		if schematest.CheckEvent(t, e) == nil {
			t.Fatalf("the schema takes %+v", e)
		}
	}
	if promotedToNothing.Check() == nil {
		t.Fatal("Check takes an entry.promoted without its order")
	}
}
