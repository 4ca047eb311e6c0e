// Package tracingtest records the spans of a test in memory, with the
// OpenTelemetry SDK's own exporter, for tests that check what the programs
// trace.
package tracingtest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// New returns a tracer that samples every trace and the exporter its spans
// end up in, synchronously; the provider is shut down when the test ends.
func New(t testing.TB) (*tracing.Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp), exp
}

// Attr is the value of span's attribute key as a string, "" when it has
// none.
func Attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.String()
		}
	}
	return ""
}
