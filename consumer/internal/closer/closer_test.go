package closer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/consumer/internal/closer"
	"github.com/seckill/seckill/pkg/lifecycle"
	"github.com/seckill/seckill/pkg/lock"
	"github.com/seckill/seckill/pkg/mysqltest"
	"github.com/seckill/seckill/pkg/order"
	"github.com/seckill/seckill/pkg/orderdb"
	"github.com/seckill/seckill/pkg/pipelinetest"
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

// A pass closes the orders unpaid past their window, once: MySQL says
// CLOSED, the units are back in both stores and the buyer's quota is free;
// an order still within its window stays CREATED.
func TestOnceClosesExpiredOrders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	s := p.NewSale(10, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &closer.Closer{
		Lifecycle: &lifecycle.Service{DB: p.DB.DB, Stock: p.Store, Log: log},
		Locker:    lock.New(p.Store.Client(), lock.Options{Prefix: p.Prefix, InstanceID: "closer-test"}),
		Log:       log,
	}
	// Two orders written as the consumer writes them, one past its window.
	expired, live := p.ReserveEvent(s, 1, 1, "k1"), p.ReserveEvent(s, 2, 1, "k2")
	nos := []string{expired.OrderNo, live.OrderNo}
	if _, err := p.Store.Claim(ctx, s.ItemID, nos); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DB.Fulfil(ctx, s.ItemID, []orderdb.Request{
		{Event: expired, PayDeadline: time.Now().Add(-time.Second)},
		{Event: live, PayDeadline: time.Now().Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Store.Confirm(ctx, s.ItemID, nos); err != nil {
		t.Fatal(err)
	}

	if st, err := c.Once(ctx); err != nil || st != (lifecycle.Stats{Closed: 1}) {
		t.Fatalf("pass: %+v %v, want one closed", st, err)
	}
	if st, err := c.Once(ctx); err != nil || st != (lifecycle.Stats{}) {
		t.Fatalf("second pass: %+v %v, want nothing", st, err)
	}
	for no, want := range map[string]order.Status{expired.OrderNo: order.Closed, live.OrderNo: order.Created} {
		if o, err := p.DB.Order(ctx, no); err != nil || o.Status != want {
			t.Errorf("order %s: %+v %v, want %s", no, o, err, want)
		}
	}
	db, err := p.DB.ItemStock(ctx, s.ItemID)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := p.Store.Stock(ctx, s.ItemID)
	if err != nil {
		t.Fatal(err)
	}
	if db != 9 || snap.Stock != 9 || snap.Inflight != 0 {
		t.Errorf("MySQL stock %d, Redis %+v; want 9 in both (one live order), none in flight", db, snap)
	}
	_, err = p.Store.Client().Get(ctx, p.Store.Keys(s.ItemID).Quota(s.ActivityID, expired.UserID)).Result()
	if !errors.Is(err, redis.Nil) {
		t.Errorf("quota key of the closed order's buyer: %v, want gone", err)
	}
}
