package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

// attempt is one order request of the load in TestEndRacesInFlightOrders.
type attempt struct {
	api        int
	start, end time.Time // the request's, as the test's clock saw them
	code       int
	errCode    string
	orderNo    string
	user       int64
	transportE error
}

// An operator ends a sale in the middle of a flash sale on two api
// instances. Every order answered 202 still ends final: CREATED when it was
// reserved before the end, FAILED SALE_ENDED when an instance took it after
// the end on a copy that did not show it yet (MySQL's row decides); no request
// that either instance started more than activity.CopyTTL after the end was
// answered gets a 202, each answers them 409 ACTIVITY_NOT_ACTIVE; the
// invariants hold and the reconciler finds no drift.
func TestEndRacesInFlightOrders(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	apis := []*pipelinetest.API{p.StartAPI("SECKILL_RATE_LIMIT_USER=0"), p.StartAPI("SECKILL_RATE_LIMIT_USER=0")}
	p.StartConsumer()
	sale := apis[0].CreateSale(100_000, 1)

	var (
		mu       sync.Mutex
		attempts []attempt
		users    atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	// Four buyers' streams at most 100 requests a second each: enough to
	// have orders in flight at the end on both instances, little enough not
	// to starve the tests running beside this one.
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pace := time.NewTicker(10 * time.Millisecond)
			defer pace.Stop()
			for {
				select {
				case <-stop:
					return
				case <-pace.C:
				}
				a := attempt{api: w % 2, user: users.Add(1), start: time.Now()}
				pl, err := apis[a.api].PlaceOrder(a.user, "k", sale.ActivityID, 1)
				a.code, a.errCode, a.orderNo, a.transportE = pl.Code, pl.Error, pl.OrderNo, err
				a.end = time.Now()
				mu.Lock()
				attempts = append(attempts, a)
				mu.Unlock()
			}
		}()
	}
	// Let the sale run, then end it through the first instance.
	waittest.Until(t, 30*time.Second, "orders flowing", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(attempts) >= 200
	})
	var ended struct {
		EndsAt time.Time `json:"ends_at"`
	}
	if code, err := apis[0].Do("POST", fmt.Sprintf("/admin/v1/activities/%d/end", sale.ActivityID), 1, auth.RoleAdmin, nil, nil, &ended); err != nil || code != 200 {
		t.Fatalf("end: %d %v", code, err)
	}
	endAnswered := time.Now()
	deadline := endAnswered.Add(activity.CopyTTL)
	waittest.Until(t, 30*time.Second, "load past the end + 1 s on both instances", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := [2]int{}
		for _, a := range attempts {
			if a.start.After(deadline.Add(500 * time.Millisecond)) {
				n[a.api]++
			}
		}
		return n[0] >= 20 && n[1] >= 20
	})
	close(stop)
	wg.Wait()

	accepted := map[string]int64{}
	byOrder := map[string]attempt{}
	var lastAccepted, firstRefused [2]time.Duration
	firstRefused = [2]time.Duration{time.Hour, time.Hour}
	refusedAfter := [2]int{}
	for _, a := range attempts {
		if a.transportE != nil {
			t.Fatalf("user %d: %v", a.user, a.transportE)
		}
		since := a.start.Sub(endAnswered)
		switch {
		case a.code == 202:
			accepted[a.orderNo] = a.user
			byOrder[a.orderNo] = a
			if a.start.After(deadline) {
				t.Errorf("api %d answered 202 to a request started %v after the end was answered", a.api, since)
			}
			lastAccepted[a.api] = max(lastAccepted[a.api], since)
		case a.code == 409 && a.errCode == "ACTIVITY_NOT_ACTIVE":
			firstRefused[a.api] = min(firstRefused[a.api], since)
			if a.start.After(deadline) {
				refusedAfter[a.api]++
			}
		default:
			t.Errorf("api %d: user %d answered %d %s", a.api, a.user, a.code, a.errCode)
		}
	}
	for i := range apis {
		if refusedAfter[i] == 0 {
			t.Errorf("api %d refused nothing after the end + %v", i, activity.CopyTTL)
		}
		t.Logf("api %d: last 202 for a request started %v after the end's answer, first refusal %v after it",
			i, lastAccepted[i].Round(time.Millisecond), firstRefused[i].Round(time.Millisecond))
	}
	final := p.WaitFinal(accepted, 60*time.Second)
	live, afterEnd := int64(0), 0
	// This host's clock is MySQL's: the request's times bound the
	// reservation's, give or take the anchor's error.
	const slack = 50 * time.Millisecond
	for no, o := range final {
		a := byOrder[no]
		switch {
		case o.Status == order.Created && a.start.Before(ended.EndsAt.Add(slack)):
			live++
		case o.Status == order.Failed && o.FailureReason == order.ReasonSaleEnded && a.end.After(ended.EndsAt.Add(-slack)):
			afterEnd++
		default:
			t.Fatalf("accepted order %s (request %v to %v after ends_at) ended %s (%s)", no,
				a.start.Sub(ended.EndsAt), a.end.Sub(ended.EndsAt), o.Status, o.FailureReason)
		}
	}
	t.Logf("%d orders taken after the end, failed SALE_ENDED", afterEnd)
	// The sale page of either instance says so within its second too.
	for i, api := range apis {
		waittest.Until(t, 3*time.Second, fmt.Sprintf("api %d's sale page ENDED", i), func() bool {
			var page struct {
				State string `json:"state"`
			}
			code, err := api.Do("GET", fmt.Sprintf("/api/v1/activities/%d", sale.ActivityID), 1, "", nil, nil, &page)
			return err == nil && code == 200 && page.State == "ENDED"
		})
	}
	p.WaitDrained(sale.ItemID, 30*time.Second)
	inv := p.Check(sale)
	if inv.LiveOrders != live {
		t.Fatalf("%d live orders in MySQL, %d answered 202 and reserved before the end", inv.LiveOrders, live)
	}
	if r := p.Reconcile("--item", fmt.Sprint(sale.ItemID)); r.Code != 0 {
		t.Fatalf("reconciler: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("%d attempts, %d accepted, %d of them reserved before the end, ends_at %s", len(attempts), len(accepted), live,
		ended.EndsAt.Format(time.RFC3339Nano))
}

