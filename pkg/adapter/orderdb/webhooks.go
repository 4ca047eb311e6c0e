package orderdb

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// Webhooks stores the shop's endpoints, their secrets and the deliveries
// of the outbox's events to them (0019).
type Webhooks struct{ conn }

type webhookRow struct {
	ID             int64 `gorm:"primaryKey"`
	URL            string
	Events         []byte
	Description    string
	Enabled        bool
	DisabledReason string
	DisabledAt     *time.Time
	FailingSince   *time.Time
	LeaseOwner     string
	LeaseUntil     *time.Time
	CreatedAt      time.Time `gorm:"->"`
}

func (webhookRow) TableName() string { return "webhooks" }

func (r webhookRow) endpoint() (hook.Endpoint, error) {
	e := hook.Endpoint{ID: r.ID, URL: r.URL, Description: r.Description, Enabled: r.Enabled,
		DisabledReason: r.DisabledReason, DisabledAt: utc(r.DisabledAt), FailingSince: utc(r.FailingSince), CreatedAt: r.CreatedAt.UTC()}
	if err := json.Unmarshal(r.Events, &e.Events); err != nil {
		return e, fmt.Errorf("webhook %d: its events: %w", r.ID, err)
	}
	return e, nil
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

type webhookSecretRow struct {
	ID        int64 `gorm:"primaryKey"`
	WebhookID int64
	Secret    string
	CreatedAt time.Time `gorm:"->"`
	ExpiresAt *time.Time
}

func (webhookSecretRow) TableName() string { return "webhook_secrets" }

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
	CreatedAt   time.Time `gorm:"->"`
	DeliveredAt *time.Time
}

func (deliveryRow) TableName() string { return "webhook_deliveries" }

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

// Create registers e with its first secret and returns it as stored.
func (s *Webhooks) Create(ctx context.Context, e hook.Endpoint, secret string) (hook.Endpoint, error) {
	events, err := json.Marshal(e.Events)
	if err != nil {
		return e, err
	}
	row := webhookRow{URL: e.URL, Events: events, Description: e.Description, Enabled: true}
	err = s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Omit("CreatedAt").Create(&row).Error; err != nil {
			return err
		}
		return tx.Omit("CreatedAt").Create(&webhookSecretRow{WebhookID: row.ID, Secret: secret}).Error
	})
	if err != nil {
		return e, wrap("register webhook", err)
	}
	return s.Endpoint(ctx, row.ID)
}

// inTx runs fn in ctx's unit of work, or in a transaction of its own.
func (s *Webhooks) inTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return s.db(ctx).Transaction(fn)
}

// Endpoint reads endpoint id (order.ErrNotFound when there is none).
func (s *Webhooks) Endpoint(ctx context.Context, id int64) (hook.Endpoint, error) {
	var row webhookRow
	if err := s.db(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		return hook.Endpoint{}, wrap(fmt.Sprintf("read webhook %d", id), err)
	}
	return row.endpoint()
}

// Endpoints lists every endpoint (enabled only: only those on), by id.
func (s *Webhooks) Endpoints(ctx context.Context, enabledOnly bool) ([]hook.Endpoint, error) {
	q := s.db(ctx).Order("id")
	if enabledOnly {
		q = q.Where("enabled = 1")
	}
	var rows []webhookRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, wrap("list webhooks", err)
	}
	out := make([]hook.Endpoint, 0, len(rows))
	for _, r := range rows {
		e, err := r.endpoint()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Update writes e's URL, events, description and whether it is on (a
// change of that clears its run of failures).
func (s *Webhooks) Update(ctx context.Context, e hook.Endpoint) error {
	events, err := json.Marshal(e.Events)
	if err != nil {
		return err
	}
	res := s.db(ctx).Model(&webhookRow{}).Where("id = ?", e.ID).Updates(map[string]any{
		"url": e.URL, "events": events, "description": e.Description, "enabled": e.Enabled,
		"disabled_reason": e.DisabledReason, "disabled_at": e.DisabledAt, "failing_since": e.FailingSince})
	if res.Error != nil {
		return wrap("update webhook", res.Error)
	}
	return nil
}

// Delete removes endpoint id, its secrets, deliveries and attempts, in one
// unit; order.ErrNotFound when it was not there.
func (s *Webhooks) Delete(ctx context.Context, id int64) error {
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		res := tx.Where("id = ?", id).Delete(&webhookRow{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return order.ErrNotFound
		}
		if err := tx.Exec(`DELETE a FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
			WHERE d.webhook_id = ?`, id).Error; err != nil {
			return err
		}
		if err := tx.Where("webhook_id = ?", id).Delete(&deliveryRow{}).Error; err != nil {
			return err
		}
		return tx.Where("webhook_id = ?", id).Delete(&webhookSecretRow{}).Error
	})
	return wrap(fmt.Sprintf("delete webhook %d", id), err)
}

