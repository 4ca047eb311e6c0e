package webhook_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/adapter/webhook"
)

// endpoint is a shop's endpoint on loopback that checks each delivery
// with secret and answers status; it counts the deliveries it was sent.
func endpoint(t *testing.T, secret string, status int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want a JSON POST", http.StatusMethodNotAllowed)
			return
		}
		if err := webhook.Verify([]string{secret}, r.Header, body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestSendDeliversASignedPost(t *testing.T) {
	secret, _ := newSecret(t)
	srv, hits := endpoint(t, secret, http.StatusNoContent)
	client := webhook.NewClient(5*time.Second, true)
	status, err := webhook.Send(t.Context(), client, srv.URL+"/hooks", "msg_s", time.Now(), []byte(`{"type":"order.paid"}`), []string{secret})
	if err != nil || status != http.StatusNoContent || hits.Load() != 1 {
		t.Fatalf("Send: %d, %v; %d deliveries", status, err, hits.Load())
	}
	// signed with another secret: the endpoint refuses it, and Send says so
	other, _ := newSecret(t)
	status, err = webhook.Send(t.Context(), client, srv.URL+"/hooks", "msg_s", time.Now(), []byte(`{}`), []string{other})
	if status != http.StatusBadRequest || err == nil || !strings.Contains(err.Error(), "no matching signature") {
		t.Fatalf("Send with the wrong secret: %d, %v", status, err)
	}
}

// Unless private addresses are allowed, the client does not connect to
// loopback, whether the URL names the address or a name resolving to it.
func TestClientRefusesPrivateAddresses(t *testing.T) {
	secret, _ := newSecret(t)
	srv, hits := endpoint(t, secret, http.StatusOK)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, url := range []string{srv.URL, "http://localhost:" + port + "/hooks"} {
		status, err := webhook.Send(t.Context(), webhook.NewClient(5*time.Second, false), url, "msg_p", time.Now(), []byte(`{}`), []string{secret})
		if !errors.Is(err, webhook.ErrRefusedAddress) || status != 0 || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Send to %s: %d, %v; want the address refused as loopback", url, status, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the refused endpoint got %d deliveries", n)
	}
	status, err := webhook.Send(t.Context(), webhook.NewClient(5*time.Second, true), srv.URL, "msg_p", time.Now(), []byte(`{}`), []string{secret})
	if err != nil || status != http.StatusOK || hits.Load() != 1 {
		t.Fatalf("Send with private addresses allowed: %d, %v", status, err)
	}
}

// A redirect is a failed delivery, and its target gets nothing.
func TestSendDoesNotFollowRedirects(t *testing.T) {
	secret, _ := newSecret(t)
	target, hits := endpoint(t, secret, http.StatusNoContent)
	redirect := httptest.NewServer(http.RedirectHandler(target.URL+"/elsewhere", http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	status, err := webhook.Send(t.Context(), webhook.NewClient(5*time.Second, true), redirect.URL, "msg_3", time.Now(), []byte(`{}`), []string{secret})
	if status != http.StatusTemporaryRedirect || err == nil || !strings.Contains(err.Error(), "not followed") {
		t.Fatalf("Send: %d, %v; want 307 and an error", status, err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the redirect's target got %d deliveries", n)
	}
}

// A failure's error quotes the start of the answer and names the endpoint
// without its query; Send reads little of a large answer: the endpoint's
// write of 32 MB fails when Send closes the connection.
func TestSendReadsLittleOfTheAnswer(t *testing.T) {
	written := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, err := io.WriteString(w, "boom "+strings.Repeat("x", 32<<20))
		written <- err
	}))
	t.Cleanup(srv.Close)
	secret, _ := newSecret(t)
	status, err := webhook.Send(t.Context(), webhook.NewClient(5*time.Second, true), srv.URL+"/h?token=shop-token", "msg_5", time.Now(), []byte(`{}`),
		[]string{secret})
	if status != http.StatusInternalServerError || err == nil {
		t.Fatalf("Send: %d, %v", status, err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"boom xx`) || len(msg) > 400 || strings.Contains(msg, "shop-token") {
		t.Fatalf("error (%d bytes): %.500s", len(msg), msg)
	}
	select {
	case err := <-written:
		if err == nil {
			t.Fatal("the endpoint's whole answer was read")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the endpoint's write neither ended nor failed")
	}
}

// hung is an endpoint that never answers (until the test ends).
func hung(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: the handlers return, Close does not wait
	return srv
}

func TestSendGivesUpOnAHungEndpoint(t *testing.T) {
	secret, _ := newSecret(t)
	srv := hung(t)
	t.Run("client timeout", func(t *testing.T) {
		status, err := webhook.Send(t.Context(), webhook.NewClient(200*time.Millisecond, true), srv.URL, "msg_h", time.Now(), []byte(`{}`),
			[]string{secret})
		var ne net.Error
		if status != 0 || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("Send: %d, %v; want a timeout", status, err)
		}
	})
	t.Run("context deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		status, err := webhook.Send(ctx, webhook.NewClient(time.Hour, true), srv.URL, "msg_h", time.Now(), []byte(`{}`), []string{secret})
		if status != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Send: %d, %v; want the context's deadline", status, err)
		}
	})
}

func TestSendRefusesABadSecret(t *testing.T) {
	secret, _ := newSecret(t)
	srv, hits := endpoint(t, secret, http.StatusOK)
	_, err := webhook.Send(t.Context(), webhook.NewClient(5*time.Second, true), srv.URL, "msg_b", time.Now(), []byte(`{}`), []string{"not-a-secret"})
	if !errors.Is(err, webhook.ErrSecret) || hits.Load() != 0 {
		t.Fatalf("Send: %v; %d deliveries", err, hits.Load())
	}
}

// BenchmarkSendToAVerifyingEndpoint is one delivery's cost on both ends,
// on one machine: signed and POSTed over a kept-alive loopback
// connection, and verified and answered 204 by the endpoint (the cost a
// shop's receiver and the bench's pay, beside the dispatcher's). With
// -cpu 2 and parallel senders it is what a 2-CPU machine spends a
// delivery: ns/op times the CPUs.
func BenchmarkSendToAVerifyingEndpoint(b *testing.B) {
	secret, err := webhook.NewSecret()
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify([]string{secret}, r.Header, body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	// An order.created event's size.
	body := []byte(`{"type":"order.created","timestamp":"2026-12-04T12:00:00.123456Z","data":{"order_no":"01JEQ7Z8X3M2N4P5Q6R7S8T9V0-1042","activity_id":1042,"item_id":77,"quantity":1,"amount":19900,"currency":"EUR","user_id":"2f0c5e0e-6f0e-4d55-9d1e-3f1c2b7a9e11","status":"CREATED","seq":1}}`)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			st, err := webhook.Send(context.Background(), client, srv.URL+"/hook", "evt_x_1", time.Now(), body, []string{secret})
			if err != nil || st != http.StatusNoContent {
				b.Errorf("delivery: %d %v", st, err)
				return
			}
		}
	})
}
