package e2e_test

import (
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
)

// During a sale the api's /metrics and the consumer's admin /metrics show
// the requests, the reserve outcomes, the publishes, the batches and the
// created orders; no series is labelled with an order number.
func TestMetricsMoveDuringASale(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 2})
	api := p.StartAPI()
	admin := pipelinetest.FreeAddr(t)
	p.StartConsumer("SECKILL_ADMIN_ADDR=" + admin)
	apiMetrics, consumerMetrics := api.URL+"/metrics", "http://"+admin+"/metrics"

	before := pipelinetest.ScrapeMetrics(t, apiMetrics)
	const stock, buyers = 5, 30
	sale := api.CreateSale(stock, 1)
	accepted, codes := crowd(t, api, sale.ActivityID, userRange(1, buyers), 10)
	if len(accepted) != stock || codes["SOLD_OUT"] != buyers-stock {
		t.Fatalf("accepted %d, refused %v", len(accepted), codes)
	}
	final := p.WaitFinal(accepted, 30*time.Second)
	for no, u := range accepted {
		if st, _, err := api.OrderStatus(u, no); err != nil || st != "CREATED" {
			t.Fatalf("poll %s: %s %v (%+v)", no, st, err, final[no])
		}
	}

	after := pipelinetest.ScrapeMetrics(t, apiMetrics)
	delta := func(name string, labels ...string) float64 {
		return after.Value(name, labels...) - before.Value(name, labels...)
	}
	orders := []string{"route", "/api/v1/orders", "method", "POST"}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"seckill_http_requests_total", append(orders, "code", "202"), stock},
		{"seckill_http_requests_total", append(orders, "code", "409"), buyers - stock},
		{"seckill_http_request_duration_seconds", orders, buyers},
		{"seckill_http_requests_total", []string{"route", "/api/v1/orders/:order_no", "method", "GET", "code", "200"}, stock},
		{"seckill_http_requests_total", []string{"route", "/admin/v1/activities/:id/warmup", "method", "POST", "code", "200"}, 1},
		{"seckill_reserve_total", []string{"outcome", "accepted"}, stock},
		{"seckill_publish_total", []string{"result", "ok"}, stock},
		{"seckill_publish_duration_seconds", nil, stock},
		{"seckill_publish_total", []string{"result", "error"}, 0},
	} {
		if got := delta(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v went up by %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The in-process sold-out flag answers most refusals without the script.
	soldOut := delta("seckill_reserve_total", "outcome", "sold_out")
	if skipped := delta("seckill_reserve_skipped_sold_out_total"); soldOut < 1 || soldOut+skipped != buyers-stock {
		t.Errorf("sold_out %v + skipped %v, want at least one sold_out and %d in all", soldOut, skipped, buyers-stock)
	}
	if after.Value("go_goroutines") == 0 {
		t.Error("no go_goroutines: the runtime collector is missing")
	}
	for route := range after.LabelValues("route") {
		for no := range accepted {
			if strings.Contains(route, no) {
				t.Fatalf("route label %q holds an order number", route)
			}
		}
	}

	// A replayed key and a second order of a buyer who holds one are
	// counted by what the reserve script answered (a sale with stock left,
	// so no sold-out flag answers them).
	spare := api.CreateSale(10, 1)
	m0 := pipelinetest.ScrapeMetrics(t, apiMetrics)
	for _, key := range []string{"first", "first", "second"} {
		if _, err := api.PlaceOrder(1000, key, spare.ActivityID, 1); err != nil {
			t.Fatal(err)
		}
	}
	m1 := pipelinetest.ScrapeMetrics(t, apiMetrics)
	for _, outcome := range []string{"accepted", "duplicate_key", "already_purchased"} {
		if d := m1.Value("seckill_reserve_total", "outcome", outcome) - m0.Value("seckill_reserve_total", "outcome", outcome); d != 1 {
			t.Errorf("seckill_reserve_total{outcome=%q} went up by %v, want 1", outcome, d)
		}
	}

	// The consumer's counters move once its batches are committed (the
	// batch histogram and the lag right after the commit, so wait for
	// those too).
	batched := func(s pipelinetest.Scrape) float64 {
		if f := s["seckill_consumer_batch_messages"]; f != nil && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0].GetHistogram().GetSampleSum()
		}
		return 0
	}
	cm := pipelinetest.ScrapeUntil(t, consumerMetrics, "created orders in committed batches", func(s pipelinetest.Scrape) bool {
		return s.Value("seckill_consumer_events_total", "outcome", "created") == stock+1 && batched(s) >= stock+1 &&
			len(s.LabelValues("partition")) > 0 && s.Value("seckill_consumer_lag_messages") == 0
	})
	if n := cm.Value("seckill_consumer_batch_messages"); n < 1 {
		t.Errorf("%v batches observed", n)
	}
	if sum := batched(cm); sum != stock+1 {
		t.Errorf("batches held %v messages, want %d", sum, stock+1)
	}
	if n := cm.Value("seckill_consumer_batch_duration_seconds"); n < 1 {
		t.Errorf("%v batch durations observed", n)
	}
	if n := cm.Value("seckill_consumer_fulfil_delay_seconds"); n != stock+1 {
		t.Errorf("%v fulfil delays observed, want %d", n, stock+1)
	}
	if len(cm.LabelValues("partition")) == 0 || cm.Value("seckill_consumer_lag_messages") != 0 {
		t.Errorf("lag by partition %v, total %v; want a series per partition read, all 0",
			cm.LabelValues("partition"), cm.Value("seckill_consumer_lag_messages"))
	}
	pipelinetest.ScrapeUntil(t, consumerMetrics, "the closer's and the sweep's locks taken", func(s pipelinetest.Scrape) bool {
		return s.Value("seckill_lock_acquisitions_total", "lock", "closer") > 0 &&
			s.Value("seckill_lock_acquisitions_total", "lock", "sweep") > 0
	})

	// No profiles unless SECKILL_PPROF=true.
	resp, err := http.Get("http://" + admin + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/debug/pprof/ answered %d without SECKILL_PPROF", resp.StatusCode)
	}
}

