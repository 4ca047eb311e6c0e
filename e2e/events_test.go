package e2e_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/hooktest"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/eventcheck"
)

// streams is the events each order's stream got, duplicates dropped by
// id, in the order of their first arrival; it fails the test when one
// arrives out of seq order.
func streams(t *testing.T, where string, evs []outbox.Event) map[string][]outbox.Event {
	t.Helper()
	seen := map[string]bool{}
	out := map[string][]outbox.Event{}
	for _, e := range evs {
		if seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		s := out[e.Stream()]
		if e.Data.Seq != len(s)+1 {
			t.Fatalf("%s: %s's event %s (seq %d) came after %d of its events", where, e.Stream(), e.ID, e.Data.Seq, len(s))
		}
		out[e.Stream()] = append(s, e)
	}
	return out
}

// story is an order's events as types and reasons, for the test's eyes.
func story(evs []outbox.Event) string {
	s := ""
	for _, e := range evs {
		s += fmt.Sprintf("%s(%s/%s) ", e.Type, e.Data.Status, e.Data.Reason)
	}
	return s
}

// A shop registers an endpoint before its sales. Orders are paid,
// cancelled by their buyers, closed unpaid, refused by MySQL (its stock
// below Redis's) and closed by the sale's cancel. A draw of two units has
// four entrants: a winner cancels, the first alternate is promoted, the
// operator ends the sale and the second alternate is not selected. The
// endpoint gets every one of their events, signed, once each by id, each
// order's and entry's in seq order, an order's last stating its status in
// MySQL; the Kafka topic carries the same events.
func TestAShopHearsEveryOrderEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 2})
	topic := kafkatest.NewTopicOn(t, p.Brokers(), 2)
	api := p.StartAPI(pipelinetest.HookSettings(topic)...)
	shop := hooktest.New(t)
	ep := api.RegisterHook(t, shop, "*")
	p.StartConsumer(append(pipelinetest.HookSettings(topic), "SECKILL_PAYMENT_WINDOW=3s", "SECKILL_CLOSER_EVERY=200ms", "SECKILL_DRAW_EVERY=200ms")...)

	sale := api.CreateSale(6, 1)
	paid := buy(t, p, api, 1, "a", sale.ActivityID)
	if code, b := act(t, api, "1", paid, "pay"); code != 200 || b.Status != "PAID" {
		t.Fatalf("pay: %d %+v", code, b)
	}
	cancelled := buy(t, p, api, 2, "b", sale.ActivityID)
	if code, b := act(t, api, "2", cancelled, "cancel"); code != 200 || b.Status != "CLOSED" {
		t.Fatalf("cancel: %d %+v", code, b)
	}
	unpaid := buy(t, p, api, 3, "c", sale.ActivityID)
	// MySQL's stock falls below Redis's: the next order is refused there.
	if err := p.DB.Gorm().Exec("UPDATE item_stock SET stock = 0 WHERE item_id = ?", sale.ItemID).Error; err != nil {
		t.Fatal(err)
	}
	pl, err := api.PlaceOrder(4, "d", sale.ActivityID, 1)
	if err != nil || pl.Code != 202 {
		t.Fatalf("order 4: %+v %v", pl, err)
	}
	refused := pl.OrderNo
	if o := p.WaitFinal(map[string]int64{refused: 4}, 30*time.Second)[refused]; o.Status != order.Failed {
		t.Fatalf("order %s: %+v, want FAILED", refused, o)
	}
	other := api.CreateSale(2, 1)
	inCancelledSale := buy(t, p, api, 5, "e", other.ActivityID)
	if code, err := api.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/cancel", other.ActivityID), 0, "admin", nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("cancel sale: %d %v", code, err)
	}
	waittest.Until(t, 30*time.Second, "the unpaid order closes", func() bool {
		o, err := p.DB.Orders.Order(ctx, unpaid)
		return err == nil && o.Status == order.Closed
	})

	// The draw: its orders wait for payment longer than the test runs.
	drawn, users := drawOfTwo(t, p, api, 30*time.Minute)
	winners := []pipelinetest.Entry{myEntry(t, api, drawn, users[0]), myEntry(t, api, drawn, users[1])}
	if code, err := api.Do("POST", fmt.Sprintf("/api/v1/orders/%s/cancel", winners[0].OrderNo), users[0], "", nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("a winner cancels: %d %v", code, err)
	}
	waittest.UntilEvery(t, 60*time.Second, 200*time.Millisecond, "the first alternate's order CREATED", func() bool {
		e, status := entryOf(t, p, api, drawn, users[2])
		return e.State == "WON" && status == "CREATED"
	})
	if code, err := api.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/end", drawn.ActivityID), 0, "admin", nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("end the draw's sale: %d %v", code, err)
	}
	waittest.UntilEvery(t, 30*time.Second, 200*time.Millisecond, "the draw settled", func() bool {
		return p.Count("SELECT COUNT(*) FROM activity_draws WHERE activity_id = ? AND settled_at IS NOT NULL", drawn.ActivityID) == 1
	})
	promoted, left := myEntry(t, api, drawn, users[2]), myEntry(t, api, drawn, users[3])
	p.WaitEventsDrained(t, 60*time.Second, ep)

	if err := shop.Invalid(); err != nil {
		t.Fatalf("deliveries refused by the endpoint: %v", err)
	}
	got := streams(t, "the endpoint", shop.Arrivals())
	want := map[string][]outbox.Type{
		paid:                                   {outbox.OrderCreated, outbox.OrderPaid},
		cancelled:                              {outbox.OrderCreated, outbox.OrderClosed},
		unpaid:                                 {outbox.OrderCreated, outbox.OrderClosed},
		refused:                                {outbox.OrderFailed},
		inCancelledSale:                        {outbox.OrderCreated, outbox.OrderClosed},
		winners[0].OrderNo:                     {outbox.OrderCreated, outbox.OrderClosed},
		winners[1].OrderNo:                     {outbox.OrderCreated},
		promoted.OrderNo:                       {outbox.OrderCreated},
		outbox.EntryStream(winners[0].EntryID): {outbox.EntryWon},
		outbox.EntryStream(winners[1].EntryID): {outbox.EntryWon},
		outbox.EntryStream(promoted.EntryID):   {outbox.EntryAlternate, outbox.EntryPromoted},
		outbox.EntryStream(left.EntryID):       {outbox.EntryAlternate, outbox.EntryNotSelected},
	}
	reasons := map[string]string{cancelled: order.ReasonCancelled, unpaid: order.ReasonPaymentTimeout,
		refused: order.ReasonOutOfStock, inCancelledSale: order.ReasonSaleCancelled, winners[0].OrderNo: order.ReasonCancelled}
	if len(got) != len(want) {
		t.Fatalf("the endpoint heard of %d orders and entries, want %d", len(got), len(want))
	}
	for no, types := range want {
		evs := got[no]
		var have []outbox.Type
		for _, e := range evs {
			have = append(have, e.Type)
		}
		if !reflect.DeepEqual(have, types) {
			t.Fatalf("%s: the endpoint heard %s, want %v", no, story(evs), types)
		}
		if _, entry := outbox.EntryOfStream(no); entry {
			continue
		}
		o, err := p.DB.Orders.Order(ctx, no)
		if err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1]
		if last.Data.Status != string(o.Status) || last.Data.Reason != reasons[no] || last.Data.Subject != o.UserID {
			t.Fatalf("order %s: its last event %+v; MySQL holds %s (%s)", no, last.Data, o.Status, o.FailureReason)
		}
	}
	if e := got[outbox.EntryStream(promoted.EntryID)][1]; e.Data.OrderNo != promoted.OrderNo {
		t.Fatalf("entry.promoted names order %q; the alternate's order is %s", e.Data.OrderNo, promoted.OrderNo)
	}
	if e := got[outbox.EntryStream(left.EntryID)][1]; e.Data.Reason != "SALE_ENDED" {
		t.Fatalf("entry.not_selected: reason %q, want SALE_ENDED", e.Data.Reason)
	}
	// The topic carries the same events.
	inKafka := kafkatest.ReadEvents(t, topic)
	topicStreams := streams(t, "the topic", inKafka)
	for no, evs := range got {
		if !reflect.DeepEqual(evs, topicStreams[no]) {
			t.Fatalf("order %s: the endpoint heard %s; the topic has %s", no, story(evs), story(topicStreams[no]))
		}
	}
	if len(topicStreams) != len(got) {
		t.Fatalf("the topic has events of %d orders, the endpoint of %d", len(topicStreams), len(got))
	}
	// The project's checker finds both streams complete against MySQL.
	checker := &eventcheck.Checker{Tx: p.DB, Store: p.DB.Streams}
	for where, evs := range map[string][]outbox.Event{"the endpoint": shop.Arrivals(), "the topic": inKafka} {
		r, err := checker.Check(ctx, []int64{sale.ActivityID, other.ActivityID, drawn.ActivityID}, evs)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() || r.Orders != 8 || r.Entries != 4 {
			t.Fatalf("%s: %s", where, r)
		}
	}
}
