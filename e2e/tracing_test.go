package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/seckill/seckill/internal/testkit/otlptest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
)

// With the OTEL_* variables set, one order is one trace across both
// programs: the api's request span, its reserve script and its Kafka
// publish, then, through the W3C trace context in the message headers, the
// consumer's span for the order with its claim, MySQL transaction and
// confirm. The consumer's batch span is a trace of its own that links to
// the order's. A caller's traceparent is continued, and the order's log
// lines on both sides carry the trace id. The spans are read from what the
// programs exported over OTLP/HTTP to a receiver in the test.
func TestOneOrderIsOneTrace(t *testing.T) {
	t.Parallel()
	rcv, err := otlptest.Start(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rcv.Close() })
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_TRACES_SAMPLER=parentbased_always_on"}
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI(otel...)
	consumer := p.StartConsumer(otel...)
	sale := api.CreateSale(5, 1)

	place := func(user int64, headers map[string]string) string {
		var placed struct {
			OrderNo string `json:"order_no"`
		}
		code, err := api.Do("POST", "/api/v1/orders", user, "", headers, map[string]any{"activity_id": sale.ActivityID}, &placed)
		if err != nil || code != 202 {
			t.Fatalf("place: %d %v", code, err)
		}
		return placed.OrderNo
	}
	a := place(11, map[string]string{"Idempotency-Key": "ka"})
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	b := place(12, map[string]string{"Idempotency-Key": "kb", "traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"})
	p.WaitFinal(map[string]int64{a: 11, b: 12}, 30*time.Second)

	// find returns the one span of service named name with the attribute
	// order_no, once exported.
	find := func(service, name, orderNo string) otlptest.Span {
		t.Helper()
		var found otlptest.Span
		waittest.Until(t, 30*time.Second, fmt.Sprintf("span %s %q of order %s", service, name, orderNo), func() bool {
			for _, s := range rcv.Spans() {
				if s.Service == service && s.Name == name && s.Attrs["seckill.order_no"] == orderNo {
					found = s
					return true
				}
			}
			return false
		})
		return found
	}
	// childOf returns the one span of service named name whose parent is
	// parent, once exported.
	childOf := func(parent otlptest.Span, service, name string) otlptest.Span {
		t.Helper()
		var found otlptest.Span
		waittest.Until(t, 30*time.Second, fmt.Sprintf("span %s %q under %q", service, name, parent.Name), func() bool {
			for _, s := range rcv.Spans() {
				if s.Service == service && s.Name == name && s.ParentSpanID == parent.SpanID {
					found = s
					return true
				}
			}
			return false
		})
		if found.TraceID != parent.TraceID {
			t.Errorf("%s %q is in trace %s, its parent %q in %s", service, name, found.TraceID, parent.Name, parent.TraceID)
		}
		return found
	}

	for _, c := range []struct {
		orderNo, caller string
	}{{a, ""}, {b, callerTrace}} {
		req := find("seckill-api", "POST /api/v1/orders", c.orderNo)
		switch {
		case c.caller == "" && req.ParentSpanID != "":
			t.Errorf("order %s: request span has a parent %s; no traceparent was sent", c.orderNo, req.ParentSpanID)
		case c.caller != "" && (req.TraceID != c.caller || req.ParentSpanID != callerSpan):
			t.Errorf("order %s: request span in trace %s under %s, want the caller's %s under %s",
				c.orderNo, req.TraceID, req.ParentSpanID, c.caller, callerSpan)
		}
		if req.Attrs["seckill.item_id"] != fmt.Sprint(sale.ItemID) || req.Attrs["seckill.activity_id"] != fmt.Sprint(sale.ActivityID) ||
			req.Attrs["http.response.status_code"] != "202" {
			t.Errorf("order %s: request span attributes %v", c.orderNo, req.Attrs)
		}
		reserve := childOf(req, "seckill-api", "redis reserve")
		if reserve.Attrs["seckill.order_no"] != c.orderNo || reserve.Attrs["db.redis.script"] != "reserve" {
			t.Errorf("order %s: reserve span attributes %v", c.orderNo, reserve.Attrs)
		}
		publish := childOf(req, "seckill-api", "publish "+p.Topic)
		fulfil := childOf(publish, "seckill-consumer", "fulfil order")
		if fulfil.Attrs["seckill.order_no"] != c.orderNo || fulfil.Attrs["seckill.outcome"] != "created" {
			t.Errorf("order %s: consumer span attributes %v", c.orderNo, fulfil.Attrs)
		}
		for _, step := range []string{"claim", "mysql transaction", "confirm"} {
			childOf(fulfil, "seckill-consumer", step)
		}
		// The batch that carried the order: a trace of its own, linking
		// to the order's, with the scripts and the transaction under it.
		var batch otlptest.Span
		waittest.Until(t, 30*time.Second, "the batch span linking to order "+c.orderNo, func() bool {
			for _, s := range rcv.Spans() {
				if s.Name == "fulfil batch" && slices.Contains(s.Links, req.TraceID) {
					batch = s
					return true
				}
			}
			return false
		})
		if batch.TraceID == req.TraceID || batch.ParentSpanID != "" {
			t.Errorf("order %s: batch span in trace %s under %q, want a root of its own", c.orderNo, batch.TraceID, batch.ParentSpanID)
		}
		for _, script := range []string{"redis claim", "mysql fulfil", "redis confirm"} {
			childOf(batch, "seckill-consumer", script)
		}
		for _, l := range []struct {
			proc *pipelinetest.Proc
			msg  string
		}{{api.Proc, "order reserved"}, {consumer, "order created"}} {
			line := findLine(t, l.proc, l.msg, map[string]string{"order_no": c.orderNo})
			if line.str("trace_id") != req.TraceID {
				t.Errorf("order %s: %q line has trace_id %q, want %s", c.orderNo, l.msg, line.str("trace_id"), req.TraceID)
			}
		}
	}
}

