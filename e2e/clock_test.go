package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

// saleEnding creates, through api, an item with stock units and a sale of
// it that started a minute ago and ends at ends, and warms it up.
func saleEnding(t *testing.T, api *pipelinetest.API, stock int64, ends time.Time) pipelinetest.Sale {
	t.Helper()
	var item struct {
		ItemID int64 `json:"item_id"`
	}
	if code, err := api.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil, map[string]any{"name": "clock", "stock": stock}, &item); err != nil || code != 201 {
		t.Fatalf("create item: %d %v", code, err)
	}
	var act struct {
		ActivityID int64 `json:"activity_id"`
	}
	body := map[string]any{"item_id": item.ItemID, "starts_at": time.Now().UTC().Add(-time.Minute), "ends_at": ends.UTC(), "per_user_limit": 1}
	if code, err := api.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil, body, &act); err != nil || code != 201 {
		t.Fatalf("create activity: %d %v", code, err)
	}
	if code, err := api.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/warmup", act.ActivityID), 1, auth.RoleAdmin, nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("warmup: %d %v", code, err)
	}
	return pipelinetest.Sale{ItemID: item.ItemID, ActivityID: act.ActivityID, Stock: stock}
}

// An api instance whose own clock is 10 s behind (SECKILL_TEST_CLOCK_OFFSET)
// still decides a sale's end by the one shared clock: it refuses orders
// after ends_at and, within activity.CopyTTL, after an end another
// instance answered; an end it handles itself ends the sale now, not 10 s
// ago. Every order it answered 202 ends CREATED.
func TestSkewedInstanceEndsTheSaleOnTime(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	right := p.StartAPI("SECKILL_RATE_LIMIT_USER=0")
	behind := p.StartAPI("SECKILL_RATE_LIMIT_USER=0", "SECKILL_TEST_CLOCK_OFFSET=-10s")
	p.StartConsumer()
	accepted := map[string]int64{}
	user := int64(0)
	place := func(api *pipelinetest.API, s pipelinetest.Sale) pipelinetest.Placed {
		t.Helper()
		user++
		pl, err := api.PlaceOrder(user, "k", s.ActivityID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Code == 202 {
			accepted[pl.OrderNo] = user
		}
		return pl
	}
	refused := func(pl pipelinetest.Placed) bool { return pl.Code == 409 && pl.Error == "ACTIVITY_NOT_ACTIVE" }

	// ends_at passes.
	ends := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	byTime := saleEnding(t, right, 100, ends)
	if pl := place(behind, byTime); pl.Code != 202 {
		t.Fatalf("before ends_at: %d %s, want 202", pl.Code, pl.Error)
	}
	waittest.Until(t, 10*time.Second, "ends_at passed", func() bool { return time.Now().After(ends.Add(50 * time.Millisecond)) })
	if pl := place(behind, byTime); !refused(pl) {
		t.Errorf("after ends_at, the instance 10 s behind answered %d %s, want 409 ACTIVITY_NOT_ACTIVE", pl.Code, pl.Error)
	}
	waittest.Until(t, 3*time.Second, "the sale page of the instance 10 s behind says ENDED", func() bool {
		var page struct {
			State string `json:"state"`
		}
		code, err := behind.Do("GET", fmt.Sprintf("/api/v1/activities/%d", byTime.ActivityID), 1, "", nil, nil, &page)
		return err == nil && code == 200 && page.State == "ENDED"
	})

	// Another instance ends the sale.
	byOther := saleEnding(t, right, 100, time.Now().Add(time.Hour))
	if pl := place(behind, byOther); pl.Code != 202 {
		t.Fatalf("before the end: %d %s, want 202", pl.Code, pl.Error)
	}
	if code, err := right.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/end", byOther.ActivityID), 1, auth.RoleAdmin, nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("end: %d %v", code, err)
	}
	seen := time.Now().Add(activity.CopyTTL + 100*time.Millisecond)
	waittest.Until(t, 10*time.Second, "the end's copy due everywhere", func() bool { return time.Now().After(seen) })
	if pl := place(behind, byOther); !refused(pl) {
		t.Errorf("%v after another instance's end, the instance 10 s behind answered %d %s, want 409 ACTIVITY_NOT_ACTIVE",
			activity.CopyTTL, pl.Code, pl.Error)
	}

	// It ends a sale itself.
	bySelf := saleEnding(t, right, 100, time.Now().Add(time.Hour))
	var ended struct {
		EndsAt time.Time `json:"ends_at"`
	}
	asked := time.Now()
	if code, err := behind.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/end", bySelf.ActivityID), 1, auth.RoleAdmin, nil, nil, &ended); err != nil || code != 200 {
		t.Fatalf("end: %d %v", code, err)
	}
	answered := time.Now()
	if ended.EndsAt.Before(asked.Add(-50*time.Millisecond)) || ended.EndsAt.After(answered.Add(50*time.Millisecond)) {
		t.Errorf("the instance 10 s behind ended the sale at %v, want between %v and %v (now)", ended.EndsAt, asked, answered)
	}

	for no, o := range p.WaitFinal(accepted, 60*time.Second) {
		if o.Status != order.Created {
			t.Errorf("accepted order %s ended %s %s, want CREATED", no, o.Status, o.FailureReason)
		}
	}
}