// A draw's entries move the api's entry metrics: every entry and every
// repeat of one runs the Redis step and is published (acknowledged by
// Kafka) once, each timed.
func TestEntryMetricsMoveDuringADraw(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 2})
	api := p.StartAPI()
	apiMetrics := api.URL + "/metrics"
	s := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{5}, EntriesCloseIn: time.Minute, PaymentWindow: time.Minute})
	before := pipelinetest.ScrapeMetrics(t, apiMetrics)
	const entrants = 6
	for u := 1; u <= entrants; u++ {
		if code, e, err := api.Enter(strconv.Itoa(u), s.ActivityID, s.Items[0].ID); err != nil || code != http.StatusCreated {
			t.Fatalf("entrant %d: %d %+v %v", u, code, e, err)
		}
	}
	// A repeat answers the entry the buyer made, published again.
	if code, e, err := api.Enter("1", s.ActivityID, s.Items[0].ID); err != nil || code != http.StatusOK {
		t.Fatalf("repeat: %d %+v %v", code, e, err)
	}
	after := pipelinetest.ScrapeMetrics(t, apiMetrics)
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"seckill_entry_take_duration_seconds", nil},
		{"seckill_entry_publish_duration_seconds", nil},
		{"seckill_entry_publish_total", []string{"result", "ok"}},
	} {
		if got := after.Value(c.name, c.labels...) - before.Value(c.name, c.labels...); got != entrants+1 {
			t.Errorf("%s%v went up by %v, want %d", c.name, c.labels, got, entrants+1)
		}
	}
	if got := after.Value("seckill_entry_publish_total", "result", "error"); got != 0 {
		t.Errorf("%v entry publishes failed", got)
	}
}

// The api's admin listener serves /metrics and, with SECKILL_PPROF=true,
// the profiles; the public port never serves profiles.
func TestAPIAdminListenerAndPprof(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	admin := pipelinetest.FreeAddr(t)
	api := p.StartAPI("SECKILL_ADMIN_ADDR="+admin, "SECKILL_PPROF=true")
	for _, c := range []struct {
		url  string
		want int
	}{
		{"http://" + admin + "/metrics", 200},
		{"http://" + admin + "/debug/pprof/", 200},
		{"http://" + admin + "/debug/pprof/goroutine?debug=1", 200},
		{api.URL + "/debug/pprof/", 404},
		{api.URL + "/metrics", 200},
	} {
		resp, err := http.Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s: %d, want %d", c.url, resp.StatusCode, c.want)
		}
	}
	if m := pipelinetest.ScrapeMetrics(t, "http://"+admin+"/metrics"); m["seckill_http_requests_total"] == nil {
		t.Error("the admin /metrics lacks the api's metrics")
	}
}

// SECKILL_PPROF without an admin listener is refused at start.
func TestPprofNeedsAdminListener(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(pipelinetest.Binary(t, "api"))
	cmd.Env = append(os.Environ(), "SECKILL_JWT_SECRET="+pipelinetest.Secret, "SECKILL_ADMIN_ADDR=", "SECKILL_PPROF=true")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("the api kept running")
	}
	if err == nil || !strings.Contains(string(out), "SECKILL_PPROF=true needs an admin listener") {
		t.Fatalf("exit %v, output %s", err, out)
	}
}
