package closer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/seckill/seckill/consumer/internal/closer"
	"github.com/seckill/seckill/pkg/lifecycle"
	"github.com/seckill/seckill/pkg/lock"
	"github.com/seckill/seckill/pkg/mysqltest"
	"github.com/seckill/seckill/pkg/redistest"
	"github.com/seckill/seckill/pkg/stockredis"
)

// Exactly one closer acts at a time: while another process holds the
// "closer" lock a pass does nothing and says so; once it is free, it runs.
func TestOneCloserAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	db := mysqltest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &closer.Closer{
		Lifecycle: &lifecycle.Service{DB: db.DB, Stock: stockredis.New(rdb, prefix), Log: log},
		Locker:    lock.New(rdb, lock.Options{Prefix: prefix, InstanceID: "closer-a"}),
		Log:       log,
	}
	other, err := lock.New(rdb, lock.Options{Prefix: prefix, InstanceID: "closer-b"}).TryLock(ctx, "closer")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Once(ctx); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("pass while another closer holds the lock: %v, want ErrNotAcquired", err)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Once(ctx); err != nil {
		t.Fatalf("pass with the lock free: %v", err)
	}
}
