package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/seckill/seckill/pkg/foundation/metrics"
)

// everything builds one registry with every component's metrics on it, as
// the three programs together would, and touches each metric once so that
// every family (vectors included) is gathered.
func everything(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := metrics.NewRegistry()
	h := metrics.NewHTTP(reg)
	h.Start()
	h.Route("POST", "/api/v1/orders").Observe(202, time.Millisecond)
	in := metrics.NewIntake(reg)
	in.Reserved(metrics.ReserveAccepted, time.Millisecond)
	in.SkippedSoldOut()
	in.Published(nil, time.Millisecond)
	in.Unpublished(metrics.UnpublishedReleased)
	c := metrics.NewConsumer(reg)
	c.Batch(10, time.Millisecond)
	c.Events(map[string]int{"created": 1, "failed": 1, "existing": 1, "skipped": 1})
	c.FulfilDelay(time.Millisecond)
	c.Retry()
	c.CommitFailed()
	c.FetchFailed()
	c.DeadLettered()
	c.Lag(0, 5)
	s := metrics.NewSweep(reg)
	s.Swept(1, 1, 1)
	s.Failed()
	cl := metrics.NewCloser(reg)
	cl.Closed(1, 1)
	cl.Failed()
	l := metrics.NewLock(reg)
	l.Acquired("sweep")
	l.Lost("sweep")
	r := metrics.NewReconciler(reg)
	r.Run(metrics.RunAgree, time.Second, time.Now())
	r.Items(map[string]int{"ok": 1, "not started": 1})
	r.Drift(map[int64]int64{7: 0})
	hl := metrics.NewHeal(reg)
	hl.Detected(metrics.HealRestart)
	hl.Pass(metrics.HealPassRepaired)
	hl.Repaired(time.Second)
	ps := metrics.NewPasses(reg)
	ps.RecordFailed(metrics.PassWarmup)
	ps.RecordsWaiting(metrics.PassWarmup, 1)
	wh := metrics.NewWebhooks(reg)
	wh.Sent(metrics.WebhookDelivered, time.Second)
	wh.Sent(metrics.WebhookRetry, 0)
	wh.Endpoints(1, 1, 1)
	wh.Disabled()
	df := metrics.NewDrawFreeze(reg)
	df.Observe(6 * time.Second)
	df.Behind(40)
	return reg
}

// seriesNames returns every name a PromQL expression can select on reg:
// each family's name, and for histograms its _bucket, _sum and _count.
func seriesNames(t *testing.T, reg prometheus.Gatherer) map[string]bool {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

// The names follow the Prometheus conventions and no label can take a
// user's or an order's identity.
func TestNamesFollowConventions(t *testing.T) {
	fams, err := everything(t).Gather()
	if err != nil {
		t.Fatal(err)
	}
	allowedLabels := map[string]bool{"route": true, "method": true, "code": true, "outcome": true, "result": true,
		"partition": true, "action": true, "lock": true, "verdict": true, "item": true,
		"reason": true, // reason: the heal watch's three (restart, new_master, marker)
		"pass":   true, // pass: the consumer's periodic passes (warmup, closer, sweep)
		"state":  true} // state: a webhook endpoint's (enabled, disabled, failing)
	valid := regexp.MustCompile(`^seckill_[a-z]+(_[a-z0-9]+)+$`)
	n := 0
	for _, f := range fams {
		name := f.GetName()
		if !strings.HasPrefix(name, "seckill_") {
			continue // go_*, process_*
		}
		n++
		if !valid.MatchString(name) {
			t.Errorf("%s: not a snake-case seckill_ name", name)
		}
		if f.GetHelp() == "" {
			t.Errorf("%s: no help text", name)
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			if !strings.HasSuffix(name, "_total") {
				t.Errorf("counter %s does not end in _total", name)
			}
		default:
			if strings.HasSuffix(name, "_total") {
				t.Errorf("%s %s ends in _total", f.GetType(), name)
			}
		}
		if strings.Contains(name, "duration") || strings.Contains(name, "delay") || strings.Contains(name, "timestamp") {
			if !strings.HasSuffix(name, "_seconds") {
				t.Errorf("%s: a time not in _seconds", name)
			}
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !allowedLabels[lp.GetName()] {
					t.Errorf("%s: label %q is not one of the bounded labels", name, lp.GetName())
				}
			}
		}
	}
	if n < 25 {
		t.Fatalf("only %d seckill_ families gathered", n)
	}
}

