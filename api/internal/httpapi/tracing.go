package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// WithTracer makes a server span of every request (named by method and
// route template, continuing the caller's W3C trace context if it sent
// one), which the spans of the Redis scripts and the Kafka publish join.
// Without it (tracing off) no middleware runs at all.
func WithTracer(t *tracing.Tracer) Option {
	return func(s *Server) { s.tracer = t }
}

// trace is the tracing middleware.
func (s *Server) trace(c *gin.Context) {
	ctx := propagation.TraceContext{}.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	ctx, span := s.tracer.Start(ctx, c.Request.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
	if !span.IsRecording() {
		return
	}
	code := c.Writer.Status()
	span.SetAttributes(attribute.String("http.request.method", c.Request.Method),
		attribute.String("http.route", route), attribute.Int("http.response.status_code", code),
		attribute.String("seckill.request_id", c.GetString(ctxRequestID)))
	if code >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(code))
	}
}
