package e2e_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/seckill/seckill/pkg/pipelinetest"
)

// unusedLoopbackAddr returns a loopback address with a port nobody listens on now.
func unusedLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// metricsScrape is one read of a /metrics endpoint.
type metricsScrape map[string]*dto.MetricFamily

func scrapeMetrics(t *testing.T, url string) metricsScrape {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape %s: %d %s", url, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return fams
}

// value sums the series of name whose labels include labels: a counter's or
// gauge's value, a histogram's sample count.
func (s metricsScrape) value(name string, labels ...string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	var sum float64
	for _, m := range f.GetMetric() {
		n := 0
		for _, lp := range m.GetLabel() {
			if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
				n++
			}
		}
		if n != len(want) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// labelValues returns every value any series of the scrape has for label.
func (s metricsScrape) labelValues(label string) map[string]bool {
	out := map[string]bool{}
	for _, f := range s {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] = true
				}
			}
		}
	}
	return out
}

// scrapeUntil scrapes url until ok holds for a scrape, and returns it.
func scrapeUntil(t *testing.T, url, what string, ok func(metricsScrape) bool) metricsScrape {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := scrapeMetrics(t, url)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen at %s within 30s", what, url)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// During a sale the api's /metrics and the consumer's admin /metrics show
// the requests, the reserve outcomes, the publishes, the batches and the
// created orders; no series is labelled with an order number.
func TestMetricsMoveDuringASale(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 2})
	api := p.StartAPI()
	admin := unusedLoopbackAddr(t)
	p.StartConsumer("SECKILL_ADMIN_ADDR=" + admin)
	apiMetrics, consumerMetrics := api.URL+"/metrics", "http://"+admin+"/metrics"

	before := scrapeMetrics(t, apiMetrics)
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

	after := scrapeMetrics(t, apiMetrics)
	delta := func(name string, labels ...string) float64 {
		return after.value(name, labels...) - before.value(name, labels...)
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
	if after.value("go_goroutines") == 0 {
		t.Error("no go_goroutines: the runtime collector is missing")
	}
	for route := range after.labelValues("route") {
		for no := range accepted {
			if strings.Contains(route, no) {
				t.Fatalf("route label %q holds an order number", route)
			}
		}
	}

	// The consumer's counters move once its batches are committed.
	cm := scrapeUntil(t, consumerMetrics, "created orders", func(s metricsScrape) bool {
		return s.value("seckill_consumer_events_total", "outcome", "created") == stock
	})
	if n := cm.value("seckill_consumer_batch_messages"); n < 1 {
		t.Errorf("%v batches observed", n)
	}
	if sum := cm["seckill_consumer_batch_messages"].GetMetric()[0].GetHistogram().GetSampleSum(); sum != stock {
		t.Errorf("batches held %v messages, want %d", sum, stock)
	}
	if n := cm.value("seckill_consumer_batch_duration_seconds"); n < 1 {
		t.Errorf("%v batch durations observed", n)
	}
	if n := cm.value("seckill_consumer_fulfil_delay_seconds"); n != stock {
		t.Errorf("%v fulfil delays observed, want %d", n, stock)
	}
	if len(cm.labelValues("partition")) == 0 || cm.value("seckill_consumer_lag_messages") != 0 {
		t.Errorf("lag by partition %v, total %v; want a series per partition read, all 0",
			cm.labelValues("partition"), cm.value("seckill_consumer_lag_messages"))
	}
	scrapeUntil(t, consumerMetrics, "the closer's and the sweep's locks taken", func(s metricsScrape) bool {
		return s.value("seckill_lock_acquisitions_total", "lock", "closer") > 0 &&
			s.value("seckill_lock_acquisitions_total", "lock", "sweep") > 0
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

// The api's admin listener serves /metrics and, with SECKILL_PPROF=true,
// the profiles; the public port never serves profiles.
func TestAPIAdminListenerAndPprof(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	admin := unusedLoopbackAddr(t)
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
	if m := scrapeMetrics(t, "http://"+admin+"/metrics"); m["seckill_http_requests_total"] == nil {
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
