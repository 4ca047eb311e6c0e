package e2e_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

type statusBody struct {
	OrderNo string `json:"order_no"`
	Status  string `json:"status"`
	Error   struct {
		Code string `json:"code"`
	} `json:"error"`
}

func act(t *testing.T, api *pipelinetest.API, user string, no, verb string) (int, statusBody) {
	t.Helper()
	var b statusBody
	code, err := api.DoAs("POST", "/api/v1/orders/"+no+"/"+verb, user, "", nil, nil, &b)
	if err != nil {
		t.Fatalf("%s %s: %v", verb, no, err)
	}
	return code, b
}

// view polls one order as its buyer: its status and updated_at.
func view(t *testing.T, api *pipelinetest.API, user int64, no string) (string, time.Time) {
	t.Helper()
	var b struct {
		Status    string    `json:"status"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	if code, err := api.Do("GET", "/api/v1/orders/"+no, user, "", nil, nil, &b); err != nil || code != 200 {
		t.Fatalf("GET order %s: %d %v", no, code, err)
	}
	return b.Status, b.UpdatedAt
}

// buy places an order and waits until it is CREATED.
func buy(t *testing.T, p *pipelinetest.Pipeline, api *pipelinetest.API, user int64, key string, activity int64) string {
	t.Helper()
	pl, err := api.PlaceOrder(user, key, activity, 1)
	if err != nil || pl.Code != 202 {
		t.Fatalf("user %d order: %+v %v", user, pl, err)
	}
	if o := p.WaitFinal(map[string]int64{pl.OrderNo: user}, 30*time.Second)[pl.OrderNo]; o.Status != order.Created {
		t.Fatalf("order %s: %+v", pl.OrderNo, o)
	}
	return pl.OrderNo
}

func TestPayAndCancel(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSale(10, 1)

	paid := buy(t, p, api, 1, "a", sale.ActivityID)
	_, createdAt := view(t, api, 1, paid)
	// updated_at has millisecond precision.
	time.Sleep(5 * time.Millisecond)
	for range 2 { // idempotent
		if code, b := act(t, api, "1", paid, "pay"); code != 200 || b.Status != "PAID" {
			t.Fatalf("pay: %d %+v", code, b)
		}
	}
	if st, updated := view(t, api, 1, paid); st != "PAID" || !updated.After(createdAt) {
		t.Fatalf("poll paid order: %s, updated_at %v (was %v)", st, updated, createdAt)
	}
	if code, b := act(t, api, "1", paid, "cancel"); code != 409 || b.Error.Code != "ORDER_NOT_CANCELLABLE" {
		t.Fatalf("cancel PAID: %d %+v", code, b)
	}
	if code, _ := act(t, api, "2", paid, "pay"); code != 404 {
		t.Fatalf("another user paying: %d, want 404", code)
	}

	closed := buy(t, p, api, 2, "b", sale.ActivityID)
	_, createdAt = view(t, api, 2, closed)
	time.Sleep(5 * time.Millisecond)
	for range 2 { // idempotent
		if code, b := act(t, api, "2", closed, "cancel"); code != 200 || b.Status != "CLOSED" {
			t.Fatalf("cancel: %d %+v", code, b)
		}
	}
	if code, b := act(t, api, "2", closed, "pay"); code != 409 || b.Error.Code != "ORDER_NOT_PAYABLE" {
		t.Fatalf("pay CLOSED: %d %+v", code, b)
	}
	if st, updated := view(t, api, 2, closed); st != "CLOSED" || !updated.After(createdAt) {
		t.Fatalf("poll closed order: %s, updated_at %v (was %v)", st, updated, createdAt)
	}
	// The quota came back: the same user buys again.
	buy(t, p, api, 2, "b2", sale.ActivityID)

	// A PENDING order (reserved, not yet in MySQL) is not payable yet.
	no := order.NewNumberGenerator().Next(sale.ItemID)
	if _, err := p.Store.Reservations.Reserve(context.Background(), reservation.Reservation{OrderNo: no, UserID: "3", ItemID: sale.ItemID,
		ActivityID: sale.ActivityID, Quantity: 1, IdempotencyKey: "p", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if code, b := act(t, api, "3", no, "pay"); code != 409 || b.Error.Code != "ORDER_NOT_PAYABLE" {
		t.Fatalf("pay PENDING: %d %+v", code, b)
	}
	ref := reservation.Ref{OrderNo: no, UserID: "3", ItemID: sale.ItemID, ActivityID: sale.ActivityID, IdempotencyKey: "p"}
	if _, err := p.Store.Reservations.Release(context.Background(), ref, reservation.ReleaseOptions{Reason: order.ReasonPublishFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true}); err != nil {
		t.Fatal(err)
	}
	// Released before it reached MySQL, it reads FAILED and is not payable.
	if st, _ := view(t, api, 3, no); st != "FAILED" {
		t.Fatalf("poll released order: %s", st)
	}
	if code, b := act(t, api, "3", no, "pay"); code != 409 || b.Error.Code != "ORDER_NOT_PAYABLE" {
		t.Fatalf("pay FAILED: %d %+v", code, b)
	}
	p.WaitDrained(sale.ItemID, 10*time.Second)
	if inv := p.Check(sale); inv.LiveOrders != 2 || inv.DBStock != 8 {
		t.Fatalf("final %+v, want 2 live orders and stock 8", inv)
	}
}

func TestCancelAfterSoldOutSellsExactlyOneMore(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSale(3, 1)
	var nos []string
	for u := int64(1); u <= 3; u++ {
		nos = append(nos, buy(t, p, api, u, "k", sale.ActivityID))
	}
	if pl, _ := api.PlaceOrder(10, "k", sale.ActivityID, 1); pl.Error != "SOLD_OUT" {
		t.Fatalf("want SOLD_OUT, got %+v", pl)
	}
	if code, _ := act(t, api, "1", nos[0], "cancel"); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	// Many buyers race for the one returned unit: exactly one wins.
	accepted, codes := crowd(t, api, sale.ActivityID, userRange(100, 50), 50)
	if len(accepted) != 1 || codes["SOLD_OUT"] != 49 {
		t.Fatalf("after one cancel: accepted %d, refused %v; want exactly 1", len(accepted), codes)
	}
	p.WaitFinal(accepted, 30*time.Second)
	p.WaitDrained(sale.ItemID, 10*time.Second)
	if inv := p.Check(sale); inv.LiveOrders != 3 || inv.DBStock != 0 {
		t.Fatalf("final %+v", inv)
	}
}

func TestUnpaidOrdersCloseAfterPaymentWindow(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer("SECKILL_PAYMENT_WINDOW=2s", "SECKILL_CLOSER_EVERY=200ms")
	sale := api.CreateSale(5, 1)
	accepted, _ := crowd(t, api, sale.ActivityID, userRange(1, 5), 5)
	final := p.WaitFinal(accepted, 30*time.Second)
	// Pay one; the other four close by themselves.
	var paidNo string
	for no, o := range final {
		paidNo = no
		if code, _ := act(t, api, o.UserID, no, "pay"); code != 200 {
			t.Fatalf("pay: %d", code)
		}
		break
	}
	waittest.Until(t, 30*time.Second, "4 CLOSED and 1 PAID", func() bool {
		counts, err := p.DB.Orders.StatusCounts(context.Background(), sale.ItemID)
		return err == nil && counts[order.Closed] == 4 && counts[order.Paid] == 1
	})
	// Stock and quota came back in both stores (once the releases are
	// recorded): the four buyers can buy again, and nobody else can take
	// more than the four units.
	waitReleased(t, p, sale.ItemID)
	inv := p.Check(sale)
	if inv.DBStock != 4 || inv.RedisStock != 4 {
		t.Fatalf("after the closes: %+v, want 4 units back in both stores", inv)
	}
	// The reconciler finds the stores agreeing, quotas included.
	reconcile(t, p, 0)
	for no, o := range final {
		if no == paidNo {
			if pl, _ := api.PlaceOrderAs(o.UserID, "again", sale.ActivityID, 1); pl.Error != "ALREADY_PURCHASED" {
				t.Fatalf("the payer bought twice: %+v", pl)
			}
			continue
		}
		if pl, _ := api.PlaceOrderAs(o.UserID, "again", sale.ActivityID, 1); pl.Code != 202 {
			t.Fatalf("a closed order's buyer cannot buy again: %+v", pl)
		}
	}
}

// An activity's own payment window overrides the global one: with the
// global window at 30 minutes, an order of an activity with a 2-second
// window closes by itself, and one of an activity without stays CREATED.
func TestActivityPaymentWindowOverridesTheGlobalOne(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer("SECKILL_PAYMENT_WINDOW=30m", "SECKILL_CLOSER_EVERY=200ms")
	short := api.CreateSaleWith(5, pipelinetest.SaleOptions{PaymentWindow: 2 * time.Second})
	long := api.CreateSale(5, 1)
	quick := buy(t, p, api, 1, "short", short.ActivityID)
	slow := buy(t, p, api, 1, "long", long.ActivityID)

	var closed order.Order
	waittest.Until(t, 30*time.Second, "the 2-second window's order to be CLOSED", func() bool {
		o, err := p.DB.Orders.Order(context.Background(), quick)
		closed = o
		return err == nil && o.Status == order.Closed
	})
	if closed.FailureReason != order.ReasonPaymentTimeout {
		t.Fatalf("closed for %q, want %s", closed.FailureReason, order.ReasonPaymentTimeout)
	}
	if o, err := p.DB.Orders.Order(context.Background(), slow); err != nil || o.Status != order.Created {
		t.Fatalf("the global window's order is %+v %v, want still CREATED", o, err)
	}
	if code, b := act(t, api, "1", quick, "pay"); code != 409 || b.Error.Code != "ORDER_NOT_PAYABLE" {
		t.Fatalf("pay after the activity's window: %d %+v", code, b)
	}
}

// waitReleased polls until every CLOSED order of item has its Redis release
// recorded.
func waitReleased(t *testing.T, p *pipelinetest.Pipeline, item int64) {
	t.Helper()
	waittest.Until(t, 30*time.Second, "every closed order's release to be recorded", func() bool {
		return p.Count("SELECT COUNT(*) FROM orders WHERE item_id = ? AND status = 'CLOSED' AND released_at IS NULL", item) == 0
	})
}

func TestPayAndCloseRace(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSale(100, 1)
	accepted, _ := crowd(t, api, sale.ActivityID, userRange(1, 100), 50)
	final := p.WaitFinal(accepted, 60*time.Second)
	if len(final) != 100 {
		t.Fatalf("%d orders", len(final))
	}
	type result struct{ pay, cancel int }
	var mu sync.Mutex
	results := map[string]result{}
	var wg sync.WaitGroup
	for no, o := range final {
		for _, verb := range []string{"pay", "cancel"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, _ := act(t, api, o.UserID, no, verb)
				mu.Lock()
				defer mu.Unlock()
				r := results[no]
				if verb == "pay" {
					r.pay = code
				} else {
					r.cancel = code
				}
				results[no] = r
			}()
		}
	}
	wg.Wait()
	paid := 0
	for no := range final {
		o, err := p.DB.Orders.Order(context.Background(), no)
		if err != nil {
			t.Fatal(err)
		}
		r := results[no]
		switch o.Status {
		case order.Paid:
			paid++
			if r.pay != 200 || r.cancel != 409 {
				t.Fatalf("%s PAID but pay=%d cancel=%d", no, r.pay, r.cancel)
			}
		case order.Closed:
			if r.cancel != 200 || r.pay != 409 {
				t.Fatalf("%s CLOSED but pay=%d cancel=%d", no, r.pay, r.cancel)
			}
		default:
			t.Fatalf("%s ended %s", no, o.Status)
		}
	}
	t.Logf("%d paid, %d closed", paid, 100-paid)
	waitReleased(t, p, sale.ItemID)
	if inv := p.Check(sale); inv.LiveOrders != int64(paid) || inv.DBStock != int64(100-paid) {
		t.Fatalf("final %+v with %d paid", inv, paid)
	}
}

func TestCloserKilledBetweenCommitAndRelease(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	dying := p.StartConsumer("SECKILL_PAYMENT_WINDOW=2s", "SECKILL_CLOSER_EVERY=200ms", "SECKILL_FAILPOINTS=close-after-commit")
	sale := api.CreateSale(3, 1)
	no := buy(t, p, api, 1, "k", sale.ActivityID)
	// The closer closes the order in MySQL and dies before the release.
	select {
	case <-dying.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the failpoint did not fire")
	}
	o, err := p.DB.Orders.Order(context.Background(), no)
	if err != nil || o.Status != order.Closed {
		t.Fatalf("order %s after the crash: %s %v", no, o.Status, err)
	}
	if snap, err := p.Store.Stock.Stock(context.Background(), reservation.One(sale.ItemID)); err != nil || snap.Stock != 2 {
		t.Fatalf("Redis stock %d (%v) right after the crash, want 2 (not yet released)", snap.Stock, err)
	}
	p.StartConsumer("SECKILL_CLOSER_EVERY=200ms")
	waitReleased(t, p, sale.ItemID)
	// Released exactly once: 3 in both stores, not 4.
	if inv := p.Check(sale); inv.DBStock != 3 || inv.RedisStock != 3 {
		t.Fatalf("final %+v, want stock 3 in both stores", inv)
	}
}