// An api instance whose MySQL turns slow (every read past
// order.ActivityReloadTimeout: a stalled server, a pool exhausted by buyers
// polling) cannot see an end or a cancel that another instance made. It
// sells on its copy for at most activity.MaxStale and then answers 503;
// every order it took after the end or the cancel ends FAILED with the
// reason (the consumer decides by MySQL's row), never CREATED.
func TestSlowMySQLInstanceStopsSellingAnEndedSale(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	px := proxytest.Start(t, mysqlAddr(t, p.DB.DSN), proxytest.MySQL)
	right := p.StartAPI("SECKILL_RATE_LIMIT_USER=0")
	slow := p.StartAPI("SECKILL_RATE_LIMIT_USER=0", "SECKILL_MYSQL_DSN="+viaProxy(t, p.DB.DSN, px.Addr()))
	p.StartConsumer()
	ended, cancelled := right.CreateSale(100_000, 1), right.CreateSale(100_000, 1)
	user := int64(0)
	place := func(s pipelinetest.Sale) pipelinetest.Placed {
		t.Helper()
		user++
		pl, err := slow.PlaceOrder(user, "k", s.ActivityID, 1)
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	// The slow instance reads both sales while MySQL is quick.
	for _, s := range []pipelinetest.Sale{ended, cancelled} {
		if pl := place(s); pl.Code != 202 {
			t.Fatalf("before: %d %s, want 202", pl.Code, pl.Error)
		}
	}
	px.Latency(2*time.Second, 0)
	slowed := time.Now()
	for _, op := range []string{"end", "cancel"} {
		s := ended
		if op == "cancel" {
			s = cancelled
		}
		if code, err := right.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/%s", s.ActivityID, op), 1, auth.RoleAdmin, nil, nil, nil); err != nil || code != 200 {
			t.Fatalf("%s: %d %v", op, code, err)
		}
	}
	after := map[string]int64{} // accepted after the end and the cancel
	reason := map[string]string{}
	bound := slowed.Add(activity.MaxStale)
	refusedBoth := false
	for !refusedBoth {
		started := time.Now()
		if started.After(bound.Add(3 * time.Second)) {
			t.Fatalf("the slow instance still sold %v after its MySQL turned slow, want 503 within %v",
				started.Sub(slowed).Round(time.Millisecond), activity.MaxStale)
		}
		refusedBoth = true
		for _, s := range []pipelinetest.Sale{ended, cancelled} {
			pl := place(s)
			switch {
			case pl.Code == 202 && started.After(bound):
				t.Fatalf("202 for a request started %v after MySQL turned slow, past activity.MaxStale %v",
					started.Sub(slowed).Round(time.Millisecond), activity.MaxStale)
			case pl.Code == 202:
				after[pl.OrderNo] = user
				reason[pl.OrderNo] = order.ReasonSaleEnded
				if s.ActivityID == cancelled.ActivityID {
					reason[pl.OrderNo] = order.ReasonSaleCancelled
				}
				refusedBoth = false
			case pl.Code == 503 && pl.Error == "UNAVAILABLE":
			default:
				t.Fatalf("the slow instance answered %d %s, want 202 or 503 UNAVAILABLE", pl.Code, pl.Error)
			}
		}
		time.Sleep(50 * time.Millisecond) // the buyers' pace
	}
	t.Logf("the slow instance took %d orders after the end and the cancel, then answered 503 from %v after MySQL turned slow",
		len(after), time.Since(slowed).Round(time.Millisecond))
	if len(after) == 0 {
		t.Fatal("no order taken on the old copies: the test proves nothing about the consumer")
	}
	for no, o := range p.WaitFinal(after, 60*time.Second) {
		if o.Status != order.Failed || o.FailureReason != reason[no] {
			t.Errorf("order %s taken after the %s ended %s %s, want FAILED %s", no, reason[no], o.Status, o.FailureReason, reason[no])
		}
	}
	// MySQL quick again: the instance sees the end.
	px.Latency(0, 0)
	waittest.Until(t, 10*time.Second, "the slow instance sees the end", func() bool {
		pl := place(ended)
		return pl.Code == 409 && pl.Error == "ACTIVITY_NOT_ACTIVE"
	})
}

