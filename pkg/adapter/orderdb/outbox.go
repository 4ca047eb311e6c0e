package orderdb

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// Outbox stores the events the shop hears (outbox_events, 0018), written in
// the unit of work of the change each reports, and their relay. Off, it
// records nothing (Config.NoEvents).
type Outbox struct {
	conn
	off bool
}

type outboxRow struct {
	ID          int64 `gorm:"primaryKey"`
	EventID     string
	Stream      string
	Seq         int
	Type        string
	Data        []byte
	Shard       int
	CreatedAt   time.Time `gorm:"->"` // MySQL's clock, set by the insert
	PublishedAt *time.Time
}

func (outboxRow) TableName() string { return "outbox_events" }

func (r outboxRow) event() (outbox.Event, error) {
	e := outbox.Event{ID: r.EventID, Type: outbox.Type(r.Type), Time: r.CreatedAt.UTC()}
	if err := json.Unmarshal(r.Data, &e.Data); err != nil {
		return e, fmt.Errorf("outbox event %s: %w", r.EventID, err)
	}
	return e, nil
}

// Record writes evs, in ctx's unit of work: each is numbered in its
// stream's sequence (Data.Seq) and gets its id. An event with Seq 1 is its
// stream's first, written with the row it is about (an order's row, or a
// draw entry's ranking row, draw_results, which start at 1); any other
// takes the stream's next number, counted on that row (orders.event_seq,
// draw_results.event_seq), which the change being reported holds locked
// already (numbering locks it if not: until the unit ends, no other unit
// numbers an event of that order or entry).
func (s *Outbox) Record(ctx context.Context, evs ...outbox.Event) error {
	if len(evs) == 0 || s.off {
		return nil
	}
	// seqs are the events' numbers; entries counts the events each entry
	// is to number (its last ones, in evs' order).
	seqs := make([]int, len(evs))
	entries := map[string]int{}
	for i, e := range evs {
		if err := e.Check(); err != nil {
			return fmt.Errorf("%w: %w", order.ErrInvalidArgument, err)
		}
		switch {
		case e.Data.Seq == 1:
			seqs[i] = 1
		case e.Type.OfEntry():
			entries[e.Data.EntryID]++
		default:
			seq, err := s.next(ctx, e.Stream())
			if err != nil {
				return err
			}
			seqs[i] = seq
		}
	}
	last, err := s.nextOfEntries(ctx, entries)
	if err != nil {
		return err
	}
	// Multi-row INSERTs of recordBatch rows: a draw's run writes a
	// million, which GORM's reflection would make a matter of minutes.
	// All or none, in ctx's unit or a transaction of its own.
	return wrap("record events", s.db(ctx).Transaction(func(tx *gorm.DB) error {
		var q strings.Builder
		args := make([]any, 0, 6*min(len(evs), recordBatch))
		for i, e := range evs {
			if seqs[i] == 0 {
				id := e.Data.EntryID
				seqs[i] = last[id] - entries[id] + 1
				entries[id]--
			}
			e.Data.Seq = seqs[i]
			data, err := json.Marshal(e.Data)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				q.Reset()
				q.WriteString("INSERT INTO outbox_events (event_id, stream, seq, type, data, shard) VALUES ")
			} else {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?,?,?,?)")
			args = append(args, outbox.IDOf(e.Stream(), e.Data.Seq), e.Stream(), e.Data.Seq, string(e.Type), data, outbox.ShardOf(e.Stream()))
			if len(args) == 6*recordBatch || i == len(evs)-1 {
				if err := tx.Exec(q.String(), args...).Error; err != nil {
					return err
				}
				args = args[:0]
			}
		}
		return nil
	}))
}

// recordBatch is how many events one INSERT of Record writes.
const recordBatch = 1000

// next counts one more event of the order orderNo and returns its number.
func (s *Outbox) next(ctx context.Context, orderNo string) (int, error) {
	db := s.db(ctx)
	// updated_at stays: it says when the order's status last changed, and
	// an event such as refund.owed changes no status.
	res := db.Exec("UPDATE orders SET event_seq = event_seq + 1, updated_at = updated_at WHERE order_no = ?", orderNo)
	if res.Error != nil {
		return 0, wrap("number an event", res.Error)
	}
	if res.RowsAffected != 1 {
		return 0, fmt.Errorf("number an event of order %s: %w", orderNo, order.ErrNotFound)
	}
	var row orderRow
	if err := db.Clauses(clause.Locking{Strength: "UPDATE"}).Select("event_seq").Where("order_no = ?", orderNo).Take(&row).Error; err != nil {
		return 0, wrap("number an event", err)
	}
	return row.EventSeq, nil
}

// nextOfEntries counts counts[entry] more events of each entry on its
// ranking row and returns each one's number of its last event now: one
// statement locks and counts them all (in the order of their ids, as any
// other unit that numbers several does), and one reads the numbers.
func (s *Outbox) nextOfEntries(ctx context.Context, counts map[string]int) (map[string]int, error) {
	if len(counts) == 0 {
		return nil, nil
	}
	db := s.db(ctx)
	ids := slices.Sorted(maps.Keys(counts))
	last := make(map[string]int, len(ids))
	for chunk := range slices.Chunk(ids, ListBatch) {
		var add strings.Builder
		args := make([]any, 0, 2*len(chunk)+1)
		add.WriteString("CASE entry_id")
		for _, id := range chunk {
			add.WriteString(" WHEN ? THEN ?")
			args = append(args, id, counts[id])
		}
		add.WriteString(" END")
		// An entry still owed its first event (firstEventOwed) numbers
		// nothing: its next event would come before it.
		res := db.Exec("UPDATE draw_results SET event_seq = event_seq + "+add.String()+" WHERE entry_id IN ? AND event_seq >= 0", append(args, chunk)...)
		if res.Error != nil {
			return nil, wrap("number an entry's event", res.Error)
		}
		if res.RowsAffected != int64(len(chunk)) {
			return nil, fmt.Errorf("number an entry's event: %d of %d entries: %w", res.RowsAffected, len(chunk), order.ErrNotFound)
		}
		var rows []struct {
			EntryID  string
			EventSeq int
		}
		if err := db.Raw("SELECT entry_id, event_seq FROM draw_results WHERE entry_id IN ? FOR UPDATE", chunk).Scan(&rows).Error; err != nil {
			return nil, wrap("number an entry's event", err)
		}
		for _, r := range rows {
			last[r.EntryID] = r.EventSeq
		}
	}
	return last, nil
}

