package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/pkg/adapter/auth"
)

// fromAddr serves each request in process with h, as if it came from the
// client address remote ("ip:port"), the address Gin takes the client IP
// from.
type fromAddr struct {
	h      http.Handler
	remote string
}

func (f fromAddr) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.RemoteAddr = f.remote
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// One client IP over its limit hears 429 RATE_LIMITED with Retry-After, and
// its refused orders reserve nothing, while another IP is served; proxy
// headers neither let the limited IP escape nor charge another IP.
func TestRateLimitPerClientIP(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	item, act := ts.openSale(t, 10, 1)
	// One request per IP, then a token every 100 s: the second request of
	// an IP is over the limit however slow the machine. No per-user limit,
	// so only the IP decides.
	limited := httpapi.New(ts.svc, ts.services(ts.svc, testLogger(t)), auth.NewVerifier(testSecret), ts.checkers(kafkatest.Brokers()), testLogger(t),
		httpapi.WithRateLimits(httpapi.RateLimits{PerIP: 0.01}))
	const ipA, ipB, ipC = "192.0.2.1", "198.51.100.2", "203.0.113.3"
	placeAs := func(remote string, user int64, header map[string]string) response {
		h := map[string]string{"Idempotency-Key": fmt.Sprintf("ip-%d", user)}
		for k, v := range header {
			h[k] = v
		}
		from := *ts
		from.client = &http.Client{Transport: fromAddr{h: limited, remote: remote}}
		return from.do(t, "http://api", request{method: "POST", path: "/api/v1/orders", token: buyerToken(t, user),
			header: h, body: fmt.Sprintf(`{"activity_id":%d}`, act)})
	}

	accepted(t, placeAs(ipA+":40001", 1, nil))
	// Over the limit: other users, other source ports, and headers that
	// claim another client address, all from ipA.
	for i, hdr := range []map[string]string{
		nil,
		{"X-Forwarded-For": ipB},
		{"X-Real-IP": ipB},
		{"X-Forwarded-For": "10.0.0.1, " + ipB},
	} {
		r := placeAs(fmt.Sprintf("%s:%d", ipA, 40002+i), int64(2+i), hdr)
		if r.status != http.StatusTooManyRequests {
			t.Fatalf("from %s with headers %v: status %d, want 429; body %s", ipA, hdr, r.status, r.body)
		}
		wantError(t, r, http.StatusTooManyRequests, "RATE_LIMITED")
		if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 || s > 100 {
			t.Fatalf("Retry-After = %q, want 1-100 seconds", r.header.Get("Retry-After"))
		}
	}
	if snap := ts.stock(t, item); snap.Stock != 9 || snap.Inflight != 1 {
		t.Fatalf("after ipA's refused requests: %+v, want stock 9, in flight 1 (one order)", snap)
	}

	// Another IP is not affected, even when it names ipA in a proxy header.
	accepted(t, placeAs(ipB+":40001", 10, map[string]string{"X-Forwarded-For": ipA}))
	accepted(t, placeAs(ipC+":40001", 11, nil))
	// Each IP has its own bucket: ipB is now over its limit too.
	wantError(t, placeAs(ipB+":40002", 12, nil), http.StatusTooManyRequests, "RATE_LIMITED")

	if snap := ts.stock(t, item); snap.Stock != 7 || snap.Inflight != 3 {
		t.Fatalf("end: %+v, want stock 7, in flight 3", snap)
	}
	if got := ts.reservations(t, item); len(got) != 3 {
		t.Fatalf("reservations %v, want 3", got)
	}
}
