package apiview

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestWithinAndQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := Snapshot{"409": {Bounds: []float64{0.001, 0.005, 0.025, inf}, Counts: []float64{10, 10, 10, 10}}}
	after := Snapshot{"409": {Bounds: []float64{0.001, 0.005, 0.025, inf}, Counts: []float64{60, 90, 109, 110}}}
	h := after.Since(before)["409"]
	if h.Count() != 100 {
		t.Fatalf("count %v, want 100", h.Count())
	}
	if got := h.Within(5 * time.Millisecond); got != 0.8 {
		t.Errorf("within 5 ms %v, want 0.8", got)
	}
	if got := h.Within(25 * time.Millisecond); got != 0.99 {
		t.Errorf("within 25 ms %v, want 0.99", got)
	}
	if got := h.Within(500 * time.Microsecond); got != 0 {
		t.Errorf("within 0.5 ms %v, want 0", got)
	}
	// P50: rank 50 of the first bucket's 50 -> its upper bound.
	if got := h.Quantile(0.5); math.Abs(got-1) > 1e-9 {
		t.Errorf("P50 %v ms, want 1", got)
	}
	// P90: rank 90, the second bucket holds ranks 50-80, the third 80-99:
	// 5 + 20*(10/19) ms.
	if got, want := h.Quantile(0.9), 5+20*10.0/19; math.Abs(got-want) > 1e-9 {
		t.Errorf("P90 %v ms, want %v", got, want)
	}
	// P99.9 falls in +Inf: the bound below it.
	if got := h.Quantile(0.999); got != 25 {
		t.Errorf("P99.9 %v ms, want 25", got)
	}
}

func TestTakeReadsOrdersAndSteps(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `# TYPE seckill_http_request_duration_seconds histogram
seckill_http_request_duration_seconds_bucket{code="202",method="POST",route="/api/v1/orders",le="0.025"} 3
seckill_http_request_duration_seconds_bucket{code="202",method="POST",route="/api/v1/orders",le="+Inf"} 4
seckill_http_request_duration_seconds_sum{code="202",method="POST",route="/api/v1/orders"} 0.1
seckill_http_request_duration_seconds_count{code="202",method="POST",route="/api/v1/orders"} 4
seckill_http_request_duration_seconds_bucket{code="200",method="GET",route="/api/v1/orders",le="0.025"} 9
seckill_http_request_duration_seconds_bucket{code="200",method="GET",route="/api/v1/orders",le="+Inf"} 9
seckill_http_request_duration_seconds_sum{code="200",method="GET",route="/api/v1/orders"} 0.1
seckill_http_request_duration_seconds_count{code="200",method="GET",route="/api/v1/orders"} 9
# TYPE seckill_publish_duration_seconds histogram
seckill_publish_duration_seconds_bucket{le="0.01"} 5
seckill_publish_duration_seconds_bucket{le="+Inf"} 6
seckill_publish_duration_seconds_sum 0.2
seckill_publish_duration_seconds_count 6
`)
	}))
	defer srv.Close()
	s, err := Take(context.Background(), []string{strings.TrimPrefix(srv.URL, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	if n := s["202"].Count(); n != 4 {
		t.Errorf("202s %v, want 4", n)
	}
	if s["200"] != nil {
		t.Errorf("GET answers were read as orders: %+v", s["200"])
	}
	if got := s["publish"].Within(10 * time.Millisecond); math.Abs(got-5.0/6) > 1e-9 {
		t.Errorf("publishes within 10 ms %v, want 5/6", got)
	}
	if s["reserve"] != nil {
		t.Errorf("a reserve histogram from nowhere: %+v", s["reserve"])
	}
}

func TestEntriesViewReadsTheEntriesRouteAndItsSteps(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `# TYPE seckill_http_request_duration_seconds histogram
seckill_http_request_duration_seconds_bucket{code="202",method="POST",route="/api/v1/orders",le="+Inf"} 4
seckill_http_request_duration_seconds_sum{code="202",method="POST",route="/api/v1/orders"} 0.1
seckill_http_request_duration_seconds_count{code="202",method="POST",route="/api/v1/orders"} 4
seckill_http_request_duration_seconds_bucket{code="201",method="POST",route="/api/v1/activities/:id/entries",le="0.025"} 7
seckill_http_request_duration_seconds_bucket{code="201",method="POST",route="/api/v1/activities/:id/entries",le="+Inf"} 8
seckill_http_request_duration_seconds_sum{code="201",method="POST",route="/api/v1/activities/:id/entries"} 0.1
seckill_http_request_duration_seconds_count{code="201",method="POST",route="/api/v1/activities/:id/entries"} 8
# TYPE seckill_publish_duration_seconds histogram
seckill_publish_duration_seconds_bucket{le="+Inf"} 6
seckill_publish_duration_seconds_sum 0.2
seckill_publish_duration_seconds_count 6
# TYPE seckill_entry_take_duration_seconds histogram
seckill_entry_take_duration_seconds_bucket{le="0.001"} 8
seckill_entry_take_duration_seconds_bucket{le="+Inf"} 8
seckill_entry_take_duration_seconds_sum 0.004
seckill_entry_take_duration_seconds_count 8
# TYPE seckill_entry_publish_duration_seconds histogram
seckill_entry_publish_duration_seconds_bucket{le="0.01"} 2
seckill_entry_publish_duration_seconds_bucket{le="+Inf"} 8
seckill_entry_publish_duration_seconds_sum 0.3
seckill_entry_publish_duration_seconds_count 8
`)
	}))
	defer srv.Close()
	s, err := Entries.Take(context.Background(), []string{strings.TrimPrefix(srv.URL, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	if n := s["201"].Count(); n != 8 {
		t.Errorf("201s %v, want 8", n)
	}
	if s["202"] != nil {
		t.Errorf("orders were read as entries: %+v", s["202"])
	}
	if got := s["publish"].Within(10 * time.Millisecond); got != 0.25 {
		t.Errorf("entry publishes within 10 ms %v, want 0.25 (the orders' publish histogram read instead?)", got)
	}
	if got := s["reserve"].Within(time.Millisecond); got != 1 {
		t.Errorf("entry takes within 1 ms %v, want 1", got)
	}
}
