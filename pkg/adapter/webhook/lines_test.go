package webhook_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// What the receiver writes reads back as the events delivered, in the
// order they arrived, a redelivery left out as the receiver left it out.
func TestReadEventsReadsTheReceiversLines(t *testing.T) {
	secret, _ := newSecret(t)
	rc, events, _ := receiver(t, secret)
	now := time.Now()
	bodies := []struct{ id, body string }{
		{"evt_A-1_1", `{"type":"order.created","timestamp":"2026-12-03T21:00:00.123456Z","data":{"order_no":"A-1","sale_id":2,"item_id":3,"quantity":1,"amount":900,"currency":"EUR","subject":"alice","status":"CREATED","seq":1}}`},
		{"evt_entry_e1_1", `{"type":"entry.won","timestamp":"2026-12-03T21:00:01Z","data":{"entry_id":"e1","sale_id":2,"item_id":3,"quantity":1,"subject":"bob","status":"WON","rank":1,"seq":1}}`},
		{"evt_A-1_1", `{"type":"order.created","timestamp":"2026-12-03T21:00:00.123456Z","data":{"order_no":"A-1","sale_id":2,"item_id":3,"quantity":1,"amount":900,"currency":"EUR","subject":"alice","status":"CREATED","seq":1}}`},
		{"evt_A-1_2", `{"type":"order.paid","timestamp":"2026-12-03T21:00:02.5Z","data":{"order_no":"A-1","sale_id":2,"item_id":3,"quantity":1,"amount":900,"currency":"EUR","subject":"alice","status":"PAID","seq":2}}`},
	}
	for _, b := range bodies {
		if code := deliver(t, rc, secret, b.id, now, b.body); code != 204 {
			t.Fatalf("deliver %s: %d", b.id, code)
		}
	}
	got, err := webhook.ReadEvents(strings.NewReader("\n" + events.String() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	amount := int64(900)
	want := []outbox.Event{
		{ID: "evt_A-1_1", Type: outbox.OrderCreated, Time: time.Date(2026, 12, 3, 21, 0, 0, 123456000, time.UTC),
			Data: outbox.Data{OrderNo: "A-1", SaleID: 2, ItemID: 3, Quantity: 1, Amount: &amount, Currency: "EUR", Subject: "alice", Status: "CREATED", Seq: 1}},
		{ID: "evt_entry_e1_1", Type: outbox.EntryWon, Time: time.Date(2026, 12, 3, 21, 0, 1, 0, time.UTC),
			Data: outbox.Data{EntryID: "e1", SaleID: 2, ItemID: 3, Quantity: 1, Subject: "bob", Status: "WON", Rank: 1, Seq: 1}},
		{ID: "evt_A-1_2", Type: outbox.OrderPaid, Time: time.Date(2026, 12, 3, 21, 0, 2, 500000000, time.UTC),
			Data: outbox.Data{OrderNo: "A-1", SaleID: 2, ItemID: 3, Quantity: 1, Amount: &amount, Currency: "EUR", Subject: "alice", Status: "PAID", Seq: 2}},
	}
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Type != w.Type || !g.Time.Equal(w.Time) || !reflect.DeepEqual(g.Data, w.Data) {
			t.Fatalf("event %d: %+v, want %+v", i, g, w)
		}
	}
}

func TestReadEventsRefusesALineThatIsNoEvent(t *testing.T) {
	good := `{"id":"evt_A-1_1","type":"order.created","timestamp":"2026-12-03T21:00:00Z","data":{"order_no":"A-1","seq":1}}`
	tests := []struct {
		name, line, says string
	}{
		{"not JSON", `evt_A-1_2 order.paid`, "line 2: not an event"},
		{"a field the schema has not", `{"id":"evt_A-1_2","type":"order.paid","timestamp":"2026-12-03T21:00:00Z","data":{"order_no":"A-1","seq":2,"note":"x"}}`, `line 2: not an event: json: unknown field "note"`},
		{"no id", `{"type":"order.paid","timestamp":"2026-12-03T21:00:00Z","data":{"order_no":"A-1","seq":2}}`, "line 2: an event without an id"},
		{"no type", `{"id":"evt_A-1_2","timestamp":"2026-12-03T21:00:00Z","data":{"order_no":"A-1","seq":2}}`, "line 2: event evt_A-1_2 has no type"},
		{"no timestamp", `{"id":"evt_A-1_2","type":"order.paid","data":{"order_no":"A-1","seq":2}}`, "line 2: event evt_A-1_2 has no timestamp"},
		{"a bad timestamp", `{"id":"evt_A-1_2","type":"order.paid","timestamp":"yesterday","data":{}}`, "line 2: not an event"},
		{"two values", good + " " + good, "line 2: not an event: more than one JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := webhook.ReadEvents(strings.NewReader(good + "\n" + tt.line + "\n" + good + "\n"))
			if err == nil || !strings.Contains(err.Error(), tt.says) || got != nil {
				t.Fatalf("read: %v, %v; want an error saying %q", got, err, tt.says)
			}
		})
	}
}
