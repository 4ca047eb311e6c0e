package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/payment"
)

type notified struct {
	Outcome     string `json:"outcome"`
	OrderStatus string `json:"order_status"`
	Duplicate   bool   `json:"duplicate"`
	Error       struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// notify posts body to the payment notification endpoint with header as
// its Seckill-Signature (none when empty).
func notify(t *testing.T, api *pipelinetest.API, body []byte, header string) (int, notified) {
	t.Helper()
	req, err := http.NewRequest("POST", api.URL+"/payments/v1/notifications", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if header != "" {
		req.Header.Set(payment.Header, header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var n notified
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatalf("notification answer %d %q: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, n
}

func notification(t *testing.T, tx, orderNo string, amount int64, currency string) []byte {
	t.Helper()
	b, err := json.Marshal(payment.Notification{TransactionID: tx, OrderNo: orderNo, Amount: &amount, Currency: currency})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The provider's notifications through the running programs: a valid one
// pays, the same one again changes nothing, forged, stale and mismatched
// ones are refused with nothing written, a late one for an order closed
// meanwhile is answered 200 and recorded as a refund owed (a payments row, a
// metric, an alert-level line), a buyer's pay is refused when
// SECKILL_BUYER_PAY is off, and the reconciler finds no drift.
func TestPaymentNotifications(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSaleWith(10, pipelinetest.SaleOptions{Price: 1500, Currency: "EUR"})
	paid := buy(t, p, api, 1, "a", sale.ActivityID)
	open := buy(t, p, api, 2, "b", sale.ActivityID)
	late := buy(t, p, api, 3, "c", sale.ActivityID)
	secret := []byte(pipelinetest.PaymentSecret)
	payments := func() int64 { return p.Count("SELECT COUNT(*) FROM payments") }
	status := func(no string) string {
		var s string
		if err := p.DB.Gorm().Raw("SELECT status FROM orders WHERE order_no = ?", no).Scan(&s).Error; err != nil {
			t.Fatal(err)
		}
		return s
	}

	body := notification(t, "pi_1", paid, 1500, "EUR")
	sig := payment.Sign(secret, body, time.Now())
	for i, wantDup := range []bool{false, true} {
		code, n := notify(t, api, body, sig)
		if code != 200 || n.Outcome != "PAID" || n.OrderStatus != "PAID" || n.Duplicate != wantDup {
			t.Fatalf("notification %d: %d %+v", i+1, code, n)
		}
	}
	if got := payments(); got != 1 || status(paid) != "PAID" {
		t.Fatalf("after a notification twice: %d payments rows, order %s; want 1, PAID", got, status(paid))
	}

	good := notification(t, "pi_2", open, 1500, "EUR")
	refused := []struct {
		name   string
		body   []byte
		header string
		code   int
		errc   string
	}{
		{"no signature", good, "", 401, "SIGNATURE_INVALID"},
		{"another secret", good, payment.Sign([]byte("not-the-provider-secret-0123456789abc"), good, time.Now()), 401, "SIGNATURE_INVALID"},
		{"body changed after signing", bytes.Replace(good, []byte("1500"), []byte("1"), 1), payment.Sign(secret, good, time.Now()), 401, "SIGNATURE_INVALID"},
		{"stale", good, payment.Sign(secret, good, time.Now().Add(-6*time.Minute)), 401, "SIGNATURE_INVALID"},
		{"from the future", good, payment.Sign(secret, good, time.Now().Add(6*time.Minute)), 401, "SIGNATURE_INVALID"},
		{"amount", notification(t, "pi_3", open, 1499, "EUR"), "", 422, "PAYMENT_REFUSED"},
		{"currency", notification(t, "pi_4", open, 1500, "USD"), "", 422, "PAYMENT_REFUSED"},
		{"transaction of another order", notification(t, "pi_1", open, 1500, "EUR"), "", 422, "PAYMENT_REFUSED"},
		{"no amount", []byte(`{"transaction_id":"pi_5","order_no":"` + open + `","currency":"EUR"}`), "", 400, "INVALID_ARGUMENT"},
		{"unknown field", []byte(`{"transaction_id":"pi_6","order_no":"` + open + `","amount":1500,"currency":"EUR","x":1}`), "", 400, "INVALID_ARGUMENT"},
	}
	for _, r := range refused {
		h := r.header
		if h == "" && r.code != 401 {
			h = payment.Sign(secret, r.body, time.Now())
		}
		code, n := notify(t, api, r.body, h)
		if code != r.code || n.Error.Code != r.errc || n.Error.Message == "" {
			t.Errorf("%s: %d %+v, want %d %s", r.name, code, n, r.code, r.errc)
		}
	}
	if got := payments(); got != 1 || status(open) != "CREATED" {
		t.Fatalf("after the refused notifications: %d payments rows, order %s; want 1, CREATED", got, status(open))
	}

	// The buyer cancels; the provider's notification arrives afterwards.
	if code, b := act(t, api, "3", late, "cancel"); code != 200 || b.Status != "CLOSED" {
		t.Fatalf("cancel: %d %+v", code, b)
	}
	lateBody := notification(t, "pi_late", late, 1500, "EUR")
	if code, n := notify(t, api, lateBody, payment.Sign(secret, lateBody, time.Now())); code != 200 || n.Outcome != "REFUND" || n.OrderStatus != "CLOSED" {
		t.Fatalf("late notification: %d %+v", code, n)
	}
	if got := p.Count("SELECT COUNT(*) FROM payments WHERE order_no = ? AND outcome = 'REFUND' AND refund_reason = 'CLOSED'", late); got != 1 || status(late) != "CLOSED" {
		t.Fatalf("late payment: %d refund rows, order %s", got, status(late))
	}
	m := pipelinetest.ScrapeMetrics(t, api.URL+"/metrics")
	if v := m.Value("seckill_payment_refunds_needed_total"); v != 1 {
		t.Fatalf("seckill_payment_refunds_needed_total = %v, want 1", v)
	}
	if v := m.Value("seckill_payment_notifications_total", "outcome", "unauthenticated"); v != 5 {
		t.Fatalf("unauthenticated notifications counted %v, want 5", v)
	}
	alerts := 0
	for _, line := range strings.Split(api.Log(), "\n") {
		if strings.Contains(line, `"level":"ERROR+4"`) && strings.Contains(line, late) && strings.Contains(line, "refund") {
			alerts++
		}
	}
	if alerts != 1 {
		t.Fatalf("%d alert-level lines name the late payment's order, want 1:\n%s", alerts, api.Log())
	}

	// Production: the buyer cannot mark an order paid.
	prod := p.StartAPI("SECKILL_BUYER_PAY=false")
	if code, b := act(t, prod, "2", open, "pay"); code != 403 || b.Error.Code != "FORBIDDEN" || status(open) != "CREATED" {
		t.Fatalf("buyer pay with SECKILL_BUYER_PAY=false: %d %+v, order %s", code, b, status(open))
	}

	p.Check(sale)
	if r := p.Reconcile("--item", fmt.Sprint(sale.ItemID)); r.Code != 0 {
		t.Fatalf("reconciler: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

// A sale is cancelled and, before the cancel's closer reaches its orders
// (the cancel is marked in MySQL here, as the cancel does first), the buyer
// pays one order and the provider notifies a payment for another: the
// buyer's pay is refused with 409 ORDER_NOT_PAYABLE, the notification is
// answered 200 and recorded as a refund owed with its order closed (units
// and quota back in both stores), and no order of the cancelled sale is
// PAID. The reconciler finds no drift.
func TestPaymentOfACancelledSale(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSaleWith(10, pipelinetest.SaleOptions{Price: 1500, Currency: "EUR"})
	byBuyer := buy(t, p, api, 1, "a", sale.ActivityID)
	byProvider := buy(t, p, api, 2, "b", sale.ActivityID)
	if err := p.DB.Gorm().Exec("UPDATE activities SET ends_at = NOW(3), cancelled_at = NOW(3) WHERE id = ?", sale.ActivityID).Error; err != nil {
		t.Fatal(err)
	}
	if code, b := act(t, api, "1", byBuyer, "pay"); code != 409 || b.Error.Code != "ORDER_NOT_PAYABLE" {
		t.Fatalf("buyer's pay in a cancelled sale: %d %+v", code, b)
	}
	body := notification(t, "pi_cancelled", byProvider, 1500, "EUR")
	if code, n := notify(t, api, body, payment.Sign([]byte(pipelinetest.PaymentSecret), body, time.Now())); code != 200 || n.Outcome != "REFUND" || n.OrderStatus != "CLOSED" {
		t.Fatalf("notification in a cancelled sale: %d %+v", code, n)
	}
	if got := p.Count("SELECT COUNT(*) FROM payments WHERE order_no = ? AND outcome = 'REFUND' AND refund_reason = 'CLOSED'", byProvider); got != 1 {
		t.Fatalf("%d refund rows for the notified order, want 1", got)
	}
	// The closer closes the buyer's order; none is PAID.
	waittest.Until(t, 30*time.Second, "the cancelled sale's orders closed", func() bool {
		return p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'CLOSED' AND released_at IS NOT NULL", sale.ActivityID) == 2
	})
	if n := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'PAID'", sale.ActivityID); n != 0 {
		t.Fatalf("%d PAID orders in the cancelled sale", n)
	}
	p.Check(sale)
	if r := p.Reconcile("--item", fmt.Sprint(sale.ItemID)); r.Code != 0 {
		t.Fatalf("reconciler: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}
