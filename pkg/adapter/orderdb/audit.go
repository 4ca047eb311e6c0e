package orderdb

import (
	"context"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
)

// Audit stores the operator actions on the sales (sale_audit, 0021).
type Audit struct{ conn }

type auditRow struct {
	ID         int64 `gorm:"primaryKey"`
	ActivityID int64
	Action     string
	Subject    string
	Detail     string
	At         time.Time
}

func (auditRow) TableName() string { return "sale_audit" }

// RecordAction writes e in the transaction ctx carries (the action's own):
// the action and its record commit together or not at all.
func (s *Audit) RecordAction(ctx context.Context, e activity.AuditEntry) error {
	row := auditRow{ActivityID: e.ActivityID, Action: string(e.Action), Subject: e.Subject, Detail: e.Detail, At: e.At.UTC()}
	return wrap("record the operator's action", s.db(ctx).Create(&row).Error)
}

// Actions returns up to limit of sale id's recorded actions, newest first,
// those with an id below before when before is above 0 (the next page).
func (s *Audit) Actions(ctx context.Context, id, before int64, limit int) ([]activity.AuditEntry, error) {
	q := s.db(ctx).Where("activity_id = ?", id)
	if before > 0 {
		q = q.Where("id < ?", before)
	}
	var rows []auditRow
	if err := q.Order("id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, wrap("read the sale's audit", err)
	}
	out := make([]activity.AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = activity.AuditEntry{ID: r.ID, ActivityID: r.ActivityID, Action: activity.Action(r.Action), Subject: r.Subject,
			Detail: r.Detail, At: r.At.UTC()}
	}
	return out, nil
}
