// Package tracing sets up OpenTelemetry tracing for the programs, from the
// standard OTEL_* environment variables, and gives the rest of the code a
// Tracer that costs next to nothing when tracing is off (the default): a nil
// *Tracer starts no span, allocates nothing and returns the context as it
// was.
//
// Tracing is on when OTEL_TRACES_EXPORTER is "otlp", or when it is unset and
// an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); OTEL_SDK_DISABLED=true and
// OTEL_TRACES_EXPORTER=none turn it off. Spans go out over OTLP/HTTP
// (protobuf) in batches (the exporter reads its own OTEL_EXPORTER_OTLP_*
// settings); the sampler is the one OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, as the SDK would build it
// (parentbased_always_on when unset), except that a root span linking to a
// sampled span is sampled too; the service name comes from
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES, else the program's name.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of every span the programs make.
const Name = "github.com/seckill/seckill"

// Span attribute keys of the domain, shared by the api's and the
// consumer's spans so one query finds an order on either side.
const (
	AttrOrderNo    = attribute.Key("seckill.order_no")
	AttrItemID     = attribute.Key("seckill.item_id")
	AttrActivityID = attribute.Key("seckill.activity_id")
	AttrUserID     = attribute.Key("seckill.user_id")
	AttrQuantity   = attribute.Key("seckill.quantity")
	AttrOutcome    = attribute.Key("seckill.outcome")
	AttrBatchSize  = attribute.Key("seckill.batch.size")
	AttrScript     = attribute.Key("db.redis.script")
)

// Tracer starts spans. A nil *Tracer is tracing off: Start returns ctx and
// the span ctx already holds (none: a no-op span), with no allocation.
type Tracer struct {
	t trace.Tracer
}

// New returns a Tracer of provider's, or nil (off) for a nil provider.
func New(provider trace.TracerProvider) *Tracer {
	if provider == nil {
		return nil
	}
	return &Tracer{t: provider.Tracer(Name)}
}

// On reports whether t makes spans.
func (t *Tracer) On() bool { return t != nil }

// Start starts a span named name as a child of ctx's span. Set attributes
// only when span.IsRecording(), so an unsampled or untraced request pays
// nothing for them.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.t.Start(ctx, name, opts...)
}

// StartKind is Start for a span of kind: the option is made only when
// tracing is on, so a nil Tracer still allocates nothing (options passed to
// Start are allocated by the caller either way).
func (t *Tracer) StartKind(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind))
}

// Fail marks span failed with err (nil: nothing).
func Fail(span trace.Span, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// Header returns the W3C trace context headers (traceparent, tracestate)
// of ctx's span, or "" when ctx holds no span (tracing off): what the
// create-order event carries in its Kafka headers.
func Header(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	var c w3c
	propagation.TraceContext{}.Inject(ctx, &c)
	return c.parent, c.state
}

// Remote parses W3C trace context headers into the span context they
// name (invalid for empty or malformed headers).
func Remote(traceparent, tracestate string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	c := w3c{parent: traceparent, state: tracestate}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), &c))
}

// w3c carries the two W3C headers without a map.
type w3c struct{ parent, state string }

func (c *w3c) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

func (c *w3c) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state = value
	}
}

func (c *w3c) Keys() []string { return []string{"traceparent", "tracestate"} }

// Enabled reports whether the environment turns tracing on (see the
// package comment), and an error for a setting this package cannot honour.
func Enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	switch exp {
	case "none":
		return false, nil
	case "otlp":
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return false, nil
		}
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: only otlp or none", exp)
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if p := strings.TrimSpace(proto); p != "" && p != "http/protobuf" {
		return false, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: only http/protobuf (port 4318)", p)
	}
	return true, nil
}

// Check reports a tracing setting of the environment that Setup would
// refuse (an exporter or protocol it does not have, a sampler it does not
// know), so a program can refuse it with the rest of its configuration
// before it does any work.
func Check(getenv func(string) string) error {
	on, err := Enabled(getenv)
	if err != nil || !on {
		return err
	}
	_, err = samplerFromEnv(getenv)
	return err
}

// Provider is the SDK's tracer provider set up from the environment.
type Provider struct {
	*sdktrace.TracerProvider
}

// Shutdown flushes the spans still queued and stops the exporter; on a nil
// Provider it does nothing.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.TracerProvider == nil {
		return nil
	}
	return p.TracerProvider.Shutdown(ctx)
}

// Close is Shutdown at a program's exit: it gives the queued spans 5 s to
// go and logs what could not be sent.
func (p *Provider) Close(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("tracing: spans not all sent", "err", err)
	}
}

// Tracer returns the Tracer of p, nil (off) for a nil Provider.
func (p *Provider) Tracer() *Tracer {
	if p == nil || p.TracerProvider == nil {
		return nil
	}
	return New(p.TracerProvider)
}

// Setup builds the tracer provider the environment asks for, or returns nil
// (tracing off) when it asks for none. service is the service name unless
// OTEL_SERVICE_NAME says otherwise.
func Setup(ctx context.Context, service string) (*Provider, error) {
	on, err := Enabled(os.Getenv)
	if err != nil || !on {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	return NewProvider(ctx, service, sdktrace.WithBatcher(exp))
}

// NewProvider returns a provider for service with the sampler of the
// environment and the given options (an exporter: the tests pass an
// in-memory one).
func NewProvider(ctx context.Context, service string, opts ...sdktrace.TracerProviderOption) (*Provider, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	sampler, err := samplerFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	opts = append([]sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSampler(sampler)}, opts...)
	return &Provider{TracerProvider: sdktrace.NewTracerProvider(opts...)}, nil
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name (parentbased_always_on when unset), wrapped
// so that a root span linking to a sampled span is sampled too: a
// consumer's batch span then shows in the trace of every sampled order it
// carried.
func samplerFromEnv(getenv func(string) string) (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	ratio := 1.0
	if strings.HasSuffix(name, "traceidratio") {
		if arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG")); arg != "" {
			r, err := strconv.ParseFloat(arg, 64)
			if err != nil || r < 0 || r > 1 {
				return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
			}
			ratio = r
		}
	}
	var s sdktrace.Sampler
	switch name {
	case "always_on":
		s = sdktrace.AlwaysSample()
	case "always_off":
		s = sdktrace.NeverSample()
	case "traceidratio":
		s = sdktrace.TraceIDRatioBased(ratio)
	case "", "parentbased_always_on":
		s = sdktrace.ParentBased(sdktrace.AlwaysSample())
	case "parentbased_always_off":
		s = sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		s = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	default:
		return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio or parentbased_* of them", name)
	}
	return linked{s}, nil
}

// linked samples a root span that links to a sampled span, and otherwise
// asks the sampler it wraps.
type linked struct{ sdktrace.Sampler }

func (l linked) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if !trace.SpanContextFromContext(p.ParentContext).IsValid() {
		for _, ln := range p.Links {
			if ln.SpanContext.IsSampled() {
				return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
			}
		}
	}
	return l.Sampler.ShouldSample(p)
}

func (l linked) Description() string { return "LinkedOr{" + l.Sampler.Description() + "}" }

// TraceID returns the id of ctx's trace when ctx holds a sampled span, else
// "".
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}