// Every method works on a nil receiver: a component without metrics.
func TestNilIsNoMetrics(t *testing.T) {
	var (
		h  *metrics.HTTP
		in *metrics.Intake
		c  *metrics.Consumer
		s  *metrics.Sweep
		cl *metrics.Closer
		l  *metrics.Lock
		r  *metrics.Reconciler
		ps *metrics.Passes
		wh *metrics.Webhooks
	)
	h.Start()
	h.Route("GET", "/x").Observe(200, time.Millisecond)
	in.Reserved(metrics.ReserveError, 0)
	in.SkippedSoldOut()
	in.Published(errors.New("x"), 0)
	in.Unpublished(metrics.UnpublishedKept)
	c.Batch(1, 0)
	c.Events(map[string]int{"created": 1})
	c.FulfilDelay(0)
	c.Retry()
	c.CommitFailed()
	c.FetchFailed()
	c.DeadLettered()
	c.Lag(1, 1)
	s.Swept(1, 1, 1)
	s.Failed()
	cl.Closed(1, 1)
	cl.Failed()
	l.Acquired("x")
	l.Lost("x")
	r.Run(metrics.RunBusy, 0, time.Now())
	r.Items(map[string]int{"ok": 1})
	r.Drift(map[int64]int64{1: 1})
	ps.RecordFailed(metrics.PassSweep)
	ps.RecordsWaiting(metrics.PassSweep, 1)
	wh.Sent(metrics.WebhookGaveUp, 0)
	wh.Endpoints(1, 0, 0)
	wh.Disabled()
}

func TestRouteCountsByCode(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := metrics.NewHTTP(reg)
	rt := h.Route("POST", "/api/v1/orders")
	for _, code := range []int{202, 202, 409, 999} {
		h.Start()
		rt.Observe(code, time.Millisecond)
	}
	want := `
# HELP seckill_http_requests_total HTTP requests answered, by route template (never the raw path), method and status code.
# TYPE seckill_http_requests_total counter
seckill_http_requests_total{code="0",method="POST",route="/api/v1/orders"} 1
seckill_http_requests_total{code="202",method="POST",route="/api/v1/orders"} 2
seckill_http_requests_total{code="409",method="POST",route="/api/v1/orders"} 1
# HELP seckill_http_requests_in_flight HTTP requests being served now.
# TYPE seckill_http_requests_in_flight gauge
seckill_http_requests_in_flight 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "seckill_http_requests_total", "seckill_http_requests_in_flight"); err != nil {
		t.Fatal(err)
	}
}

// The hot path allocates nothing once a route has seen a status code.
func TestRouteObserveDoesNotAllocate(t *testing.T) {
	h := metrics.NewHTTP(prometheus.NewRegistry())
	rt := h.Route("POST", "/api/v1/orders")
	rt.Observe(202, time.Millisecond)
	in := metrics.NewIntake(prometheus.NewRegistry())
	allocs := testing.AllocsPerRun(1000, func() {
		h.Start()
		rt.Observe(202, time.Millisecond)
		in.Reserved(metrics.ReserveSoldOut, time.Millisecond)
		in.Published(nil, time.Millisecond)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request", allocs)
	}
}

func BenchmarkRouteObserve(b *testing.B) {
	h := metrics.NewHTTP(prometheus.NewRegistry())
	rt := h.Route("POST", "/api/v1/orders")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Start()
			rt.Observe(202, time.Millisecond)
		}
	})
}

// Each report replaces the drift series: an item no longer checked has none.
func TestDriftReplacesSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := metrics.NewReconciler(reg)
	r.Drift(map[int64]int64{1: 3, 2: 0})
	r.Drift(map[int64]int64{2: -1})
	want := `
# HELP seckill_reconciler_drift_units Per item of the last report: Redis stock + in flight - MySQL stock (0 when the stores agree; positive means Redis could oversell).
# TYPE seckill_reconciler_drift_units gauge
seckill_reconciler_drift_units{item="2"} -1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "seckill_reconciler_drift_units"); err != nil {
		t.Fatal(err)
	}
}

func TestAdminHandler(t *testing.T) {
	reg := everything(t)
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	for _, pprof := range []bool{false, true} {
		h := metrics.AdminHandler(reg, pprof)
		if code, body := get(h, "/metrics"); code != 200 || !strings.Contains(body, "seckill_reserve_total") {
			t.Fatalf("pprof %v: /metrics answered %d:\n%.300s", pprof, code, body)
		}
		code, _ := get(h, "/debug/pprof/")
		if want := map[bool]int{false: 404, true: 200}[pprof]; code != want {
			t.Fatalf("pprof %v: /debug/pprof/ answered %d, want %d", pprof, code, want)
		}
	}
}

func TestListenAdmin(t *testing.T) {
	a, err := metrics.ListenAdmin("127.0.0.1:0", metrics.AdminHandler(everything(t), false))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + a.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// A taken port fails at once.
	if _, err := metrics.ListenAdmin(a.Addr(), http.NotFoundHandler()); err == nil {
		t.Fatal("a second listener on the same port started")
	}
	if err := a.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}
