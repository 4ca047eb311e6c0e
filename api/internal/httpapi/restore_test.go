package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// brokenPublisher fails every publish, as an unreachable Kafka does.
type brokenPublisher struct{}

func (brokenPublisher) Publish(context.Context, order.Event) error {
	return fmt.Errorf("publish: %w: broker down", order.ErrUnavailable)
}

// A buyer answered 503 keeps that promise even after Redis comes back from
// an older state that still has the attempt reserved under the buyer's key:
// MySQL holds the attempt FAILED, so the key buys anew and the resurrected
// reservation gives its unit back.
func TestKeyOf503FreeAfterRedisWentBack(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	item, act := ts.openSale(t, 10, 1)
	alice := buyerToken(t, 1)
	broken := ts.serve(t, ts.service(t, brokenPublisher{}), nil)
	if r := ts.place(t, broken, alice, "checkout-1", act); r.status != http.StatusServiceUnavailable {
		t.Fatalf("publish failed: status %d, want 503; body %s", r.status, r.body)
	}
	ctx := context.Background()
	var failed order.Order
	err := ts.db.Gorm().Raw("SELECT order_no, failure_reason FROM orders WHERE item_id = ? AND status = 'FAILED'", item).
		Row().Scan(&failed.OrderNo, &failed.FailureReason)
	if err != nil || failed.FailureReason != order.ReasonPublishFailed {
		t.Fatalf("the 503 left no FAILED record in MySQL: %+v %v", failed, err)
	}

	// Redis goes back to the moment after the reserve script ran.
	rdb, k := ts.rdb, ts.store.Keys(reservation.One(item))
	rdb.DecrBy(ctx, k.Stock(), 1)
	rdb.IncrBy(ctx, k.Inflight(), 1)
	rdb.ZAdd(ctx, k.Pending(), redis.Z{Score: float64(time.Now().UnixMilli()), Member: failed.OrderNo})
	rdb.HSet(ctx, k.Reservation(failed.OrderNo), "state", "RESERVED")
	rdb.Set(ctx, k.Quota(act, "1"), failed.OrderNo, time.Hour)
	rdb.Set(ctx, k.Idem("1", "checkout-1"), failed.OrderNo, time.Hour)

	again := ts.mustPlace(t, ts.url, alice, "checkout-1", act)
	if again == failed.OrderNo {
		t.Fatalf("the key of a 503 answered with that attempt's order %s", again)
	}
	if snap := ts.stock(t, item); snap.Stock != 9 || snap.Inflight != 1 {
		t.Fatalf("after the retry: %+v, want stock 9 with 1 in flight (the old attempt's unit back)", snap)
	}
	if st := rdb.HGet(ctx, k.Reservation(failed.OrderNo), "state").Val(); st != "RELEASED" {
		t.Fatalf("the resurrected reservation is %s, want RELEASED", st)
	}
}