// Secrets returns endpoint id's secrets that sign at now, newest first.
func (s *Webhooks) Secrets(ctx context.Context, id int64, now time.Time) ([]hook.Secret, error) {
	var rows []webhookSecretRow
	err := s.db(ctx).Where("webhook_id = ? AND (expires_at IS NULL OR expires_at > ?)", id, now).Order("id DESC").Find(&rows).Error
	if err != nil {
		return nil, wrap("read webhook secrets", err)
	}
	out := make([]hook.Secret, len(rows))
	for i, r := range rows {
		out[i] = hook.Secret{Value: r.Secret, ExpiresAt: utc(r.ExpiresAt)}
	}
	return out, nil
}

// Rotate gives endpoint id the new secret; the ones it had sign until
// oldUntil (and are then gone), in one unit.
func (s *Webhooks) Rotate(ctx context.Context, id int64, secret string, oldUntil time.Time) error {
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&webhookRow{}).Where("id = ?", id).Clauses(clause.Locking{Strength: "UPDATE"}).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return order.ErrNotFound
		}
		if err := tx.Where("webhook_id = ? AND expires_at IS NOT NULL AND expires_at <= ?", id, oldUntil).Delete(&webhookSecretRow{}).Error; err != nil {
			return err
		}
		if err := tx.Model(&webhookSecretRow{}).Where("webhook_id = ? AND (expires_at IS NULL OR expires_at > ?)", id, oldUntil).
			Update("expires_at", oldUntil).Error; err != nil {
			return err
		}
		return tx.Omit("CreatedAt").Create(&webhookSecretRow{WebhookID: id, Secret: secret}).Error
	})
	return wrap(fmt.Sprintf("rotate the secret of webhook %d", id), err)
}

