package orderdb

import (
	"context"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// deliveryRow is a delivery of an outbox event to an endpoint (0019),
// with its last try (0023).
type deliveryRow struct {
	ID          int64 `gorm:"primaryKey"`
	WebhookID   int64
	EventID     string
	Stream      string
	Seq         int
	State       string
	Attempts    int
	NextAt      time.Time
	LastStatus  int
	LastError   string
	LastAt      *time.Time
	LastMs      int
	CreatedAt   time.Time `gorm:"->"`
	DeliveredAt *time.Time
}

func (deliveryRow) TableName() string { return "webhook_deliveries" }

// attemptRow is a try of a delivery that failed; one that succeeded is
// kept on its delivery only.
type attemptRow struct {
	ID         int64 `gorm:"primaryKey"`
	DeliveryID int64
	At         time.Time
	DurationMs int
	Status     int
	Error      string
}

func (attemptRow) TableName() string { return "webhook_attempts" }

// errorBytes bounds the error a delivery row and an attempt keep.
const errorBytes = 500

func clip(s string) string {
	if len(s) <= errorBytes {
		return s
	}
	return strings.ToValidUTF8(s[:errorBytes], "")
}

// Enqueue writes a pending delivery of each event to each endpoint of
// targets (events[i] goes to targets[i]'s endpoints), in ctx's unit; one
// already there stays as it is.
func (s *Webhooks) Enqueue(ctx context.Context, evs []outbox.Event, targets [][]int64) error {
	var rows []deliveryRow
	for i, e := range evs {
		for _, id := range targets[i] {
			rows = append(rows, deliveryRow{WebhookID: id, EventID: e.ID, Stream: e.Stream(), Seq: e.Data.Seq, State: string(hook.Pending)})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	err := s.db(ctx).Clauses(clause.Insert{Modifier: "IGNORE"}).Omit("CreatedAt", "NextAt", "DeliveredAt", "LastAt").CreateInBatches(&rows, 1000).Error
	return wrap("enqueue webhook deliveries", err)
}

// deliveryEvent is a delivery with its event's row.
type deliveryEvent struct {
	deliveryRow `gorm:"embedded"`
	Type        string
	Data        []byte
	EventAt     time.Time
	EventRowID  int64
}

func (r deliveryEvent) delivery() (hook.Delivery, error) {
	ev, err := outboxRow{EventID: r.EventID, Type: r.Type, Data: r.Data, CreatedAt: r.EventAt}.event()
	return hook.Delivery{ID: r.ID, WebhookID: r.WebhookID, Event: ev, Stream: r.Stream, Seq: r.Seq, State: hook.State(r.State),
		Attempts: r.Attempts, NextAt: r.NextAt.UTC(), LastStatus: r.LastStatus, LastError: r.LastError,
		CreatedAt: r.CreatedAt.UTC(), DeliveredAt: utc(r.DeliveredAt)}, err
}

const deliveryColumns = `d.id, d.webhook_id, d.event_id, d.stream, d.seq, d.state, d.attempts, d.next_at, d.last_status,
	d.last_error, d.last_at, d.last_ms, d.created_at, d.delivered_at, e.type, e.data, e.created_at AS event_at`

// Due returns up to limit deliveries to endpoint id that may be sent now
// (MySQL's clock, which set their times): pending, due, and each the first pending one of its stream (so a
// stream's next event waits until the one before it is delivered or
// given up), oldest first. A stream's earlier pending deliveries are
// looked up by uk_webhook_delivery, named: with (webhook_id, state) in
// ix_webhook_delivery_due as well, MariaDB took that one for the lookup
// once its statistics were of a new table, and read every pending
// delivery of the endpoint for each due one (18 s a round of 1,000 of
// 20,000 pending, against 30 ms). The update of a failed delivery's
// stream in Record names it for the same reason.
func (s *Webhooks) Due(ctx context.Context, id int64, limit int) ([]hook.Delivery, error) {
	rows, err := scanDeliveries(s.db(ctx).Raw(`SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN outbox_events e ON e.stream = d.stream AND e.seq = d.seq
		WHERE d.webhook_id = ? AND d.state = ? AND d.next_at <= NOW(6)
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p FORCE INDEX (uk_webhook_delivery) WHERE p.webhook_id = d.webhook_id AND p.stream = d.stream
			AND p.state = ? AND p.seq < d.seq)
		ORDER BY d.next_at, d.id LIMIT ?`, id, hook.Pending, hook.Pending, limit))
	if err != nil {
		return nil, wrap("read due webhook deliveries", err)
	}
	return deliveries(rows)
}

// scanDeliveries reads the rows of a query of deliveryColumns. (GORM's
// Scan leaves the columns of an aliased table out of the struct.)
func scanDeliveries(q *gorm.DB) ([]deliveryEvent, error) {
	rows, err := q.Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []deliveryEvent
	for rows.Next() {
		var r deliveryEvent
		if err := rows.Scan(&r.ID, &r.WebhookID, &r.EventID, &r.Stream, &r.Seq, &r.State, &r.Attempts, &r.NextAt, &r.LastStatus,
			&r.LastError, &r.LastAt, &r.LastMs, &r.CreatedAt, &r.DeliveredAt, &r.Type, &r.Data, &r.EventAt); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func deliveries(rows []deliveryEvent) ([]hook.Delivery, error) {
	out := make([]hook.Delivery, 0, len(rows))
	for _, r := range rows {
		d, err := r.delivery()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Record writes what the sends of a round came to, in one unit: each
// delivery's new state and its try (kept on the delivery: last_at,
// last_ms, last_status, last_error), an attempt row for each try that
// failed (one that succeeded is the delivery's last, read from it), and,
// for a delivery that will be tried again, the same wait for the later
// events of its stream (they cannot go before it). A lost answer leaves a
// delivery pending: it is sent again, with the same id, which the
// endpoint deduplicates.
func (s *Webhooks) Record(ctx context.Context, outs []hook.Outcome) error {
	if len(outs) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var attempts []attemptRow
		var delivered []hook.Outcome
		for _, o := range outs {
			a := o.Attempt
			if o.State == hook.Delivered {
				delivered = append(delivered, o)
				continue
			}
			attempts = append(attempts, attemptRow{DeliveryID: o.Delivery.ID, At: a.At, DurationMs: int(a.Duration.Milliseconds()), Status: a.Status, Error: clip(a.Error)})
			fields := map[string]any{"state": o.State, "attempts": gorm.Expr("attempts + 1"), "last_status": a.Status, "last_error": clip(a.Error),
				"last_at": a.At, "last_ms": a.Duration.Milliseconds()}
			next := gorm.Expr("NOW(6) + INTERVAL ? MICROSECOND", o.Wait.Microseconds())
			if o.State == hook.Pending {
				fields["next_at"] = next
			}
			if err := tx.Model(&deliveryRow{}).Where("id = ? AND state = ?", o.Delivery.ID, hook.Pending).Updates(fields).Error; err != nil {
				return err
			}
			if o.State == hook.Pending {
				if err := tx.Exec(`UPDATE webhook_deliveries FORCE INDEX (uk_webhook_delivery) SET next_at = GREATEST(next_at, NOW(6) + INTERVAL ? MICROSECOND)
					WHERE webhook_id = ? AND stream = ? AND state = ? AND seq > ?`,
					o.Wait.Microseconds(), o.Delivery.WebhookID, o.Delivery.Stream, hook.Pending, o.Delivery.Seq).Error; err != nil {
					return err
				}
			}
		}
		for chunk := range slices.Chunk(delivered, 1000) {
			if err := markDelivered(tx, chunk); err != nil {
				return err
			}
		}
		if len(attempts) == 0 {
			return nil
		}
		return tx.CreateInBatches(&attempts, 1000).Error
	})
	return wrap("record webhook deliveries", err)
}

// markDelivered marks the deliveries of outs delivered, with their tries,
// in one statement.
func markDelivered(tx *gorm.DB, outs []hook.Outcome) error {
	var status, at, ms strings.Builder
	args := make([]any, 1, 6*len(outs)+3)
	args[0] = hook.Delivered
	ids := make([]int64, len(outs))
	for i, o := range outs {
		ids[i] = o.Delivery.ID
		status.WriteString(" WHEN ? THEN ?")
		args = append(args, o.Delivery.ID, o.Attempt.Status)
	}
	for _, o := range outs {
		at.WriteString(" WHEN ? THEN ?")
		args = append(args, o.Delivery.ID, o.Attempt.At)
	}
	for _, o := range outs {
		ms.WriteString(" WHEN ? THEN ?")
		args = append(args, o.Delivery.ID, o.Attempt.Duration.Milliseconds())
	}
	args = append(args, ids, hook.Pending)
	return tx.Exec(`UPDATE webhook_deliveries SET state = ?, attempts = attempts + 1,
		last_status = CASE id`+status.String()+` END, last_at = CASE id`+at.String()+` END,
		last_ms = CASE id`+ms.String()+` END, last_error = '', delivered_at = NOW(6)
		WHERE id IN ? AND state = ?`, args...).Error
}

// Deliveries lists endpoint id's deliveries, newest first, each with its
// attempts: those in state ("" any), before the delivery before (0: from
// the newest), at most limit.
func (s *Webhooks) Deliveries(ctx context.Context, id int64, state hook.State, before int64, limit int) ([]hook.Delivery, error) {
	q := `SELECT ` + deliveryColumns + ` FROM webhook_deliveries d JOIN outbox_events e ON e.stream = d.stream AND e.seq = d.seq WHERE d.webhook_id = ?`
	args := []any{id}
	if state != "" {
		q += " AND d.state = ?"
		args = append(args, state)
	}
	if before > 0 {
		q += " AND d.id < ?"
		args = append(args, before)
	}
	q += " ORDER BY d.id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := scanDeliveries(s.db(ctx).Raw(q, args...))
	if err != nil {
		return nil, wrap("list webhook deliveries", err)
	}
	out, err := deliveries(rows)
	if err != nil || len(out) == 0 {
		return out, err
	}
	ids := make([]int64, len(out))
	at := make(map[int64]int, len(out))
	for i, d := range out {
		ids[i], at[d.ID] = d.ID, i
	}
	var tries []attemptRow
	if err := s.db(ctx).Where("delivery_id IN ?", ids).Order("id").Find(&tries).Error; err != nil {
		return nil, wrap("list webhook attempts", err)
	}
	for _, a := range tries {
		d := &out[at[a.DeliveryID]]
		d.Tries = append(d.Tries, hook.Attempt{At: a.At.UTC(), Duration: time.Duration(a.DurationMs) * time.Millisecond, Status: a.Status, Error: a.Error})
	}
	// A delivered one's last try, which succeeded, is on the delivery
	// (none for one delivered before 0023, whose every try is a row).
	for i, r := range rows {
		if r.State == string(hook.Delivered) && r.LastAt != nil {
			out[i].Tries = append(out[i].Tries, hook.Attempt{At: r.LastAt.UTC(), Duration: time.Duration(r.LastMs) * time.Millisecond, Status: r.LastStatus})
		}
	}
	return out, nil
}

// EventsSince returns up to limit events written at or after since, after
// the row id after, in the order they were written, and the row id of the
// last.
func (s *Webhooks) EventsSince(ctx context.Context, since time.Time, after int64, limit int) ([]outbox.Event, int64, error) {
	var rows []outboxRow
	if err := s.db(ctx).Where("created_at >= ? AND id > ?", since, after).Order("id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, after, wrap("read events to replay", err)
	}
	out, err := decode(rows)
	if len(rows) > 0 {
		after = rows[len(rows)-1].ID
	}
	return out, after, err
}

// Requeue makes each of evs pending again for endpoint id, due now (a
// replay): a delivery already there is sent again, from the start of the
// retry schedule (a given-up one would otherwise have no try left after
// the first), one missing is added. Its attempt log stays.
func (s *Webhooks) Requeue(ctx context.Context, id int64, evs []outbox.Event) error {
	if len(evs) == 0 {
		return nil
	}
	rows := make([]deliveryRow, len(evs))
	for i, e := range evs {
		rows[i] = deliveryRow{WebhookID: id, EventID: e.ID, Stream: e.Stream(), Seq: e.Data.Seq, State: string(hook.Pending)}
	}
	err := s.db(ctx).Clauses(clause.OnConflict{DoUpdates: clause.Assignments(map[string]any{
		"state": hook.Pending, "next_at": gorm.Expr("NOW(6)"), "attempts": 0, "delivered_at": nil})}).Omit("CreatedAt", "NextAt", "DeliveredAt", "LastAt").CreateInBatches(&rows, 1000).Error
	return wrap("requeue webhook deliveries", err)
}