// The compose stack's observability profile carries the traces: Jaeger
// takes OTLP/HTTP where the api's and consumer's OTEL_* variables point,
// Prometheus keeps exemplars, and Grafana's Prometheus data source turns an
// exemplar's trace_id into a link to the Jaeger data source, which the
// dashboard's latency panels show.
func TestComposeTracing(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	type service struct {
		Image       string            `yaml:"image"`
		Profiles    []string          `yaml:"profiles"`
		Command     []string          `yaml:"command"`
		Expose      []string          `yaml:"expose"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
	}
	var f struct {
		Services map[string]service `yaml:"services"`
	}
	if err := yaml.UnmarshalWithOptions(b, &f, yaml.AllowDuplicateMapKey()); err != nil {
		t.Fatal(err)
	}
	j := f.Services["jaeger"]
	if !slices.Equal(j.Profiles, []string{"observability"}) || !regexp.MustCompile(`^jaegertracing/jaeger:\d+\.\d+\.\d+$`).MatchString(j.Image) ||
		!slices.Contains(j.Expose, "4318") || !slices.Contains(j.Command, "--set=receivers.otlp.protocols.http.endpoint=0.0.0.0:4318") ||
		!slices.Contains(j.Ports, "127.0.0.1:16686:16686") {
		t.Errorf("jaeger service: %+v", j)
	}
	for _, name := range []string{"api", "consumer"} {
		env := f.Services[name].Environment
		if env["OTEL_EXPORTER_OTLP_ENDPOINT"] != "http://jaeger:4318" || env["OTEL_TRACES_SAMPLER"] != "parentbased_traceidratio" ||
			env["OTEL_TRACES_SAMPLER_ARG"] == "" {
			t.Errorf("%s: OTEL_* environment %v", name, env)
		}
	}
	if !slices.Contains(f.Services["prometheus"].Command, "--enable-feature=exemplar-storage") {
		t.Errorf("prometheus keeps no exemplars: %v", f.Services["prometheus"].Command)
	}

	var ds struct {
		Datasources []struct {
			UID      string `yaml:"uid"`
			Type     string `yaml:"type"`
			URL      string `yaml:"url"`
			JSONData struct {
				Exemplars []struct {
					Name          string `yaml:"name"`
					DatasourceUID string `yaml:"datasourceUid"`
				} `yaml:"exemplarTraceIdDestinations"`
			} `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	uids := map[string]string{}
	links := map[string]string{}
	for _, file := range []string{"prometheus.yml", "jaeger.yml"} {
		b, err := os.ReadFile("../deploy/grafana/provisioning/datasources/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &ds); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds.Datasources {
			uids[d.UID] = d.Type
			for _, e := range d.JSONData.Exemplars {
				links[e.Name] = e.DatasourceUID
			}
		}
	}
	if uids["jaeger"] != "jaeger" || links["trace_id"] != "jaeger" {
		t.Errorf("data sources %v, exemplar links %v: want a jaeger data source that trace_id exemplars open", uids, links)
	}

	b, err = os.ReadFile("../deploy/grafana/dashboards/seckill.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr     string `json:"expr"`
				Exemplar bool   `json:"exemplar"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if tg.Exemplar {
				shown = append(shown, regexp.MustCompile(`seckill_[a-z_]+_bucket`).FindString(tg.Expr))
			}
		}
	}
	slices.Sort(shown)
	if want := []string{"seckill_consumer_fulfil_delay_seconds_bucket", "seckill_http_request_duration_seconds_bucket"}; !slices.Equal(shown, want) {
		t.Errorf("panels showing exemplars query %v, want %v (the histograms that carry trace ids)", shown, want)
	}
}