// Lease makes owner the dispatcher of endpoint id for ttl, unless another
// holds it: true when owner holds it now. A lost answer is harmless: the
// next call finds owner holding it.
func (s *Webhooks) Lease(ctx context.Context, id int64, owner string, ttl time.Duration) (bool, error) {
	res := s.db(ctx).Exec(`UPDATE webhooks SET lease_owner = ?, lease_until = NOW(6) + INTERVAL ? MICROSECOND
		WHERE id = ? AND enabled = 1 AND (lease_owner = ? OR lease_until IS NULL OR lease_until < NOW(6))`,
		owner, ttl.Microseconds(), id, owner)
	if res.Error != nil {
		return false, wrap("lease webhook", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Release gives up owner's lease of endpoint id.
func (s *Webhooks) Release(ctx context.Context, id int64, owner string) error {
	err := s.db(ctx).Exec("UPDATE webhooks SET lease_until = NULL WHERE id = ? AND lease_owner = ?", id, owner).Error
	return wrap("release webhook", err)
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
	err := s.db(ctx).Clauses(clause.Insert{Modifier: "IGNORE"}).Omit("CreatedAt", "NextAt", "DeliveredAt").CreateInBatches(&rows, 1000).Error
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
	d.last_error, d.created_at, d.delivered_at, e.type, e.data, e.created_at AS event_at`

// Due returns up to limit deliveries to endpoint id that may be sent now
// (MySQL's clock, which set their times): pending, due, and each the first pending one of its stream (so a
// stream's next event waits until the one before it is delivered or
// given up), oldest first.
func (s *Webhooks) Due(ctx context.Context, id int64, limit int) ([]hook.Delivery, error) {
	rows, err := scanDeliveries(s.db(ctx).Raw(`SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN outbox_events e ON e.event_id = d.event_id
		WHERE d.webhook_id = ? AND d.state = ? AND d.next_at <= NOW(6)
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p WHERE p.webhook_id = d.webhook_id AND p.stream = d.stream
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
			&r.LastError, &r.CreatedAt, &r.DeliveredAt, &r.Type, &r.Data, &r.EventAt); err != nil {
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
// attempt, each delivery's new state, and, for a delivery that will be
// tried again, the same wait for the later events of its stream (they
// cannot go before it). A lost answer leaves a delivery pending: it is
// sent again, with the same id, which the endpoint deduplicates.
func (s *Webhooks) Record(ctx context.Context, outs []hook.Outcome) error {
	if len(outs) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		attempts := make([]attemptRow, len(outs))
		delivered := map[int][]int64{} // by the endpoint's status
		for i, o := range outs {
			a := o.Attempt
			attempts[i] = attemptRow{DeliveryID: o.Delivery.ID, At: a.At, DurationMs: int(a.Duration.Milliseconds()), Status: a.Status, Error: clip(a.Error)}
			if o.State == hook.Delivered {
				delivered[a.Status] = append(delivered[a.Status], o.Delivery.ID)
				continue
			}
			fields := map[string]any{"state": o.State, "attempts": gorm.Expr("attempts + 1"), "last_status": a.Status, "last_error": clip(a.Error)}
			next := gorm.Expr("NOW(6) + INTERVAL ? MICROSECOND", o.Wait.Microseconds())
			if o.State == hook.Pending {
				fields["next_at"] = next
			}
			if err := tx.Model(&deliveryRow{}).Where("id = ? AND state = ?", o.Delivery.ID, hook.Pending).Updates(fields).Error; err != nil {
				return err
			}
			if o.State == hook.Pending {
				if err := tx.Exec(`UPDATE webhook_deliveries SET next_at = GREATEST(next_at, NOW(6) + INTERVAL ? MICROSECOND)
					WHERE webhook_id = ? AND stream = ? AND state = ? AND seq > ?`,
					o.Wait.Microseconds(), o.Delivery.WebhookID, o.Delivery.Stream, hook.Pending, o.Delivery.Seq).Error; err != nil {
					return err
				}
			}
		}
		for status, ids := range delivered {
			if err := tx.Model(&deliveryRow{}).Where("id IN ? AND state = ?", ids, hook.Pending).Updates(map[string]any{
				"state": hook.Delivered, "attempts": gorm.Expr("attempts + 1"), "last_status": status,
				"last_error": "", "delivered_at": gorm.Expr("NOW(6)")}).Error; err != nil {
				return err
			}
		}
		return tx.CreateInBatches(&attempts, 1000).Error
	})
	return wrap("record webhook deliveries", err)
}

// Health records a round's effect on endpoint id: answered clears its run
// of failures; otherwise the run starts at now unless it had begun.
func (s *Webhooks) Health(ctx context.Context, id int64, answered bool, now time.Time) error {
	q := s.db(ctx).Model(&webhookRow{}).Where("id = ?", id)
	var err error
	if answered {
		err = q.Where("failing_since IS NOT NULL").Update("failing_since", nil).Error
	} else {
		err = q.Where("failing_since IS NULL").Update("failing_since", now).Error
	}
	return wrap("record webhook health", err)
}

// DisableFailing turns endpoint id off for failing since before cutoff,
// if it still is: true when this call did it.
func (s *Webhooks) DisableFailing(ctx context.Context, id int64, cutoff time.Time) (bool, error) {
	res := s.db(ctx).Model(&webhookRow{}).Where("id = ? AND enabled = 1 AND failing_since <= ?", id, cutoff).
		Updates(map[string]any{"enabled": false, "disabled_reason": hook.Failing, "disabled_at": gorm.Expr("NOW(6)")})
	if res.Error != nil {
		return false, wrap("disable failing webhook", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Deliveries lists endpoint id's deliveries, newest first, each with its
// attempts: those in state ("" any), before the delivery before (0: from
// the newest), at most limit.
func (s *Webhooks) Deliveries(ctx context.Context, id int64, state hook.State, before int64, limit int) ([]hook.Delivery, error) {
	q := `SELECT ` + deliveryColumns + ` FROM webhook_deliveries d JOIN outbox_events e ON e.event_id = d.event_id WHERE d.webhook_id = ?`
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
		"state": hook.Pending, "next_at": gorm.Expr("NOW(6)"), "attempts": 0, "delivered_at": nil})}).Omit("CreatedAt", "NextAt", "DeliveredAt").CreateInBatches(&rows, 1000).Error
	return wrap("requeue webhook deliveries", err)
}
