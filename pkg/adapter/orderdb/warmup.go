package orderdb

import (
	"context"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"gorm.io/gorm"
)

// DueForWarmup lists up to limit activities never warmed up (warmed_at
// NULL) that start by by and have not ended at now, by start and id, after
// the one that starts at afterStart with id afterID (afterID 0: from the
// first), so a caller pages through them. It reads only the sales not
// warmed up that have not ended (idx_activities_unwarmed, 0011), never the
// past ones that ended without a warm-up.
func (s *Activities) DueForWarmup(ctx context.Context, by, now time.Time, afterStart time.Time, afterID int64, limit int) ([]activity.Activity, error) {
	var rows []activityRow
	q := s.db(ctx).Table("activities FORCE INDEX (idx_activities_unwarmed)").
		Where("warmed_at IS NULL AND ends_at > "+timeParam+" AND starts_at <= "+timeParam, now.UTC(), by.UTC())
	if afterID != 0 {
		q = q.Where("(starts_at > "+timeParam+" OR (starts_at = "+timeParam+" AND id > ?))", afterStart.UTC(), afterStart.UTC(), afterID)
	}
	err := q.Order("starts_at, id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, wrap("list activities due for warm-up", err)
	}
	out := make([]activity.Activity, len(rows))
	for i, row := range rows {
		out[i] = row.activity()
	}
	return out, wrap("list activities due for warm-up", withItems(s.db(ctx), out))
}

// MarkActivityWarmed records that the activity's stock was loaded into
// Redis now.
func (s *Activities) MarkActivityWarmed(ctx context.Context, id int64) error {
	err := s.db(ctx).Table("activities").Where("id = ?", id).Update("warmed_at", gorm.Expr("NOW(3)")).Error
	return wrap("mark activity warmed", err)
}

// ActivityWarmedAt is when the activity was last warmed up (zero: never).
func (s *Activities) ActivityWarmedAt(ctx context.Context, id int64) (time.Time, error) {
	var row struct{ WarmedAt *time.Time }
	if err := s.db(ctx).Table("activities").Select("warmed_at").Where("id = ?", id).Take(&row).Error; err != nil {
		return time.Time{}, wrap("read activity", err)
	}
	if row.WarmedAt == nil {
		return time.Time{}, nil
	}
	return *row.WarmedAt, nil
}
