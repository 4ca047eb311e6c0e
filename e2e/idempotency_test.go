package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/kafkatest"
	"github.com/seckill/seckill/pkg/order"
	"github.com/seckill/seckill/pkg/pipelinetest"
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
	if err := p.DB.SetItemStock(context.Background(), sale.ItemID, 0); err != nil {
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
