package tracing

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestEnabled(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    bool
		wantErr string
	}{
		{name: "nothing set", env: nil},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, want: true},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, want: true},
		{name: "exporter otlp", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{name: "exporter none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "other exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "only otlp or none"},
		{name: "grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantErr: "only http/protobuf"},
		{name: "http", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, want: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Enabled(func(k string) string { return c.env[k] })
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Enabled = %v, %v; want an error with %q", got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Enabled = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestSamplerFromEnv(t *testing.T) {
	cases := []struct {
		sampler, arg string
		want         string
		wantErr      bool
	}{
		{"", "", "LinkedOr{ParentBased{root:AlwaysOnSampler", false},
		{"parentbased_traceidratio", "0.01", "LinkedOr{ParentBased{root:TraceIDRatioBased{0.01}", false},
		{"traceidratio", "", "LinkedOr{TraceIDRatioBased{1}", false},
		{"always_off", "", "LinkedOr{AlwaysOffSampler", false},
		{"parentbased_traceidratio", "2", "", true},
		{"jaeger_remote", "", "", true},
	}
	for _, c := range cases {
		env := map[string]string{"OTEL_TRACES_SAMPLER": c.sampler, "OTEL_TRACES_SAMPLER_ARG": c.arg}
		s, err := samplerFromEnv(func(k string) string { return env[k] })
		if c.wantErr {
			if err == nil {
				t.Errorf("%s %s: no error", c.sampler, c.arg)
			}
			continue
		}
		if err != nil || !strings.HasPrefix(s.Description(), c.want) {
			t.Errorf("%s %s: %v, %v; want %s...", c.sampler, c.arg, s, err, c.want)
		}
	}
}

// A root span that links to a sampled span is sampled though its own
// sampler says never; one linking to nothing sampled is not.
func TestLinkedRootIsSampled(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(linked{sdktrace.NeverSample()}))
	tr := New(tp)
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{2}, SpanID: trace.SpanID{2}})
	_, a := tr.Start(context.Background(), "a", trace.WithLinks(trace.Link{SpanContext: unsampled}))
	_, b := tr.Start(context.Background(), "b", trace.WithLinks(trace.Link{SpanContext: unsampled}, trace.Link{SpanContext: sampled}))
	if a.SpanContext().IsSampled() || !b.SpanContext().IsSampled() {
		t.Fatalf("sampled: a %v (want false), b %v (want true)", a.SpanContext().IsSampled(), b.SpanContext().IsSampled())
	}
}

// Tracing off costs no allocation on the hot path.
func TestOffAllocatesNothing(t *testing.T) {
	var tr *Tracer
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := tr.Start(ctx, "redis reserve")
		c, kinded := tr.StartKind(c, "redis reserve", trace.SpanKindClient)
		if span.IsRecording() || kinded.IsRecording() {
			t.Fatal("a nil tracer recorded")
		}
		kinded.End()
		Fail(span, context.Canceled)
		span.End()
		if p, _ := Header(c); p != "" {
			t.Fatal("a header without a span")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per span with tracing off, want 0", allocs)
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := New(tp).Start(context.Background(), "x")
	defer span.End()
	parent, _ := Header(ctx)
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if parent != want {
		t.Fatalf("traceparent %q, want %q", parent, want)
	}
	sc := Remote(parent, "")
	if !sc.IsRemote() || sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() || !sc.IsSampled() {
		t.Fatalf("Remote = %+v", sc)
	}
	if Remote("garbage", "").IsValid() || Remote("", "").IsValid() {
		t.Fatal("a bad traceparent gave a valid span context")
	}
}

// BenchmarkOrderSpans is the api's tracing work for one order: the request
// span, the reserve script's and the publish's spans under it, and the
// traceparent for the Kafka headers; with tracing off (a nil Tracer), on
// with 1 % of traces sampled (parentbased_traceidratio, what the bench and
// compose use) and on with every trace sampled, the spans going to a
// batcher whose exporter drops them.
func BenchmarkOrderSpans(b *testing.B) {
	provider := func(ratio string) *Tracer {
		env := map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": ratio}
		s, err := samplerFromEnv(func(k string) string { return env[k] })
		if err != nil {
			b.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(s), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return New(tp)
	}
	for _, c := range []struct {
		name string
		t    *Tracer
	}{{"off", nil}, {"on, 1 % sampled", provider("0.01")}, {"on, all sampled", provider("1")}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				rctx, req := c.t.StartKind(ctx, "POST /api/v1/orders", trace.SpanKindServer)
				if req.IsRecording() {
					req.SetAttributes(AttrOrderNo.String("01KB-1"), AttrItemID.Int64(1), AttrActivityID.Int64(1))
				}
				_, res := c.t.StartKind(rctx, "redis reserve", trace.SpanKindClient)
				if res.IsRecording() {
					res.SetAttributes(AttrScript.String("reserve"), AttrItemID.Int64(1))
				}
				res.End()
				pctx, pub := c.t.Start(rctx, "publish seckill.orders")
				_, _ = Header(pctx)
				pub.End()
				req.End()
			}
		})
	}
}
