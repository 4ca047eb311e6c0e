package load

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   Outcome
	}{
		{"no answer", 0, "", TransportError},
		{"accepted", 202, `{"order_no":"X"}`, Accepted},
		{"sold out", 409, `{"error":{"code":"SOLD_OUT"}}`, SoldOut},
		{"already purchased", 409, `{"error":{"code":"ALREADY_PURCHASED"}}`, Already},
		{"another conflict", 409, `{"error":{"code":"ACTIVITY_NOT_ACTIVE"}}`, ClientError},
		{"rate limited", 429, `{"error":{"code":"RATE_LIMITED"}}`, RateLimited},
		{"unavailable", 503, ``, Unavailable},
		{"internal", 500, ``, ServerError},
		{"bad request", 400, ``, ClientError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.status, []byte(tt.body)); got != tt.want {
				t.Fatalf("Classify(%d, %s) = %v, want %v", tt.status, tt.body, got, tt.want)
			}
		})
	}
}

func TestRunClosedModelStopsAfterOps(t *testing.T) {
	var calls atomic.Int64
	res := Run(context.Background(), Config{Workers: 4, Ops: 100}, func(context.Context, int, int64) Outcome {
		calls.Add(1)
		return Accepted
	})
	if calls.Load() != 100 || len(res.Samples) != 100 || res.Count(Accepted) != 100 {
		t.Fatalf("calls %d, samples %d, accepted %d; want 100 each", calls.Load(), len(res.Samples), res.Count(Accepted))
	}
}

// In the open model an operation's latency counts from when it was due: a
// server that stalls for a while makes every request due meanwhile slow,
// not just the one that hit the stall.
func TestRunClosedModelStopsWhenUntilSays(t *testing.T) {
	var n atomic.Int64
	res := Run(context.Background(), Config{Workers: 4, Duration: time.Minute, Until: func() bool { return n.Load() >= 100 }},
		func(context.Context, int, int64) Outcome { n.Add(1); return Accepted })
	// Each worker may be past the check when the hundredth op ends.
	if got := len(res.Samples); got < 100 || got > 103 {
		t.Fatalf("%d operations; want 100 to 103", got)
	}
}

func TestRunOpenModelMeasuresFromDueTime(t *testing.T) {
	const rate = 200.0
	res := Run(context.Background(), Config{Workers: 1, Rate: rate, Ops: 20}, func(_ context.Context, _ int, seq int64) Outcome {
		if seq == 0 {
			time.Sleep(50 * time.Millisecond) // a stall of 10 intervals
		}
		return Accepted
	})
	if len(res.Samples) != 20 {
		t.Fatalf("%d samples, want 20", len(res.Samples))
	}
	for _, s := range res.Samples {
		// Operations late to be sent count from their due time, a
		// multiple of the 5ms interval; none counts from before it.
		seq := int64(s.Due / (5 * time.Millisecond))
		// Operation n (n < 10) was due at 5n ms but could not start before
		// the stall ended at 50ms: it waited at least 50-5n ms, counted
		// from its due time.
		if seq > 0 && seq < 10 {
			if s.Due != time.Duration(seq)*5*time.Millisecond {
				t.Errorf("op %d counts from %v, not from its due time", seq, s.Due)
			}
			if min := time.Duration(50-5*seq) * time.Millisecond; s.Latency < min {
				t.Errorf("op %d: latency %v, want at least %v (coordinated omission not accounted for)", seq, s.Latency, min)
			}
		}
	}
}

func TestRawClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/chunked":
			w.WriteHeader(http.StatusAccepted)
			for i := range 3 {
				fmt.Fprintf(w, "part%d;", i)
				w.(http.Flusher).Flush()
			}
		case "/close":
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "bye")
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			if a := r.Header.Get("X-Admission"); a != "" {
				fmt.Fprintf(w, `{"admission":%q}`, a)
				return
			}
			fmt.Fprintf(w, `{"auth":%q,"key":%q,"body":%q}`, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), body)
		}
	}))
	defer srv.Close()
	raw, err := NewRaw(srv.URL, 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx := context.Background()
	var buf bytes.Buffer
	tests := []struct {
		name   string
		call   Call
		status int
		body   string
	}{
		{
			name:   "headers and body, Content-Length answer",
			call:   Call{Method: "POST", URL: srv.URL + "/api", Token: "tok", IdempotencyKey: "k1", Body: []byte(`{"a":1}`)},
			status: 409, body: `{"auth":"Bearer tok","key":"k1","body":"{\"a\":1}"}`,
		},
		{name: "an admission", call: Call{Method: "POST", URL: srv.URL + "/api", Admission: "a1.6.9.x.y", Body: []byte("{}")}, status: 409,
			body: `{"admission":"a1.6.9.x.y"}`},
		{name: "chunked answer", call: Call{Method: "GET", URL: srv.URL + "/chunked"}, status: 202, body: "part0;part1;part2;"},
		{name: "the connection is reused after chunks", call: Call{Method: "POST", URL: srv.URL + "/x", Body: []byte("{}")}, status: 409,
			body: `{"auth":"","key":"","body":"{}"}`},
		{name: "Connection: close answer", call: Call{Method: "GET", URL: srv.URL + "/close"}, status: 503, body: "bye"},
		{name: "a new connection after close", call: Call{Method: "GET", URL: srv.URL + "/chunked"}, status: 202, body: "part0;part1;part2;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := raw.Do(ctx, 1, tt.call, &buf)
			if err != nil || st != tt.status || buf.String() != tt.body {
				t.Fatalf("got %d %q %v; want %d %q", st, buf.String(), err, tt.status, tt.body)
			}
		})
	}
	srv.Close()
	if st, err := raw.Do(ctx, 1, Call{Method: "GET", URL: srv.URL + "/x"}, &buf); st != 0 || err == nil {
		t.Fatalf("against a closed server: %d, %v; want 0 and an error", st, err)
	}
}

func TestDueBy(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		elapsed time.Duration
		rate    float64
		total   int64
		want    int64
	}{
		{"before the start", -ms, 200, -1, 0},
		{"operation 0 is due at once", 0, 200, -1, 1},
		{"just before the second", 4*ms + 999*time.Microsecond, 200, -1, 1},
		{"the second at 5ms", 5 * ms, 200, -1, 2},
		{"a second at 5000/s", time.Second, 5000, -1, 5001},
		{"capped by the total", time.Hour, 5000, 150000, 150000},
		{"no more than Ops", 20 * ms, 200, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dueBy(tt.elapsed, tt.rate, tt.total); got != tt.want {
				t.Fatalf("dueBy(%v, %v, %d) = %d, want %d", tt.elapsed, tt.rate, tt.total, got, tt.want)
			}
		})
	}
}
