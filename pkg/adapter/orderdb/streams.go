package orderdb

import (
	"context"
	"slices"

	"github.com/seckill/seckill/pkg/domain/outbox"
)

// Streams is the event checker's read side: what MySQL holds of the
// events' streams (each order's count of events and its status, each draw
// entry) and the outbox rows they committed, to hold the deliveries to.
type Streams struct{ conn }

// headRow is an order's or an entry's head as the queries read it.
type headRow struct {
	Stream     string
	ActivityID int64
	EventSeq   int
	Status     string
	Entry      bool
}

// Heads returns the head of every order and draw entry of the sales, and
// of each of named (order numbers and entry streams) MySQL has, whatever
// its sale; a named stream MySQL does not have is left out. An entry's
// head counts its events (draw_results.event_seq; none while its outcome
// is owed) and states no status.
func (s *Streams) Heads(ctx context.Context, sales []int64, named []string) ([]outbox.Head, error) {
	var orders, entries []string
	for _, n := range named {
		if id, ok := outbox.EntryOfStream(n); ok {
			entries = append(entries, id)
		} else {
			orders = append(orders, n)
		}
	}
	var rows []headRow
	read := func(q string, args ...any) error {
		var got []headRow
		if err := s.db(ctx).Raw(q, args...).Scan(&got).Error; err != nil {
			return wrap("read the streams' heads", err)
		}
		rows = append(rows, got...)
		return nil
	}
	const ofOrders = "SELECT order_no AS stream, activity_id, event_seq, status, 0 AS entry FROM orders WHERE "
	// An entry still owed its outcome (event_seq -1, firstEventOwed) has
	// no event committed yet.
	const ofEntries = "SELECT entry_id AS stream, activity_id, GREATEST(event_seq, 0) AS event_seq, '' AS status, 1 AS entry FROM draw_results WHERE "
	if len(sales) > 0 {
		if err := read(ofOrders+"activity_id IN ?", sales); err != nil {
			return nil, err
		}
		if err := read(ofEntries+"activity_id IN ?", sales); err != nil {
			return nil, err
		}
	}
	first := len(rows)
	for chunk := range slices.Chunk(orders, ListBatch) {
		if err := read(ofOrders+"order_no IN ?", chunk); err != nil {
			return nil, err
		}
	}
	for chunk := range slices.Chunk(entries, ListBatch) {
		if err := read(ofEntries+"entry_id IN ?", chunk); err != nil {
			return nil, err
		}
	}
	return heads(rows, first), nil
}

// heads turns rows into heads, the entries' with their stream's name, and
// drops a named stream (from first on) the sales' rows hold already.
func heads(rows []headRow, first int) []outbox.Head {
	out := make([]outbox.Head, 0, len(rows))
	seen := make(map[string]bool, first)
	for i, r := range rows {
		h := outbox.Head{Stream: r.Stream, Sale: r.ActivityID, Seq: r.EventSeq, Status: r.Status}
		if r.Entry {
			h.Stream = outbox.EntryStream(r.Stream)
		}
		if i >= first && seen[h.Stream] {
			continue
		}
		seen[h.Stream] = true
		out = append(out, h)
	}
	return out
}

// Events returns the outbox's events of streams, each stream's in seq
// order.
func (s *Streams) Events(ctx context.Context, streams []string) ([]outbox.Event, error) {
	var out []outbox.Event
	for chunk := range slices.Chunk(streams, ListBatch) {
		var rows []outboxRow
		if err := s.db(ctx).Where("stream IN ?", chunk).Order("stream, seq").Find(&rows).Error; err != nil {
			return nil, wrap("read the streams' events", err)
		}
		evs, err := decode(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}
