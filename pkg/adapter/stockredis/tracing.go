package stockredis

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// Trace makes every store of s start a span for each stock script it runs
// (reserve, release, claim, confirm, bucket take and give), as a child of
// the caller's span; nil (the default) makes none. It returns s.
func (s *Store) Trace(t *tracing.Tracer) *Store {
	s.tracer = t // the stores share s.core
	return s
}

// span starts the span of one run of script for item (callers add their
// attributes only when it records, so tracing off allocates nothing). End
// it with endSpan.
func (c *core) span(ctx context.Context, script string, item reservation.Item) (context.Context, trace.Span) {
	ctx, span := c.tracer.StartKind(ctx, "redis "+script, trace.SpanKindClient)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("db.system.name", "redis"),
			attribute.String("db.operation.name", "EVALSHA"),
			tracing.AttrScript.String(script), tracing.AttrItemID.Int64(item.ID))
	}
	return ctx, span
}

// endSpan ends span, marking it failed for an error other than a domain
// refusal (sold out, already purchased, not warmed: outcomes, not faults).
func endSpan(span trace.Span, err error) {
	if span.IsRecording() && err != nil {
		var refusal bool
		for _, r := range []error{order.ErrSoldOut, order.ErrAlreadyPurchased, order.ErrNotWarmed} {
			refusal = refusal || errors.Is(err, r)
		}
		if refusal {
			span.SetAttributes(tracing.AttrOutcome.String(err.Error()))
		} else {
			tracing.Fail(span, err)
		}
	}
	span.End()
}