// Stream returns the events of stream (an order number), in order.
func (s *Outbox) Stream(ctx context.Context, stream string) ([]outbox.Event, error) {
	return s.events(s.db(ctx).Where("stream = ?", stream).Order("seq"))
}

// Since returns up to limit events written after the event with row id
// after (0: from the first), in the order they were written, and the row
// id of the last one.
func (s *Outbox) Since(ctx context.Context, after int64, limit int) ([]outbox.Event, int64, error) {
	var rows []outboxRow
	if err := s.db(ctx).Where("id > ?", after).Order("id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, after, wrap("read events", err)
	}
	out, err := decode(rows)
	if len(rows) > 0 {
		after = rows[len(rows)-1].ID
	}
	return out, after, err
}

func (s *Outbox) events(q *gorm.DB) ([]outbox.Event, error) {
	var rows []outboxRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, wrap("read events", err)
	}
	return decode(rows)
}

func decode(rows []outboxRow) ([]outbox.Event, error) {
	out := make([]outbox.Event, 0, len(rows))
	for _, r := range rows {
		e, err := r.event()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// PendingShards returns the shards that hold events not yet published.
func (s *Outbox) PendingShards(ctx context.Context) ([]int, error) {
	var shards []int
	err := s.db(ctx).Model(&outboxRow{}).Distinct("shard").Where("published_at IS NULL").Order("shard").Pluck("shard", &shards).Error
	return shards, wrap("read the outbox's pending shards", err)
}

// ClaimShards takes up to most of shards for ctx's unit of work, skipping
// those another relay holds, and returns those it took: the unit holds
// them until it ends.
func (s *Outbox) ClaimShards(ctx context.Context, shards []int, most int) ([]int, error) {
	var got []int
	err := s.db(ctx).Raw("SELECT shard FROM outbox_shards WHERE shard IN ? ORDER BY shard LIMIT ? FOR UPDATE SKIP LOCKED",
		shards, most).Scan(&got).Error
	if err != nil {
		return nil, wrap("claim outbox shards", err)
	}
	return got, nil
}

// Unpublished returns up to limit events of shards not yet published, in
// the order they were written (so each order's in seq order).
func (s *Outbox) Unpublished(ctx context.Context, shards []int, limit int) ([]outbox.Event, error) {
	return s.events(s.db(ctx).Where("published_at IS NULL AND shard IN ?", shards).Order("id").Limit(limit))
}

// MarkPublished records that Kafka took evs. It finds them by their
// (stream, seq), the key that makes each unique (their ids, derived from
// it, have no key of their own).
func (s *Outbox) MarkPublished(ctx context.Context, evs []outbox.Event) error {
	if len(evs) == 0 {
		return nil
	}
	db := s.db(ctx)
	for chunk := range slices.Chunk(evs, recordBatch) {
		var q strings.Builder
		args := make([]any, 0, 2*len(chunk))
		// Written as GORM writes it: the chaos suite loses this
		// statement's answer by its text.
		q.WriteString("UPDATE `outbox_events` SET `published_at` = NOW(6) WHERE published_at IS NULL AND (stream, seq) IN (")
		for i, e := range chunk {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?)")
			args = append(args, e.Stream(), e.Data.Seq)
		}
		q.WriteByte(')')
		if err := db.Exec(q.String(), args...).Error; err != nil {
			return wrap("mark events published", err)
		}
	}
	return nil
}

// Purge deletes up to limit of the events published and written before
// cutoff, and up to limit of the webhook deliveries queued before it with
// their attempts, and returns how many events and deliveries it deleted.
// An event not yet published stays whatever its age.
func (s *Outbox) Purge(ctx context.Context, cutoff time.Time, limit int) (events, deliveries int64, err error) {
	db := s.db(ctx)
	if err := db.Exec(`DELETE a FROM webhook_attempts a JOIN (SELECT id FROM webhook_deliveries WHERE created_at < ?
		ORDER BY id LIMIT ?) d ON a.delivery_id = d.id`, cutoff, limit).Error; err != nil {
		return 0, 0, wrap("purge webhook attempts", err)
	}
	res := db.Exec("DELETE FROM webhook_deliveries WHERE created_at < ? ORDER BY id LIMIT ?", cutoff, limit)
	if res.Error != nil {
		return 0, 0, wrap("purge webhook deliveries", res.Error)
	}
	deliveries = res.RowsAffected
	res = db.Exec("DELETE FROM outbox_events WHERE published_at IS NOT NULL AND created_at < ? ORDER BY id LIMIT ?", cutoff, limit)
	if res.Error != nil {
		return 0, deliveries, wrap("purge outbox events", res.Error)
	}
	return res.RowsAffected, deliveries, nil
}