// Cancelling a sale closes its unpaid CREATED orders and gives their units
// back to MySQL and Redis, leaves PAID ones alone, and an order still on its
// way when the cancel ran is closed by the consumer's closer once it lands.
// New orders are refused; the reconciler finds no drift.
func TestCancelClosesUnpaidOrders(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer("SECKILL_CLOSER_EVERY=200ms")
	sale := api.CreateSaleWith(20, pipelinetest.SaleOptions{Price: 1000, Currency: "EUR"})
	var nos []string
	for u := int64(1); u <= 10; u++ {
		nos = append(nos, buy(t, p, api, u, "k", sale.ActivityID))
	}
	for i, no := range nos[:3] {
		if code, b := act(t, api, strconv.Itoa(i+1), no, "pay"); code != 200 || b.Status != "PAID" {
			t.Fatalf("pay: %d %+v", code, b)
		}
	}
	// Reserved in Redis, its event not yet in Kafka: in flight at the cancel.
	// Reserved a second before it by the test's own clock: the api dates the
	// cancel by the shared clock, which may be off from this process's by
	// half the round trip of its sample, and an order reserved within that
	// of the cancel may be judged either side of it.
	late := p.ReserveEventAt(sale, 100, 1, "late", time.Now().Add(-time.Second))

	var cancelled struct {
		Cancelled    bool `json:"cancelled"`
		OrdersClosed int  `json:"orders_closed"`
	}
	if code, err := api.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/cancel", sale.ActivityID), 1, auth.RoleAdmin, nil, nil, &cancelled); err != nil || code != 200 {
		t.Fatalf("cancel: %d %v", code, err)
	}
	// The consumer's closer closes a cancelled sale's CREATED orders too, so
	// it may have closed some of the 7 first; every one is CLOSED once the
	// cancel answers either way.
	if !cancelled.Cancelled || cancelled.OrdersClosed < 0 || cancelled.OrdersClosed > 7 {
		t.Fatalf("cancel answered %+v, want at most 7 orders closed", cancelled)
	}
	t.Logf("the cancel closed %d orders, the closer the others", cancelled.OrdersClosed)
	byStatus := func() string {
		var rows []struct {
			Status        string
			FailureReason *string
			N             int
		}
		if err := p.DB.Gorm().Raw(`SELECT status, failure_reason, COUNT(*) AS n FROM orders WHERE activity_id = ?
			GROUP BY status, failure_reason`, sale.ActivityID).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			reason := ""
			if r.FailureReason != nil {
				reason = *r.FailureReason
			}
			out = append(out, fmt.Sprintf("%s/%s=%d", r.Status, reason, r.N))
		}
		sort.Strings(out)
		return fmt.Sprint(out)
	}
	if got, want := byStatus(), "[CLOSED/SALE_CANCELLED=7 PAID/=3]"; got != want {
		t.Fatalf("orders by status after the cancel: %s, want %s", got, want)
	}
	// Within activity.CopyTTL of the cancel the api may still take an
	// order: reserved after the cancel, it never becomes an order (the
	// consumer fails it SALE_CANCELLED, by MySQL's row).
	probes, accepted := int64(200), 0
	waittest.Until(t, 5*time.Second, "a new order refused", func() bool {
		probes++
		pl, err := api.PlaceOrder(probes, "new", sale.ActivityID, 1)
		if err == nil && pl.Code == 202 {
			accepted++
		}
		return err == nil && pl.Code == 409 && pl.Error == "ACTIVITY_NOT_ACTIVE"
	})

	// The order in flight at the cancel lands; the closer closes it.
	pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: p.Topic})
	defer pub.Close()
	if err := pub.Publish(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	want := "[CLOSED/SALE_CANCELLED=8 PAID/=3]"
	if accepted > 0 {
		want = fmt.Sprintf("[CLOSED/SALE_CANCELLED=8 FAILED/SALE_CANCELLED=%d PAID/=3]", accepted)
	}
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("orders by status: %s, want %s", last, want)
		}
	}()
	waittest.Until(t, 30*time.Second, "the order in flight at the cancel created and closed, those after it failed", func() bool {
		last = byStatus()
		return last == want
	})
	p.WaitDrained(sale.ItemID, 30*time.Second)
	waittest.Until(t, 10*time.Second, "every close released in Redis", func() bool {
		return p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'CLOSED' AND released_at IS NULL", sale.ActivityID) == 0
	})
	inv := p.Check(sale)
	t.Logf("%d orders accepted in the second after the cancel, failed by the consumer", accepted)
	if inv.DBStock != 17 || inv.RedisStock != 17 {
		t.Fatalf("after the cancel: MySQL stock %d, Redis %d; want 17 in both", inv.DBStock, inv.RedisStock)
	}
	if r := p.Reconcile("--item", fmt.Sprint(sale.ItemID)); r.Code != 0 {
		t.Fatalf("reconciler: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

// A sale's times and limit change before it starts and not after; ending or
// cancelling one that has not started is refused.
func TestChangeSaleBeforeItStarts(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	var item, activity struct {
		ItemID     int64 `json:"item_id"`
		ActivityID int64 `json:"activity_id"`
	}
	if code, err := api.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil, map[string]any{"name": "x", "stock": 5}, &item); err != nil || code != 201 {
		t.Fatalf("item: %d %v", code, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if code, err := api.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil, map[string]any{"item_id": item.ItemID,
		"starts_at": now.Add(time.Hour), "ends_at": now.Add(2 * time.Hour)}, &activity); err != nil || code != 201 {
		t.Fatalf("activity: %d %v", code, err)
	}
	path := fmt.Sprintf("/admin/v1/activities/%d", activity.ActivityID)
	var errBody statusBody
	for _, verb := range []string{"end", "cancel"} {
		if code, err := api.Do("POST", path+"/"+verb, 1, auth.RoleAdmin, nil, nil, &errBody); err != nil || code != 409 || errBody.Error.Code != "ACTIVITY_NOT_ACTIVE" {
			t.Fatalf("%s before the start: %d %+v %v", verb, code, errBody, err)
		}
	}
	if code, err := api.Do("PATCH", path, 1, auth.RoleAdmin, nil, map[string]any{"ends_at": now.Add(30 * time.Minute)}, &errBody); err != nil || code != 400 {
		t.Fatalf("ends before it starts: %d %+v %v", code, errBody, err)
	}
	// Moved to start now, with a limit of 3.
	var changed struct {
		StartsAt     time.Time `json:"starts_at"`
		EndsAt       time.Time `json:"ends_at"`
		PerUserLimit int       `json:"per_user_limit"`
	}
	if code, err := api.Do("PATCH", path, 1, auth.RoleAdmin, nil, map[string]any{"starts_at": now.Add(-time.Minute), "per_user_limit": 3}, &changed); err != nil || code != 200 {
		t.Fatalf("patch: %d %v", code, err)
	}
	if !changed.StartsAt.Equal(now.Add(-time.Minute)) || !changed.EndsAt.Equal(now.Add(2*time.Hour)) || changed.PerUserLimit != 3 {
		t.Fatalf("patched to %+v", changed)
	}
	if n := p.Count("SELECT COUNT(*) FROM activities WHERE id = ? AND per_user_limit = 3 AND starts_at = ?", activity.ActivityID, now.Add(-time.Minute)); n != 1 {
		t.Fatalf("MySQL does not hold the change")
	}
	if code, err := api.Do("PATCH", path, 1, auth.RoleAdmin, nil, map[string]any{"per_user_limit": 1}, &errBody); err != nil || code != 409 || errBody.Error.Code != "ACTIVITY_STARTED" {
		t.Fatalf("patch after the start: %d %+v %v", code, errBody, err)
	}
	if n := p.Count("SELECT COUNT(*) FROM activities WHERE id = ? AND per_user_limit = 3", activity.ActivityID); n != 1 {
		t.Fatalf("a refused patch changed the activity")
	}
	// The buyers see the new start within a second: the sale is open.
	if code, err := api.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/warmup", activity.ActivityID), 1, auth.RoleAdmin, nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("warmup: %d %v", code, err)
	}
	p.StartConsumer()
	waittest.Until(t, 5*time.Second, "an order of 3 units accepted", func() bool {
		pl, err := api.PlaceOrder(7, "k", activity.ActivityID, 3)
		return err == nil && pl.Code == 202
	})
	p.WaitDrained(item.ItemID, 30*time.Second)
	p.Check(pipelinetest.Sale{ItemID: item.ItemID, ActivityID: activity.ActivityID, Stock: 5})
}
