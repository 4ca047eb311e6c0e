package e2e_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/payment"
)

// Identifiers that differ only in case are different, through the running
// programs: the provider's transaction `ab1` after `Ab1` (another order)
// pays its order, restock key `r1` after `R1` adds its units, and buyers
// `Alice` and `alice` each hold a live order in one sale.
func TestIdentifiersCompareBytes(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSaleWith(10, pipelinetest.SaleOptions{Price: 1500, Currency: "EUR"})

	nos := map[string]string{}
	for _, u := range []string{"Alice", "alice"} {
		pl, err := api.PlaceOrderAs(u, "key-1", sale.ActivityID, 1)
		if err != nil || pl.Code != 202 {
			t.Fatalf("order of %s: %+v %v", u, pl, err)
		}
		nos[u] = pl.OrderNo
	}
	if nos["Alice"] == nos["alice"] {
		t.Fatalf("Alice and alice got one order %s", nos["Alice"])
	}
	got := p.WaitFinal(map[string]int64{nos["Alice"]: 0, nos["alice"]: 0}, 30*time.Second)
	for u, no := range nos {
		if o := got[no]; o.Status != order.Created || o.UserID != u {
			t.Fatalf("order of %s: %+v, want CREATED and theirs", u, o)
		}
	}

	secret := []byte(pipelinetest.PaymentSecret)
	for _, c := range []struct{ tx, user string }{{"Ab1", "Alice"}, {"ab1", "alice"}} {
		body := notification(t, c.tx, nos[c.user], 1500, "EUR")
		code, n := notify(t, api, body, payment.Sign(secret, body, time.Now()))
		if code != 200 || n.Outcome != "PAID" || n.OrderStatus != "PAID" || n.Duplicate {
			t.Fatalf("notification %s for %s's order: %d %+v, want a new payment that pays it", c.tx, c.user, code, n)
		}
	}
	if n := p.Count("SELECT COUNT(*) FROM payments WHERE outcome = 'PAID'"); n != 2 {
		t.Fatalf("%d PAID payments, want 2", n)
	}

	for i, key := range []string{"R1", "r1"} {
		r := restock(t, api, sale.ItemID, key, 5)
		if r.Code != 200 || r.Replayed || r.DBStock != int64(8+5*(i+1)) {
			t.Fatalf("restock %s: %+v, want a new restock of 5 (MySQL stock %d)", key, r, 8+5*(i+1))
		}
	}
	if r := restock(t, api, sale.ItemID, "r1", 5); r.Code != 200 || !r.Replayed || r.DBStock != 18 {
		t.Fatalf("repeat of restock r1: %+v, want the first answer replayed", r)
	}
}
