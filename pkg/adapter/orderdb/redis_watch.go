package orderdb

import (
	"context"
	"errors"
	"strings"

	"gorm.io/gorm"
)

// RedisWatch is what the consumer's data-loss watch knows of one Redis
// dataset (the redis_watches row of its generation marker). Every write to
// it is idempotent or only moves it forward, so a write whose answer was
// lost can be sent again, or not, without harm.
type RedisWatch struct {
	Marker string
	// Generation is the highest value a watch wrote to the marker; 0: none
	// yet.
	Generation int64
	// RunIDs are the masters' run ids last seen, "addr=run_id" sorted and
	// comma-separated; "" before the first look.
	RunIDs string
	// Losses counts the losses detected; Healed is the count a finished
	// repair covers. Healed < Losses: a repair is owed.
	Losses, Healed int64
	// LastLoss describes the last loss detected ("" for none).
	LastLoss string
}

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
func (s *RedisWatches) RedisWatch(ctx context.Context, marker string) (RedisWatch, error) {
	g := s.gdb.WithContext(ctx)
	var row redisWatchRow
	err := g.Where("marker = ?", marker).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		if err := g.Exec("INSERT IGNORE INTO redis_watches (marker) VALUES (?)", marker).Error; err != nil {
			return RedisWatch{}, wrap("make the Redis watch record", err)
		}
		err = g.Where("marker = ?", marker).Take(&row).Error
	}
	if err != nil {
		return RedisWatch{}, wrap("read the Redis watch record", err)
	}
	w := RedisWatch{Marker: row.Marker, Generation: row.Generation, RunIDs: row.RunIDs, Losses: row.Losses, Healed: row.Healed}
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
	err := s.gdb.WithContext(ctx).Exec(`UPDATE redis_watches SET losses = losses + 1, last_loss = ?, lost_at = NOW(3)
		WHERE marker = ?`, what, marker).Error
	return wrap("record a Redis data loss", err)
}

// RecordRedisSeen records what a watch saw and wrote: the marker's
// generation is raised to generation (never lowered), and the run ids are
// set to runIDs if they still are oldRunIDs (a watch that read them before
// another recorded newer ones leaves those).
func (s *RedisWatches) RecordRedisSeen(ctx context.Context, marker, oldRunIDs, runIDs string, generation int64) error {
	err := s.gdb.WithContext(ctx).Exec(`UPDATE redis_watches
		SET generation = GREATEST(generation, ?), run_ids = IF(run_ids = ?, ?, run_ids)
		WHERE marker = ?`, generation, oldRunIDs, runIDs, marker).Error
	return wrap("record what the Redis watch saw", err)
}

// RecordRedisHealed records that a finished repair covers the first losses
// losses (never lowered).
func (s *RedisWatches) RecordRedisHealed(ctx context.Context, marker string, losses int64) error {
	err := s.gdb.WithContext(ctx).Exec("UPDATE redis_watches SET healed = GREATEST(healed, ?) WHERE marker = ?",
		losses, marker).Error
	return wrap("record a Redis repair", err)
}
