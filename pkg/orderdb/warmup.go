package orderdb

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/order"
)

// DueForWarmup lists the activities never warmed up (warmed_at NULL) that
// start by by and have not ended at now, by start.
func (db *DB) DueForWarmup(ctx context.Context, by, now time.Time) ([]order.Activity, error) {
	var rows []activityRow
	err := db.gdb.WithContext(ctx).Where("warmed_at IS NULL AND starts_at <= ? AND ends_at > ?", by.UTC(), now.UTC()).
		Order("starts_at, id").Find(&rows).Error
	if err != nil {
		return nil, wrap("list activities due for warm-up", err)
	}
	out := make([]order.Activity, len(rows))
	for i, row := range rows {
		out[i] = row.activity()
	}
	return out, nil
}

// MarkActivityWarmed records that the activity's stock was loaded into
// Redis now.
func (db *DB) MarkActivityWarmed(ctx context.Context, id int64) error {
	err := db.gdb.WithContext(ctx).Table("activities").Where("id = ?", id).Update("warmed_at", gorm.Expr("NOW(3)")).Error
	return wrap("mark activity warmed", err)
}

// ActivityWarmedAt is when the activity was last warmed up (zero: never).
func (db *DB) ActivityWarmedAt(ctx context.Context, id int64) (time.Time, error) {
	var row struct{ WarmedAt *time.Time }
	if err := db.gdb.WithContext(ctx).Table("activities").Select("warmed_at").Where("id = ?", id).Take(&row).Error; err != nil {
		return time.Time{}, wrap("read activity", err)
	}
	if row.WarmedAt == nil {
		return time.Time{}, nil
	}
	return *row.WarmedAt, nil
}
