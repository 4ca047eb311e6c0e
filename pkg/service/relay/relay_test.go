package relay_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/relaytest"
	"github.com/seckill/seckill/internal/testkit/schematest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// Orders are written and paid while three relays run, one of which dies
// after publishing its first batches and before marking them. Once the
// outbox is drained, Kafka holds every event MySQL committed, by its id,
// keyed by its order number, and each order's events, duplicates dropped
// by id, come in seq order 1, 2, ...; the dead relay's batches are there
// twice with the same ids.
func TestRelayPublishesEveryEventInOrderAtLeastOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := mysqltest.New(t)
	topic := kafkatest.NewTopic(t, 6)
	w := orderevents.NewOutboxWriter(orderevents.Config{Brokers: kafkatest.Brokers()}, topic)
	t.Cleanup(func() { _ = w.Close() })

	a := db.OpenSale(t, 100, order.Money{Amount: 900, Currency: "EUR"})
	// Three relays, one of which dies after publishing its first two
	// batches and before marking them.
	stop := relaytest.Run(db, 7, w, w, relaytest.Dying(w, 2))

	gen := order.NewNumberGenerator()
	var reqs []order.FulfilRequest
	for u := 1; u <= 60; u++ {
		reqs = append(reqs, order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: gen.Next(a.ItemID),
			IdempotencyKey: "k", UserID: strconv.Itoa(u), ItemID: a.ItemID, ActivityID: a.ID, Quantity: 1, ReservedAt: time.Now()},
			PayDeadline: time.Now().Add(time.Hour), UnitPrice: order.Money{Amount: 900, Currency: "EUR"}})
	}
	for i := 0; i < len(reqs); i += 10 {
		if _, err := mysqltest.Fulfil(ctx, db.DB, reqs[i:i+10]); err != nil {
			t.Fatal(err)
		}
	}
	svc := &lifecycle.Service{Tx: db, Events: db.Outbox, DB: db.Orders, Payments: db.Payments, Log: slog.New(slog.DiscardHandler)}
	for i, r := range reqs {
		if i%2 == 0 {
			if _, err := svc.Pay(ctx, r.Event.UserID, r.Event.OrderNo); err != nil {
				t.Fatal(err)
			}
		}
	}
	relaytest.WaitDrained(t, db)
	stop()

	committed, _, err := db.Outbox.Since(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) != 90 {
		t.Fatalf("%d events in the outbox, want 60 created and 30 paid", len(committed))
	}
	if schematest.Check(t, []byte(`{"id": "evt_x_1", "type": "order.paid", "timestamp": "2026-12-03T10:00:00Z",
		"data": {"order_no": "x", "sale_id": 1, "item_id": 1, "quantity": 1, "subject": "1", "status": "PAID"}}`)) == nil {
		t.Fatal("the schema takes an event without its seq")
	}
	inKafka := map[string]outbox.Event{}
	next := map[string]int{} // by order: the seq the stream is at
	copies := 0
	for _, msgs := range kafkatest.ReadAll(t, topic) {
		for _, m := range msgs {
			if err := schematest.Check(t, m.Value); err != nil {
				t.Fatalf("event %s does not follow docs/schemas/order-event.schema.json: %v", m.Value, err)
			}
			var e outbox.Event
			if err := json.Unmarshal(m.Value, &e); err != nil {
				t.Fatal(err)
			}
			if string(m.Key) != e.Data.OrderNo {
				t.Fatalf("event %s keyed %q", e.ID, m.Key)
			}
			if _, seen := inKafka[e.ID]; seen {
				copies++
				continue
			}
			inKafka[e.ID] = e
			if e.Data.Seq != next[e.Data.OrderNo]+1 {
				t.Fatalf("order %s: seq %d after %d", e.Data.OrderNo, e.Data.Seq, next[e.Data.OrderNo])
			}
			next[e.Data.OrderNo] = e.Data.Seq
		}
	}
	for _, e := range committed {
		got, ok := inKafka[e.ID]
		if !ok || got.Type != e.Type || !reflect.DeepEqual(got.Data, e.Data) || !got.Time.Equal(e.Time) {
			t.Fatalf("event %+v: in Kafka %v as %+v", e, ok, got)
		}
	}
	if len(inKafka) != len(committed) || copies == 0 {
		t.Fatalf("%d events in Kafka (%d copies), %d committed; the dead relay's batches should be there twice",
			len(inKafka), copies, len(committed))
	}
}
