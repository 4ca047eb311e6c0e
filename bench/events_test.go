package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// TestEventReceiverVerifiesTimesAndCountsDeliveries sends the receiver
// deliveries signed as the consumer signs them: good ones, a redelivery,
// one of another sale, one signed with another secret and one that is no
// event; the tally holds each where it belongs, and times each event from
// its timestamp.
func TestEventReceiverVerifiesTimesAndCountsDeliveries(t *testing.T) {
	rc, err := startEventReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.close()
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	other, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	rc.setSecret(secret)

	send := func(id string, body []byte, key string) int {
		t.Helper()
		now := time.Now()
		sig, err := webhook.Sign([]string{key}, id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, rc.url, bytes.NewReader(body))
		req.Header = webhook.Headers(id, now, sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	event := func(sale int64, committed time.Time) []byte {
		b, _ := json.Marshal(outbox.Event{Type: outbox.Type("order.created"), Time: committed, Data: outbox.Data{SaleID: sale, Seq: 1}})
		return b
	}
	const sale = 7
	loadEnd := time.Now()
	oldest := time.Now().Add(-300 * time.Millisecond)
	for i, c := range []struct {
		id   string
		body []byte
		key  string
		want int
	}{
		{"evt_a_1", event(sale, oldest), secret, http.StatusNoContent},
		{"evt_b_1", event(sale, time.Now().Add(-100*time.Millisecond)), secret, http.StatusNoContent},
		{"evt_a_1", event(sale, oldest), secret, http.StatusNoContent}, // a redelivery
		{"evt_c_1", event(sale+1, time.Now()), secret, http.StatusNoContent},
		{"evt_d_1", event(sale, time.Now()), other, http.StatusBadRequest},
		{"evt_e_1", []byte(`{"type": 1}`), secret, http.StatusBadRequest},
	} {
		if got := send(c.id, c.body, c.key); got != c.want {
			t.Errorf("delivery %d (%s): status %d, want %d", i, c.id, got, c.want)
		}
	}
	if got := rc.distinct(sale); got != 2 {
		t.Errorf("distinct events of the sale: %d, want 2", got)
	}

	ev := &report.Events{LastAfterLoad: -1}
	rc.tally(ev, sale, loadEnd)
	if ev.Delivered != 2 || ev.Deliveries != 3 || ev.Duplicates != 1 || ev.OtherSales != 1 || ev.Invalid != 1 || ev.Unreadable != 1 {
		t.Errorf("tally: delivered %d, deliveries %d, duplicates %d, other sales %d, invalid %d, unreadable %d; want 2, 3, 1, 1, 1, 1",
			ev.Delivered, ev.Deliveries, ev.Duplicates, ev.OtherSales, ev.Invalid, ev.Unreadable)
	}
	// evt_a_1 committed 300 ms before it was sent, evt_b_1 100 ms: the
	// slower one is the max, and the first delivery counts, not the
	// redelivery.
	if c := ev.CommitToDelivery; c.Count != 2 || c.MaxMs < 300 || c.MaxMs > 1000 || c.MinMs < 100 || c.MinMs >= 300 {
		t.Errorf("commit→delivery %+v; want 2 events, min in [100, 300) ms, max in [300, 1000] ms", c)
	}
	if ev.LastAfterLoad <= 0 || ev.LastAfterLoad > 5 {
		t.Errorf("load end → last delivery %.3f s, want a little above 0", ev.LastAfterLoad)
	}
}

// TestEventsTablesShowTheCostAndTheDeliveries renders the scenario's
// tables and the targets from a finished comparison.
func TestEventsTablesShowTheCostAndTheDeliveries(t *testing.T) {
	run := func(name string, orders float64) *report.Run {
		return &report.Run{Name: name, Throughput: orders * 1.1, Outcomes: map[string]int64{},
			Pipeline: &report.Pipeline{OrdersPerSecond: orders}}
	}
	ev := &report.Events{Sustained: run("sustained", 9000), Off: run(eventsOffRun, 10000), On: run(eventsOnRun, 8800),
		SustainedRun: "sustained", OffRun: eventsOffRun, OnRun: eventsOnRun, Committed: 5, Delivered: 5, LastAfterLoad: 1.5}
	ev.CommitToDelivery.P99Ms = 420
	rep := &report.Report{Runs: []*report.Run{ev.Sustained, ev.Off, ev.On}, Events: []*report.Events{ev}}
	var out strings.Builder
	report.Markdown(&out, rep)
	for _, want := range []string{
		"### Cost of the order events", "| orders/s end to end | 9000 | 10000 | 8800 | -12.0 % |",
		"goal: within 10 %: **no**", "| 0 / 5 | 5 | 0 | 0 |", "| 1.50 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, out.String())
		}
	}
	got := map[string]bool{}
	for _, tg := range targets(rep) {
		if strings.HasPrefix(tg.Name, eventsOnRun) {
			got[tg.Want] = tg.Pass
		}
	}
	if pass, ok := got["within 10 %"]; !ok || pass {
		t.Errorf("orders target %v (present %t), want a MISS for -12 %%", pass, ok)
	}
	if pass, ok := got["P99 < 1 s, every event delivered"]; !ok || !pass {
		t.Errorf("delivery target %v (present %t), want a PASS for 5 of 5 at P99 420 ms", pass, ok)
	}
}
