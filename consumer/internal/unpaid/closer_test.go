package unpaid_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/consumer/internal/unpaid"
	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// Exactly one closer acts at a time: while another process holds the
// "closer" lock a pass does nothing and says so; once it is free, it runs.
func TestOneCloserAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	db := mysqltest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &unpaid.Closer{
		Lifecycle: &lifecycle.Service{Tx: db, Events: db.Outbox, DB: db.Orders, Payments: db.Payments, Stock: stockredis.New(rdb, prefix).Reservations, Log: log},
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
	c := &unpaid.Closer{
		Lifecycle: &lifecycle.Service{Tx: p.DB, Events: p.DB.Outbox, DB: p.DB.Orders, Payments: p.DB.Payments, Stock: p.Store.Reservations, Log: log},
		Locker:    lock.New(p.Redis, lock.Options{Prefix: p.Prefix, InstanceID: "closer-test"}),
		Log:       log,
	}
	// Two orders written as the consumer writes them, one past its window.
	expired, live := p.ReserveEvent(s, 1, 1, "k1"), p.ReserveEvent(s, 2, 1, "k2")
	nos := []string{expired.OrderNo, live.OrderNo}
	if _, err := p.Store.Reservations.Claim(ctx, reservation.One(s.ItemID), nos); err != nil {
		t.Fatal(err)
	}
	if _, err := mysqltest.Fulfil(ctx, p.DB.DB, []order.FulfilRequest{
		{Event: expired, PayDeadline: time.Now().Add(-time.Second)},
		{Event: live, PayDeadline: time.Now().Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Store.Reservations.Confirm(ctx, reservation.One(s.ItemID), nos); err != nil {
		t.Fatal(err)
	}

	if st, err := c.Once(ctx); err != nil || st != (lifecycle.Stats{Closed: 1}) {
		t.Fatalf("pass: %+v %v, want one closed", st, err)
	}
	if st, err := c.Once(ctx); err != nil || st != (lifecycle.Stats{}) {
		t.Fatalf("second pass: %+v %v, want nothing", st, err)
	}
	for no, want := range map[string]order.Status{expired.OrderNo: order.Closed, live.OrderNo: order.Created} {
		if o, err := p.DB.Orders.Order(ctx, no); err != nil || o.Status != want {
			t.Errorf("order %s: %+v %v, want %s", no, o, err, want)
		}
	}
	db, err := p.DB.Activities.ItemStock(ctx, s.ItemID)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := p.Store.Stock.Stock(ctx, reservation.One(s.ItemID))
	if err != nil {
		t.Fatal(err)
	}
	if db != 9 || snap.Stock != 9 || snap.Inflight != 0 {
		t.Errorf("MySQL stock %d, Redis %+v; want 9 in both (one live order), none in flight", db, snap)
	}
	_, err = p.Redis.Get(ctx, p.Store.Keys(reservation.One(s.ItemID)).Quota(s.ActivityID, expired.UserID)).Result()
	if !errors.Is(err, redis.Nil) {
		t.Errorf("quota key of the closed order's buyer: %v, want gone", err)
	}
}

// One order the closer cannot close (its item's MySQL stock is at the
// column's maximum, so giving its unit back is out of range) and one whose
// release it cannot finish (its reservation key holds a string: WRONGTYPE)
// do not stop the pass: the orders after them are closed and released.
// Each is logged once with its order number and skipped until its backoff
// ends (an immediate second pass does not try them), then closed once the
// fault is gone.
func TestCloserGoesOnPastAnOrderThatFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	bad, good := p.NewSale(10, 1), p.NewSale(10, 1)
	logBuf := &logstest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logBuf, nil))
	c := &unpaid.Closer{
		Lifecycle: &lifecycle.Service{Tx: p.DB, Events: p.DB.Outbox, DB: p.DB.Orders, Payments: p.DB.Payments, Stock: p.Store.Reservations, Log: log},
		Locker:    lock.New(p.Redis, lock.Options{Prefix: p.Prefix, InstanceID: "closer-test"}),
		Log:       log,
	}
	// Orders written as the consumer writes them, every one past its
	// window, in the order the closer's queries list them.
	exec := func(q string, args ...any) {
		t.Helper()
		if err := p.DB.Gorm().WithContext(ctx).Exec(q, args...).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	deadline := time.Now().Add(-time.Hour)
	write := func(s pipelinetest.Sale, user int64) order.Event {
		t.Helper()
		e := p.ReserveEvent(s, user, 1, fmt.Sprintf("k%d", user))
		if _, err := p.Store.Reservations.Claim(ctx, reservation.One(s.ItemID), []string{e.OrderNo}); err != nil {
			t.Fatal(err)
		}
		deadline = deadline.Add(time.Second)
		if _, err := mysqltest.Fulfil(ctx, p.DB.DB, []order.FulfilRequest{{Event: e, PayDeadline: deadline}}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Store.Reservations.Confirm(ctx, reservation.One(s.ItemID), []string{e.OrderNo}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	unclosable, closable := write(bad, 1), write(good, 2)
	unreleasable, releasable := write(good, 3), write(good, 4)
	// The last two were closed in MySQL a minute ago by a process that died
	// before the Redis release.
	for _, e := range []order.Event{unreleasable, releasable} {
		if _, err := p.DB.Orders.CloseOrder(ctx, "", e.OrderNo, order.ReasonPaymentTimeout); err != nil {
			t.Fatal(err)
		}
		exec("UPDATE orders SET updated_at = NOW(3) - INTERVAL 1 MINUTE WHERE order_no = ?", e.OrderNo)
	}
	exec("UPDATE item_stock SET stock = 2147483647 WHERE item_id = ?", bad.ItemID)
	rkey := p.Store.Keys(reservation.One(good.ItemID)).Reservation(unreleasable.OrderNo)
	if err := p.Redis.Del(ctx, rkey).Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.Redis.Set(ctx, rkey, "not a hash", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}

	st, err := c.Once(ctx)
	if st != (lifecycle.Stats{Closed: 1, Finished: 1}) {
		t.Fatalf("pass: %+v %v, want the good order closed and the good release finished", st, err)
	}
	status := func(e order.Event) (order.Status, bool) {
		t.Helper()
		o, err := p.DB.Orders.Order(ctx, e.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		return o.Status, p.Count("SELECT COUNT(*) FROM orders WHERE order_no = ? AND released_at IS NOT NULL", e.OrderNo) == 1
	}
	for _, c := range []struct {
		e        order.Event
		want     order.Status
		released bool
	}{{unclosable, order.Created, false}, {closable, order.Closed, true}, {unreleasable, order.Closed, false}, {releasable, order.Closed, true}} {
		if st, rel := status(c.e); st != c.want || rel != c.released {
			t.Errorf("order %s: %s released %v, want %s released %v", c.e.OrderNo, st, rel, c.want, c.released)
		}
	}
	failures := func(no string) int {
		n := 0
		for _, l := range strings.Split(logBuf.String(), "\n") {
			if strings.Contains(l, "a record failed in a periodic pass") && strings.Contains(l, `"order_no":"`+no+`"`) {
				n++
			}
		}
		return n
	}
	if failures(unclosable.OrderNo) != 1 || failures(unreleasable.OrderNo) != 1 {
		t.Fatalf("failure lines: %d for the unclosable order, %d for the unreleasable one; want 1 each:\n%s",
			failures(unclosable.OrderNo), failures(unreleasable.OrderNo), logBuf.String())
	}
	// Within their backoff a pass does not try them again.
	if st, err := c.Once(ctx); err != nil || st != (lifecycle.Stats{}) {
		t.Fatalf("second pass: %+v %v, want nothing", st, err)
	}
	if failures(unclosable.OrderNo) != 1 || failures(unreleasable.OrderNo) != 1 {
		t.Fatalf("the second pass tried them again:\n%s", logBuf.String())
	}

	// The faults gone, the next pass after their backoff closes them.
	exec("UPDATE item_stock SET stock = 9 WHERE item_id = ?", bad.ItemID)
	if err := p.Redis.Del(ctx, rkey).Err(); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 30*time.Second, "the two orders to be closed and released", func() bool {
		if _, err := c.Once(ctx); err != nil {
			t.Fatal(err)
		}
		s1, r1 := status(unclosable)
		_, r2 := status(unreleasable)
		return s1 == order.Closed && r1 && r2
	})
	if n, err := p.DB.Activities.ItemStock(ctx, bad.ItemID); err != nil || n != 10 {
		t.Fatalf("MySQL stock of the unclosable order's item: %d %v, want 10", n, err)
	}
}
