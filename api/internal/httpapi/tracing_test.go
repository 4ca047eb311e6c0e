package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/tracingtest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// With a tracer, every request is a server span named by its route
// template, the order's reserve script and publish are its children, the
// event in Kafka carries the publish span's traceparent, a caller's trace
// is continued, and the latency histogram takes the trace id as an
// exemplar. In-process, against the real Redis, Kafka and MySQL, with the
// SDK's in-memory exporter.
func TestRequestSpans(t *testing.T) {
	t.Parallel()
	tracer, exp := tracingtest.New(t)

	ts := newTestServer(t)
	pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: ts.topic, Tracer: tracer})
	t.Cleanup(func() { pub.Close() })
	svc := ts.service(t, pub)
	useStore(svc, stockredis.New(ts.rdb, ts.prefix).Trace(tracer))
	reg := metrics.NewRegistry()
	srv := httptest.NewServer(httpapi.New(svc, ts.services(svc, testLogger(t)), auth.NewVerifier(testSecret), ts.checkers(kafkatest.Brokers()), testLogger(t),
		httpapi.WithMetrics(metrics.NewHTTP(reg), metrics.Handler(reg)), httpapi.WithTracer(tracer)))
	t.Cleanup(srv.Close)

	_, activity := ts.openSale(t, 1, 1)
	no := ts.mustPlace(t, srv.URL, buyerToken(t, 1), "k1", activity)
	soldOut := ts.place(t, srv.URL, buyerToken(t, 2), "k2", activity)
	if soldOut.status != http.StatusConflict {
		t.Fatalf("second buyer: %d, want 409", soldOut.status)
	}
	const caller = "4bf92f3577b34da6a3ce929d0e0e4736"
	ts.do(t, srv.URL, request{method: "GET", path: "/healthz", header: map[string]string{"traceparent": "00-" + caller + "-00f067aa0ba902b7-01"}})

	var orders, reserves, publishes, health []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		switch s.Name {
		case "POST /api/v1/orders":
			orders = append(orders, s)
		case "redis reserve":
			reserves = append(reserves, s)
		case "publish " + ts.topic:
			publishes = append(publishes, s)
		case "GET /healthz":
			health = append(health, s)
		}
	}
	if len(orders) != 2 || len(publishes) != 1 || len(health) != 1 {
		t.Fatalf("spans: %d order requests, %d publishes, %d health checks; want 2, 1, 1", len(orders), len(publishes), len(health))
	}
	req := orders[0]
	if tracingtest.Attr(req, tracing.AttrOrderNo) != no || tracingtest.Attr(req, "http.response.status_code") != "202" ||
		tracingtest.Attr(req, "http.route") != "/api/v1/orders" || req.Status.Code == codes.Error {
		t.Errorf("accepted request span: %v %v", req.Attributes, req.Status)
	}
	if tracingtest.Attr(orders[1], "http.response.status_code") != "409" || orders[1].Status.Code == codes.Error {
		t.Errorf("sold-out request span: %v %v (a refusal is no fault)", orders[1].Attributes, orders[1].Status)
	}
	if pubSpan := publishes[0]; pubSpan.Parent.SpanID() != req.SpanContext.SpanID() || tracingtest.Attr(pubSpan, tracing.AttrOrderNo) != no {
		t.Errorf("publish span under %s with %v, want under the request %s", pubSpan.Parent.SpanID(), pubSpan.Attributes, req.SpanContext.SpanID())
	}
	var underReq int
	for _, r := range reserves {
		if r.Parent.SpanID() == req.SpanContext.SpanID() && tracingtest.Attr(r, tracing.AttrOrderNo) == no {
			underReq++
		}
	}
	if underReq != 1 {
		t.Errorf("%d reserve spans of order %s under its request, want 1", underReq, no)
	}
	if h := health[0]; h.SpanContext.TraceID().String() != caller || h.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("health check span in trace %s under %s: the caller's trace not continued", h.SpanContext.TraceID(), h.Parent.SpanID())
	}

	// The event's headers carry the publish span's context.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: kafkatest.Brokers(), Topic: ts.topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "00-" + publishes[0].SpanContext.TraceID().String() + "-" + publishes[0].SpanContext.SpanID().String() + "-01"
	var got string
	for _, h := range m.Headers {
		if h.Key == "traceparent" {
			got = string(h.Value)
		}
	}
	if got != want {
		t.Errorf("event traceparent %q, want %q", got, want)
	}

	// Prometheus asks for OpenMetrics, which carries the exemplar.
	mreq, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
	mreq.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	res, err := http.DefaultClient.Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `# {trace_id="`+req.SpanContext.TraceID().String()+`"}`) {
		t.Errorf("/metrics has no exemplar of trace %s", req.SpanContext.TraceID())
	}
}
