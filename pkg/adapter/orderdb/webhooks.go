package orderdb

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/order"
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
