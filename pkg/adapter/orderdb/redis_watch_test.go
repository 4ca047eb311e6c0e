package orderdb_test

import (
	"context"
	"testing"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/heal"
)

// The watch's record only moves forward: the generation and healed are
// never lowered, the run ids change only from the value the writer read,
// and each marker has its own row, made empty on first read.
func TestRedisWatchRecordMovesForward(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := mysqltest.New(t)
	const m = "sk:heal:generation"
	read := func() heal.RedisWatch {
		t.Helper()
		rec, err := db.RedisWatches.RedisWatch(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	if rec := read(); rec != (heal.RedisWatch{Marker: m}) {
		t.Fatalf("a new record %+v, want an empty one", rec)
	}
	steps := []struct {
		name string
		do   func() error
		want heal.RedisWatch
	}{
		{"first look", func() error { return db.RedisWatches.RecordRedisSeen(ctx, m, "", "a=1", 1) },
			heal.RedisWatch{Marker: m, Generation: 1, RunIDs: "a=1"}},
		{"raised", func() error { return db.RedisWatches.RecordRedisSeen(ctx, m, "a=1", "a=1", 5) },
			heal.RedisWatch{Marker: m, Generation: 5, RunIDs: "a=1"}},
		{"a late writer's lower generation and stale run ids", func() error { return db.RedisWatches.RecordRedisSeen(ctx, m, "", "a=0", 3) },
			heal.RedisWatch{Marker: m, Generation: 5, RunIDs: "a=1"}},
		{"a loss", func() error { return db.RedisWatches.RecordRedisLoss(ctx, m, "restart: a run_id 1 -> 2") },
			heal.RedisWatch{Marker: m, Generation: 5, RunIDs: "a=1", Losses: 1, LastLoss: "restart: a run_id 1 -> 2"}},
		{"the same loss seen by another watch", func() error { return db.RedisWatches.RecordRedisLoss(ctx, m, "restart: a run_id 1 -> 2") },
			heal.RedisWatch{Marker: m, Generation: 5, RunIDs: "a=1", Losses: 2, LastLoss: "restart: a run_id 1 -> 2"}},
		{"moved on", func() error { return db.RedisWatches.RecordRedisSeen(ctx, m, "a=1", "a=2", 6) },
			heal.RedisWatch{Marker: m, Generation: 6, RunIDs: "a=2", Losses: 2, LastLoss: "restart: a run_id 1 -> 2"}},
		{"healed", func() error { return db.RedisWatches.RecordRedisHealed(ctx, m, 2) },
			heal.RedisWatch{Marker: m, Generation: 6, RunIDs: "a=2", Losses: 2, Healed: 2, LastLoss: "restart: a run_id 1 -> 2"}},
		{"a late close of an older incident", func() error { return db.RedisWatches.RecordRedisHealed(ctx, m, 1) },
			heal.RedisWatch{Marker: m, Generation: 6, RunIDs: "a=2", Losses: 2, Healed: 2, LastLoss: "restart: a run_id 1 -> 2"}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if rec := read(); rec != s.want {
			t.Fatalf("%s: record %+v, want %+v", s.name, rec, s.want)
		}
	}
	if rec, err := db.RedisWatches.RedisWatch(ctx, "other:heal:generation"); err != nil || rec.Generation != 0 || rec.Losses != 0 {
		t.Fatalf("another marker's record %+v (%v), want its own empty one", rec, err)
	}
}
