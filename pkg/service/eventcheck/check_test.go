package eventcheck_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/eventcheck"
)

// without is evs less every copy of id.
func without(evs []outbox.Event, id string) []outbox.Event {
	return slices.DeleteFunc(slices.Clone(evs), func(e outbox.Event) bool { return e.ID == id })
}

// firstOf is the index of id's first arrival.
func firstOf(t *testing.T, evs []outbox.Event, id string) int {
	t.Helper()
	i := slices.IndexFunc(evs, func(e outbox.Event) bool { return e.ID == id })
	if i < 0 {
		t.Fatalf("%s was not delivered", id)
	}
	return i
}

// changed is evs with every copy of id changed by f.
func changed(t *testing.T, evs []outbox.Event, id string, f func(e *outbox.Event)) []outbox.Event {
	t.Helper()
	out := slices.Clone(evs)
	found := false
	// Every copy: a relay that died republished some, and the checker
	// judges a stream's start on its first arrival.
	for i := range out {
		if out[i].ID == id {
			f(&out[i])
			found = true
		}
	}
	if !found {
		t.Fatalf("%s was not delivered", id)
	}
	return out
}

// The events the relays put on the topic while orders were written,
// paid, cancelled and refunded at once and a draw ran, read back as a
// reader of the topic gets them: the checker finds every promise kept, and
// counts them. Then each kind of damage a delivery can do is named, with
// the stream and the event it concerns, and nothing else is.
func TestCheckerHoldsTheDeliveriesToMySQL(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	got := w.delivered(t)
	rep := w.check(t, got)
	committed := w.committed(t)
	if !rep.OK() || rep.Orders != 30 || rep.Entries != 5 || rep.Committed != committed || rep.Distinct != committed ||
		rep.Arrivals != len(got) || rep.Duplicates != len(got)-committed || rep.Duplicates == 0 || rep.Outside != 0 {
		t.Fatalf("the complete stream (%d events in the outbox): %s", committed, rep)
	}
	if !strings.Contains(rep.Summary(), "30 orders, 5 entries") || !strings.Contains(rep.Summary(), "no broken promise") {
		t.Fatalf("summary: %s", rep.Summary())
	}
	paid, closed, refunded, failed := w.paid[0], w.closed[0], w.refunded[0], w.failed[0]
	entries, err := w.db.Draws.Results(ctx, w.draw)
	if err != nil || len(entries) != 5 {
		t.Fatalf("the draw's results: %v, %v", entries, err)
	}
	entry := outbox.EntryStream(entries[0].EntryID)

	tests := []struct {
		name      string
		delivered func() []outbox.Event
		want      string // kinds(report)
		says      string // in the report
	}{
		{"a redelivery of earlier events after later ones", func() []outbox.Event {
			out := slices.Clone(got)
			for _, e := range got {
				if e.Data.Seq == 1 {
					out = append(out, e)
				}
			}
			return out
		}, "", ""},
		{"an event dropped", func() []outbox.Event { return without(got, outbox.IDOf(paid, 2)) },
			"missing " + paid + " " + outbox.IDOf(paid, 2) + "\nstale_status " + paid + " " + outbox.IDOf(paid, 1),
			"event 2 of 2 never arrived (the outbox's order.paid)"},
		{"two events swapped", func() []outbox.Event {
			out := slices.Clone(got)
			i, j := firstOf(t, out, outbox.IDOf(refunded, 2)), firstOf(t, out, outbox.IDOf(refunded, 3))
			out[i], out[j] = out[j], out[i]
			return out
		}, "out_of_order " + refunded + " " + outbox.IDOf(refunded, 2), "seq 2 first arrived after seq 3"},
		{"a field changed (in its last copy)", func() []outbox.Event {
			return changed(t, got, outbox.IDOf(closed, 2), func(e *outbox.Event) { e.Data.Reason = order.ReasonPaymentTimeout })
		}, "differs " + closed + " " + outbox.IDOf(closed, 2), "data.reason"},
		{"a timestamp changed", func() []outbox.Event {
			return changed(t, got, outbox.IDOf(paid, 1), func(e *outbox.Event) { e.Time = e.Time.Add(time.Microsecond) })
		}, "differs " + paid + " " + outbox.IDOf(paid, 1), "timestamp"},
		{"a stream opened by another event", func() []outbox.Event {
			return changed(t, got, outbox.IDOf(failed, 1), func(e *outbox.Event) { e.Type = outbox.OrderPaid })
		}, "bad_start " + failed + " " + outbox.IDOf(failed, 1) + "\ndiffers " + failed + " " + outbox.IDOf(failed, 1),
			"type order.paid, the outbox's order.failed"},
		{"an order MySQL does not have", func() []outbox.Event {
			e := got[0]
			e.Data.OrderNo, e.Data.EntryID, e.Type = "01NOTANORDER0000000000000-1", "", outbox.OrderCreated
			e.ID = outbox.IDOf(e.Data.OrderNo, e.Data.Seq)
			return append(slices.Clone(got), e)
		}, "unknown_stream 01NOTANORDER0000000000000-1", "MySQL has no order 01NOTANORDER0000000000000-1"},
		{"an event naming no order", func() []outbox.Event {
			return changed(t, got, outbox.IDOf(closed, 1), func(e *outbox.Event) { e.Data.OrderNo = "" })
		}, "unknown_stream", "event " + outbox.IDOf(closed, 1) + " (order.created) names no order"},
		{"an event the outbox does not hold", func() []outbox.Event {
			e := got[firstOf(t, got, outbox.IDOf(paid, 2))]
			e.Data.Seq, e.ID = 7, outbox.IDOf(paid, 7)
			return append(slices.Clone(got), e)
		}, "unknown_event " + paid + " " + outbox.IDOf(paid, 7), "MySQL counts 2"},
		{"an entry's event dropped", func() []outbox.Event { return without(got, outbox.IDOf(entry, 1)) },
			"missing " + entry + " " + outbox.IDOf(entry, 1), "event 1 of 1 never arrived (the outbox's entry."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := w.check(t, tt.delivered())
			if got := kinds(rep); got != tt.want || !strings.Contains(rep.String(), tt.says) {
				t.Fatalf("violations:\n%s\nwant:\n%s\nsaying %q; the report: %s", got, tt.want, tt.says, rep)
			}
		})
	}

	// A change MySQL committed without its event: the stream delivered is
	// the outbox's, whole, and its last event no longer states the order.
	stale := w.paid[1]
	setStatus := func(s order.Status) {
		if err := w.db.Gorm().Exec("UPDATE orders SET status = ? WHERE order_no = ?", string(s), stale).Error; err != nil {
			t.Fatal(err)
		}
	}
	setStatus(order.Closed)
	rep = w.check(t, got)
	setStatus(order.Paid)
	if k := kinds(rep); k != "stale_status "+stale+" "+outbox.IDOf(stale, 2) ||
		!strings.Contains(rep.String(), "(seq 2, order.paid) states PAID; MySQL has CLOSED") {
		t.Fatalf("a status changed without its event: %s", rep)
	}

	// Checked for the first sale alone, the draw's entries are another
	// sale's: held to the outbox, not counted as the sale's.
	rep, err = w.checker().Check(ctx, []int64{w.sale}, got)
	if err != nil || !rep.OK() || rep.Entries != 0 || rep.Outside != 5 || rep.Orders != 30 {
		t.Fatalf("the first sale alone: %s, %v", rep, err)
	}
	if _, err := w.checker().Check(ctx, nil, got); err == nil {
		t.Fatal("a check of no sale: no error")
	}
	dropped := w.check(t, without(got, outbox.IDOf(paid, 2)))
	if len(dropped.Of(eventcheck.Missing)) != 1 || len(dropped.Of(eventcheck.Differs)) != 0 || dropped.OK() {
		t.Fatalf("Of: %s", dropped)
	}
}
