package e2e_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// An order the api accepted is its buyer's PENDING order until it is final,
// also when Redis lost its reservation before the consumer wrote it (Redis
// restored from an older state): any api instance tells the number it
// issued from one never issued by its signature. Another user's order, a
// number never issued and a forged one stay 404.
func TestAcceptedOrderPendingAfterRedisLostIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	// The consumer is not running yet: the order stays on its way.
	api := p.StartAPI()
	other := p.StartAPI()
	sale := api.CreateSale(10, 1)
	placed, err := api.PlaceOrder(1, "pending-1", sale.ActivityID, 1)
	if err != nil || placed.Code != 202 || placed.Status != string(order.Pending) {
		t.Fatalf("place: %+v %v", placed, err)
	}
	no := placed.OrderNo
	if n, err := p.Redis.Del(ctx, p.Store.Keys(reservation.One(sale.ItemID)).Reservation(no)).Result(); err != nil || n != 1 {
		t.Fatalf("delete the reservation: %d %v", n, err)
	}

	sc := newSpecCheck(t, api.URL, other.URL)
	buyer, stranger := pipelinetest.Token(1, ""), pipelinetest.Token(2, "")
	for _, base := range []string{api.URL, other.URL} {
		var got struct {
			OrderNo    string `json:"order_no"`
			Status     string `json:"status"`
			ItemID     int64  `json:"item_id"`
			ActivityID *int64 `json:"activity_id"`
			CreatedAt  time.Time
		}
		b := sc.do(base, specCall{method: "GET", path: "/api/v1/orders/" + no, token: buyer}, 200)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.OrderNo != no || got.Status != string(order.Pending) || got.ItemID != sale.ItemID {
			t.Fatalf("%s: the buyer's order is %s, want PENDING of item %d", base, b, sale.ItemID)
		}
		sc.do(base, specCall{method: "GET", path: "/api/v1/orders/" + no, token: stranger}, 404)
	}
	forged := []byte(no)
	if forged[25] == '0' {
		forged[25] = '1'
	} else {
		forged[25] = '0'
	}
	for _, never := range []string{string(forged), order.NewNumberGenerator().Next(sale.ItemID)} {
		sc.do(api.URL, specCall{method: "GET", path: "/api/v1/orders/" + never, token: buyer}, 404)
	}
	// Paying it now is "still being placed", not "no such order".
	sc.do(api.URL, specCall{method: "POST", path: "/api/v1/orders/" + no + "/pay", token: buyer}, 409)

	p.StartConsumer()
	var final string
	waittest.Until(t, 60*time.Second, "the order to be final", func() bool {
		st, _, err := api.OrderStatus(1, no)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		final = st
		return st != string(order.Pending)
	})
	if o, err := p.DB.Orders.Order(ctx, no); err != nil || string(o.Status) != final {
		t.Fatalf("MySQL has %+v %v; the api answered %s", o, err, final)
	}
	sc.do(api.URL, specCall{method: "GET", path: "/api/v1/orders/" + no, token: stranger}, 404)
}
