package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/segmentio/kafka-go"
)

// The same user sending the same Idempotency-Key again, after the order
// reached MySQL, gets the same order number with the order's status now
// (CREATED, then PAID; FAILED for an order MySQL refused), and never a
// second order, reservation or event.
func TestIdempotencyKeyReplayAfterTheOrderIsFinal(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSale(3, 1)
	const alice, bob = 1, 2

	// replay sends the key again and wants the original number and status.
	replay := func(user int64, key, no string, want order.Status) {
		t.Helper()
		for range 2 {
			pl, err := api.PlaceOrder(user, key, sale.ActivityID, 1)
			if err != nil || pl.Code != 202 || pl.OrderNo != no || pl.Status != string(want) {
				t.Fatalf("replay of user %d key %s: %+v %v; want 202 %s %s", user, key, pl, err, no, want)
			}
		}
	}

	first, err := api.PlaceOrder(alice, "alice-1", sale.ActivityID, 1)
	if err != nil || first.Code != 202 || first.Status != string(order.Pending) {
		t.Fatalf("alice: %+v %v", first, err)
	}
	if got := p.WaitFinal(map[string]int64{first.OrderNo: alice}, 30*time.Second); got[first.OrderNo].Status != order.Created {
		t.Fatalf("alice's order ended %+v, want CREATED", got[first.OrderNo])
	}
	replay(alice, "alice-1", first.OrderNo, order.Created)
	if code, err := api.Do("POST", "/api/v1/orders/"+first.OrderNo+"/pay", alice, "", nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("pay: %d %v", code, err)
	}
	replay(alice, "alice-1", first.OrderNo, order.Paid)

	// MySQL loses the 2 units Redis still offers: bob's order is accepted
	// by Redis and refused by MySQL.
	if err := p.DB.Activities.SetItemStock(context.Background(), sale.ItemID, 0); err != nil {
		t.Fatal(err)
	}
	second, err := api.PlaceOrder(bob, "bob-1", sale.ActivityID, 1)
	if err != nil || second.Code != 202 {
		t.Fatalf("bob: %+v %v", second, err)
	}
	got := p.WaitFinal(map[string]int64{second.OrderNo: bob}, 30*time.Second)
	if o := got[second.OrderNo]; o.Status != order.Failed || o.FailureReason != order.ReasonOutOfStock {
		t.Fatalf("bob's order ended %+v, want FAILED OUT_OF_STOCK", o)
	}
	replay(bob, "bob-1", second.OrderNo, order.Failed)
	replay(alice, "alice-1", first.OrderNo, order.Paid)

	var rows []struct {
		UserID int64
		N      int64
	}
	if err := p.DB.Gorm().Raw("SELECT user_id, COUNT(*) AS n FROM orders WHERE activity_id = ? GROUP BY user_id ORDER BY user_id",
		sale.ActivityID).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].UserID != alice || rows[0].N != 1 || rows[1].UserID != bob || rows[1].N != 1 {
		t.Fatalf("order rows per user %+v, want one for alice and one for bob", rows)
	}
	if n := topicEnd(t, p.Topic); n != 2 {
		t.Fatalf("%d events published, want 2 (replays publish nothing)", n)
	}
	p.WaitDrained(sale.ItemID, 30*time.Second)
	check := sale
	check.Stock = 1 // alice's unit; MySQL lost the other 2
	if inv := p.Check(check); inv.DBStock != 0 || inv.RedisStock != 0 || inv.LiveOrders != 1 {
		t.Fatalf("final %+v, want both stores at 0 and alice's order live", inv)
	}
}

// topicEnd is the number of messages ever written to partition 0 of topic.
func topicEnd(t *testing.T, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", kafkatest.Brokers()[0], topic, 0)
	if err != nil {
		t.Fatalf("dial leader of %s: %v", topic, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	end, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatalf("end offset of %s: %v", topic, err)
	}
	return end
}

// Redis loses a key's idempotency record after the key's order was
// cancelled (Redis brought back from an older state does that): the
// replay reserves a new order number, and MySQL, the final truth, refuses
// it: the new order ends FAILED DUPLICATE_REQUEST, takes no unit, and the
// buyer holds the one order the key made.
func TestIdempotencyKeyReplayAfterRedisLostItsRecord(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSale(3, 1)
	const alice = 1
	ctx := context.Background()

	first, err := api.PlaceOrder(alice, "alice-1", sale.ActivityID, 1)
	if err != nil || first.Code != 202 {
		t.Fatalf("alice: %+v %v", first, err)
	}
	if got := p.WaitFinal(map[string]int64{first.OrderNo: alice}, 30*time.Second); got[first.OrderNo].Status != order.Created {
		t.Fatalf("alice's order ended %+v, want CREATED", got[first.OrderNo])
	}
	if code, b := act(t, api, "1", first.OrderNo, "cancel"); code != 200 || b.Status != string(order.Closed) {
		t.Fatalf("cancel: %d %+v", code, b)
	}
	// This test's own prefix only: the key's record, as a Redis brought
	// back from before the order would lack it.
	idem := p.Store.Keys(reservation.One(sale.ItemID)).Idem("1", "alice-1")
	if n, err := p.Redis.Del(ctx, idem).Result(); err != nil || n != 1 {
		t.Fatalf("delete %s: %d %v, want the record there", idem, n, err)
	}

	replay, err := api.PlaceOrder(alice, "alice-1", sale.ActivityID, 1)
	if err != nil || replay.Code != 202 || replay.OrderNo == first.OrderNo {
		t.Fatalf("replay after the record was lost: %+v %v, want 202 with a new order number", replay, err)
	}
	got := p.WaitFinal(map[string]int64{replay.OrderNo: alice}, 30*time.Second)
	if o := got[replay.OrderNo]; o.Status != order.Failed || o.FailureReason != order.ReasonDuplicateRequest {
		t.Fatalf("the replay's order ended %s %q, want FAILED %s", o.Status, o.FailureReason, order.ReasonDuplicateRequest)
	}
	waittest.Until(t, 20*time.Second, "the buyer reads FAILED DUPLICATE_REQUEST", func() bool {
		st, reason, err := api.OrderStatus(alice, replay.OrderNo)
		return err == nil && st == string(order.Failed) && reason == order.ReasonDuplicateRequest
	})
	if n := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND user_id = ? AND status <> 'FAILED'",
		sale.ActivityID, "1"); n != 1 {
		t.Fatalf("alice holds %d orders, want 1 (the cancelled one)", n)
	}
	p.WaitDrained(sale.ItemID, 30*time.Second)
	if inv := p.Check(sale); inv.DBStock != 3 || inv.RedisStock != 3 || inv.LiveOrders != 0 {
		t.Fatalf("final %+v, want all 3 units in both stores and no live order", inv)
	}
}