// mysqlAddr is the host:port of dsn.
func mysqlAddr(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Addr
}

// viaProxy is dsn with its server at addr.
func viaProxy(t *testing.T, dsn, addr string) string {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = addr
	return cfg.FormatDSN()
}

// A per-user limit lowered just before the start races an instance that
// still has the old one (its MySQL slow, so its copy is not re-read): it
// takes an order above the new limit. MySQL's row refuses it in the
// consumer: FAILED OVER_LIMIT, its reservation released, never a 202 left
// without a final state (the consumer dead-lettered it before).
func TestOrderAboveALimitLoweredBeforeTheStartFails(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	px := proxytest.Start(t, mysqlAddr(t, p.DB.DSN), proxytest.MySQL)
	right := p.StartAPI("SECKILL_RATE_LIMIT_USER=0")
	slow := p.StartAPI("SECKILL_RATE_LIMIT_USER=0", "SECKILL_MYSQL_DSN="+viaProxy(t, p.DB.DSN, px.Addr()))
	p.StartConsumer()
	var item struct {
		ItemID int64 `json:"item_id"`
	}
	if code, err := right.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil, map[string]any{"name": "limit", "stock": 100}, &item); err != nil || code != 201 {
		t.Fatalf("create item: %d %v", code, err)
	}
	starts := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	var act struct {
		ActivityID int64 `json:"activity_id"`
	}
	body := map[string]any{"item_id": item.ItemID, "starts_at": starts.UTC(), "ends_at": starts.Add(time.Hour).UTC(), "per_user_limit": 3}
	if code, err := right.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil, body, &act); err != nil || code != 201 {
		t.Fatalf("create activity: %d %v", code, err)
	}
	if code, err := right.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/warmup", act.ActivityID), 1, auth.RoleAdmin, nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("warmup: %d %v", code, err)
	}
	// The slow instance reads the sale (limit 3) before it starts.
	if pl, err := slow.PlaceOrder(1, "early", act.ActivityID, 3); err != nil || pl.Code != 409 || pl.Error != "ACTIVITY_NOT_ACTIVE" {
		t.Fatalf("before the start: %+v %v, want 409 ACTIVITY_NOT_ACTIVE", pl, err)
	}
	px.Latency(2*time.Second, 0)
	limit := 1
	if _, err := p.DB.Activities.PatchActivity(context.Background(), act.ActivityID, activity.Patch{PerUserLimit: &limit}, time.Now()); err != nil {
		t.Fatalf("lower the limit: %v", err)
	}
	waittest.Until(t, 10*time.Second, "the sale started", func() bool { return time.Now().After(starts.Add(50 * time.Millisecond)) })
	over, err := slow.PlaceOrder(2, "over", act.ActivityID, 3)
	if err != nil || over.Code != 202 {
		t.Fatalf("above the new limit on the old copy: %+v %v, want 202 (the copy still says 3)", over, err)
	}
	within, err := slow.PlaceOrder(3, "within", act.ActivityID, 1)
	if err != nil || within.Code != 202 {
		t.Fatalf("within the limit: %+v %v, want 202", within, err)
	}
	final := p.WaitFinal(map[string]int64{over.OrderNo: 2, within.OrderNo: 3}, 60*time.Second)
	if o := final[over.OrderNo]; o.Status != order.Failed || o.FailureReason != order.ReasonOverLimit {
		t.Errorf("the order above the limit ended %s %q, want FAILED %s", o.Status, o.FailureReason, order.ReasonOverLimit)
	}
	if o := final[within.OrderNo]; o.Status != order.Created {
		t.Errorf("the order within the limit ended %s %q, want CREATED", o.Status, o.FailureReason)
	}
	// Its buyer reads why when polling.
	px.Latency(0, 0)
	waittest.Until(t, 20*time.Second, "the buyer reads FAILED OVER_LIMIT", func() bool {
		st, reason, err := right.OrderStatus(2, over.OrderNo)
		return err == nil && st == string(order.Failed) && reason == order.ReasonOverLimit
	})
	p.WaitDrained(item.ItemID, 30*time.Second)
	if inv := p.Check(pipelinetest.Sale{ItemID: item.ItemID, ActivityID: act.ActivityID, Stock: 100}); inv.DBStock != 99 || inv.RedisStock != 99 {
		t.Errorf("stock MySQL %d, Redis %d; want 99 in both (only the order within the limit)", inv.DBStock, inv.RedisStock)
	}
}
