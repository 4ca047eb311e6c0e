package webhook_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/adapter/webhook"
)

// receiver is a Receiver of the deliveries signed with secret, and what it
// writes: the events and the notes.
func receiver(t *testing.T, secret string) (http.Handler, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var events, notes bytes.Buffer
	rc, err := webhook.NewReceiver([]string{secret}, &events, &notes)
	if err != nil {
		t.Fatal(err)
	}
	return rc, &events, &notes
}

// deliver posts body to h as message id, signed with secret at at, and
// returns the status.
func deliver(t *testing.T, h http.Handler, secret, id string, at time.Time, body string) int {
	t.Helper()
	sig, err := webhook.Sign([]string{secret}, id, at, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header = webhook.Headers(id, at, sig)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

const paid = `{"type": "order.paid", "timestamp": "2026-12-03T20:57:51.123456Z",
	"data": {"order_no": "01KB3Z5W7XQ4M0R9D2H6T8V1CE-2", "amount": 2998}}`

func TestReceiverWritesEachEventOnce(t *testing.T) {
	secret, _ := newSecret(t)
	rc, events, notes := receiver(t, secret)
	if got := deliver(t, rc, secret, "msg_1", time.Now(), paid); got != http.StatusNoContent {
		t.Fatalf("delivery: %d, notes %q", got, notes)
	}
	want := `{"id":"msg_1","type":"order.paid","timestamp":"2026-12-03T20:57:51.123456Z",` +
		`"data":{"order_no":"01KB3Z5W7XQ4M0R9D2H6T8V1CE-2","amount":2998}}` + "\n"
	if events.String() != want {
		t.Fatalf("events:\n%s\nwant:\n%s", events, want)
	}
	// redelivered (the sender did not see the answer): dropped, noted
	if got := deliver(t, rc, secret, "msg_1", time.Now().Add(time.Second), paid); got != http.StatusNoContent {
		t.Fatalf("redelivery: %d", got)
	}
	if events.String() != want || notes.String() != "duplicate msg_1\n" {
		t.Fatalf("after a redelivery, events:\n%s\nnotes: %q", events, notes)
	}
	if got := deliver(t, rc, secret, "msg_2", time.Now(), `{"type":"order.created","timestamp":"t","data":{}}`); got != http.StatusNoContent {
		t.Fatalf("second event: %d", got)
	}
	if n := strings.Count(events.String(), "\n"); n != 2 {
		t.Fatalf("%d lines of events, want 2:\n%s", n, events)
	}
}

func TestReceiverRefuses(t *testing.T) {
	secret, _ := newSecret(t)
	other, _ := newSecret(t)
	rc, events, notes := receiver(t, secret)
	tests := []struct {
		name, secret string
		at           time.Time
		body, says   string
	}{
		{"wrong secret", other, time.Now(), paid, "no matching signature"},
		{"stale", secret, time.Now().Add(-10 * time.Minute), paid, "too old"},
		{"not JSON", secret, time.Now(), `order.paid`, "not an event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notes.Reset()
			if got := deliver(t, rc, tt.secret, "msg_"+tt.name, tt.at, tt.body); got != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", got)
			}
			if !strings.Contains(notes.String(), "refused") || !strings.Contains(notes.String(), tt.says) {
				t.Fatalf("notes %q, want why (%q)", notes, tt.says)
			}
		})
	}
	// a body changed after signing
	sig, _ := webhook.Sign([]string{secret}, "msg_t", time.Now(), []byte(paid))
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Replace(paid, "2998", "1", 1)))
	req.Header = webhook.Headers("msg_t", time.Now(), sig)
	rec := httptest.NewRecorder()
	rc.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("tampered body: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	rc.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", rec.Code)
	}
	big := `{"type":"big","data":"` + strings.Repeat("x", 1<<20) + `"}`
	if got := deliver(t, rc, secret, "msg_big", time.Now(), big); got != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over 1 MB: %d", got)
	}
	if events.Len() != 0 {
		t.Fatalf("refused deliveries written:\n%s", events)
	}
	// a refused id is not remembered: its good delivery is written
	if got := deliver(t, rc, secret, "msg_t", time.Now(), paid); got != http.StatusNoContent || events.Len() == 0 {
		t.Fatalf("the good delivery after a refused one: %d, events %q", got, events)
	}
}

func TestNewReceiverRefusesABadSecret(t *testing.T) {
	if _, err := webhook.NewReceiver([]string{"whsec_short"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Fatal("no error")
	}
}
