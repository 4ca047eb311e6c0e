package orderdb

import (
	"context"
	"errors"
	"strings"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/domain/heal"
)

type redisWatchRow struct {
	Marker     string `gorm:"primaryKey"`
	Generation int64
	RunIDs     string `gorm:"column:run_ids"`
	Losses     int64
	Healed     int64
	LastLoss   *string
}

func (redisWatchRow) TableName() string { return "redis_watches" }

// RedisWatch returns the record of the dataset whose marker is marker,
// making an empty one the first time.
func (s *RedisWatches) RedisWatch(ctx context.Context, marker string) (heal.RedisWatch, error) {
	g := s.db(ctx)
	var row redisWatchRow
	err := g.Where("marker = ?", marker).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		if err := g.Exec("INSERT IGNORE INTO redis_watches (marker) VALUES (?)", marker).Error; err != nil {
			return heal.RedisWatch{}, wrap("make the Redis watch record", err)
		}
		err = g.Where("marker = ?", marker).Take(&row).Error
	}
	if err != nil {
		return heal.RedisWatch{}, wrap("read the Redis watch record", err)
	}
	w := heal.RedisWatch{Marker: row.Marker, Generation: row.Generation, RunIDs: row.RunIDs, Losses: row.Losses, Healed: row.Healed}
	if row.LastLoss != nil {
		w.LastLoss = *row.LastLoss
	}
	return w, nil
}

// RecordRedisLoss counts one loss detected, described by what.
func (s *RedisWatches) RecordRedisLoss(ctx context.Context, marker, what string) error {
	if len(what) > 512 {
		what = strings.ToValidUTF8(what[:512], "")
	}
	err := s.db(ctx).Exec(`UPDATE redis_watches SET losses = losses + 1, last_loss = ?, lost_at = NOW(3)
		WHERE marker = ?`, what, marker).Error
	return wrap("record a Redis data loss", err)
}

// RecordRedisSeen records what a watch saw and wrote: the marker's
// generation is raised to generation (never lowered), and the run ids are
// set to runIDs if they still are oldRunIDs (a watch that read them before
// another recorded newer ones leaves those).
func (s *RedisWatches) RecordRedisSeen(ctx context.Context, marker, oldRunIDs, runIDs string, generation int64) error {
	err := s.db(ctx).Exec(`UPDATE redis_watches
		SET generation = GREATEST(generation, ?), run_ids = IF(run_ids = ?, ?, run_ids)
		WHERE marker = ?`, generation, oldRunIDs, runIDs, marker).Error
	return wrap("record what the Redis watch saw", err)
}

// RecordRedisHealed records that a finished repair covers the first losses
// losses (never lowered).
func (s *RedisWatches) RecordRedisHealed(ctx context.Context, marker string, losses int64) error {
	err := s.db(ctx).Exec("UPDATE redis_watches SET healed = GREATEST(healed, ?) WHERE marker = ?",
		losses, marker).Error
	return wrap("record a Redis repair", err)
}
