package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
)

// A code-only sale through the real programs (issue 45): the operator
// generates codes; an order without one, with a wrong one or with one in
// use is refused; an order whose buyer never pays closes and its code buys
// again (and is paid: kept); then Redis loses every key of the deployment, and the consumer's
// heal watch brings the codes back from MySQL with what they have left:
// a fresh code buys, a code held by a live order is still used. MySQL's
// count of used codes is the live orders' throughout.
func TestACodeOnlySaleThroughTheProgramsAndARedisLoss(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer("SECKILL_HEAL_EVERY=100ms", "SECKILL_CLOSER_EVERY=200ms")
	s := api.CreateSaleWith(10, pipelinetest.SaleOptions{Access: "code_required", PaymentWindow: 4 * time.Second})
	var gen struct {
		Codes []string `json:"codes"`
	}
	if code, err := api.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/codes", s.ActivityID), 1, auth.RoleAdmin,
		map[string]string{"Idempotency-Key": "e2e-codes"}, map[string]any{"count": 3, "uses": 1}, &gen); err != nil || code != 201 || len(gen.Codes) != 3 {
		t.Fatalf("generate: %d %v %v", code, gen.Codes, err)
	}
	a, b, c := gen.Codes[0], gen.Codes[1], gen.Codes[2]
	order := func(buyer, key, accessCode string) pipelinetest.Placed {
		t.Helper()
		pl, err := api.PlaceOrderWithCode(buyer, key, s.ActivityID, 1, accessCode)
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	want := func(pl pipelinetest.Placed, status int, code string) {
		t.Helper()
		if pl.Code != status || pl.Error != code {
			t.Fatalf("answered %d %s, want %d %s", pl.Code, pl.Error, status, code)
		}
	}
	status := func(buyer, no string) string {
		st, _, err := api.OrderStatusAs(buyer, no)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// used is MySQL's count of the sale's used codes, which must be its
	// live orders'.
	used := func() {
		t.Helper()
		u := p.Count("SELECT COALESCE(SUM(used), 0) FROM sale_codes WHERE activity_id = ?", s.ActivityID)
		live := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status IN ('CREATED', 'PAID')", s.ActivityID)
		if u != live {
			t.Fatalf("sale_codes counts %d used, MySQL holds %d live orders", u, live)
		}
	}

	want(order("u1", "k0", ""), 403, "CODE_REQUIRED")
	want(order("u1", "k1", "0000-0000-0000-0000"), 403, "CODE_INVALID")
	first := order("u1", "k2", a)
	want(first, 202, "")
	want(order("u2", "k3", a), 409, "CODE_USED")
	// u1 never pays: the order closes, and its code comes back.
	waittest.Until(t, 30*time.Second, "the unpaid order closed", func() bool { return status("u1", first.OrderNo) == "CLOSED" })
	used()
	again := order("u2", "k4", a)
	want(again, 202, "")
	waittest.Until(t, 20*time.Second, "the second order of code a created", func() bool { return status("u2", again.OrderNo) == "CREATED" })
	// u2 pays: a paid order keeps its code for good.
	if code, err := api.DoAs("POST", "/api/v1/orders/"+again.OrderNo+"/pay", "u2", "", nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("pay: %d %v", code, err)
	}
	used()

	// Redis loses every key of the deployment (the codes' hash, the stock,
	// the heal marker): the watch repairs the stock and loads the codes.
	keys, err := redistest.Keys(context.Background(), p.Redis, p.Prefix+":*")
	if err != nil || len(keys) == 0 {
		t.Fatalf("the deployment's keys: %d, %v", len(keys), err)
	}
	if err := p.Redis.Del(context.Background(), keys...).Err(); err != nil {
		t.Fatal(err)
	}
	var fresh pipelinetest.Placed
	n := 0
	waittest.Until(t, 30*time.Second, "a fresh code buys after the loss", func() bool {
		n++
		fresh = order("u3", "k5-"+strconv.Itoa(n), b)
		return fresh.Code == 202
	})
	waittest.Until(t, 20*time.Second, "the fresh code's order created", func() bool { return status("u3", fresh.OrderNo) == "CREATED" })
	// Code a is held by u2's paid order: the load gave it no use back.
	want(order("u4", "k6", a), 409, "CODE_USED")
	want(order("u5", "k7", c), 202, "")
	used()
}
