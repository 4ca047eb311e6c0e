package fulfil

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/consume"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// batchTrace traces one item's batch two ways. The batch has a span of its
// own, in a trace of its own that links to the trace of every order it
// carries; the Redis scripts and the MySQL transaction run under it. And
// every order whose trace (from the api, through the Kafka headers) is
// sampled gets a span in that trace, with a child span for each step of the
// batch it took part in (claim, MySQL transaction, confirm: the same time
// as the batch's step) and its release, if MySQL refused it, under it.
// A nil *batchTrace (tracing off) does nothing.
type batchTrace struct {
	tracer *tracing.Tracer
	ctx    context.Context // the batch span's
	span   trace.Span
	orders []orderTrace // by event index; zero for an order not sampled
}

type orderTrace struct {
	ctx  context.Context
	span trace.Span
}

// startBatch starts the tracing of events (all of item), or returns nil
// when tracing is off.
func (p *Handler) startBatch(ctx context.Context, item int64, events []order.Event) *batchTrace {
	if !p.Tracer.On() {
		return nil
	}
	remotes := make([]trace.SpanContext, len(events))
	var links []trace.Link
	for i, e := range events {
		remotes[i] = tracing.Remote(e.TraceParent, e.TraceState)
		if remotes[i].IsValid() {
			links = append(links, trace.Link{SpanContext: remotes[i],
				Attributes: []attribute.KeyValue{tracing.AttrOrderNo.String(e.OrderNo)}})
		}
	}
	b := &batchTrace{tracer: p.Tracer, orders: make([]orderTrace, len(events))}
	b.ctx, b.span = p.Tracer.Start(ctx, "fulfil batch", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithSpanKind(trace.SpanKindConsumer))
	if b.span.IsRecording() {
		b.span.SetAttributes(tracing.AttrItemID.Int64(item), tracing.AttrBatchSize.Int(len(events)),
			attribute.String("messaging.system", "kafka"), attribute.String("messaging.operation.type", "process"))
	}
	batch := trace.LinkFromContext(b.ctx)
	for i, e := range events {
		if !remotes[i].IsSampled() {
			continue
		}
		octx := trace.ContextWithRemoteSpanContext(ctx, remotes[i])
		octx, span := p.Tracer.Start(octx, "fulfil order", trace.WithLinks(batch),
			trace.WithSpanKind(trace.SpanKindConsumer))
		span.SetAttributes(tracing.AttrOrderNo.String(e.OrderNo), tracing.AttrItemID.Int64(e.ItemID),
			tracing.AttrActivityID.Int64(e.ActivityID), tracing.AttrUserID.String(e.UserID),
			tracing.AttrQuantity.Int(e.Quantity), tracing.AttrBatchSize.Int(len(events)),
			attribute.String("messaging.system", "kafka"))
		b.orders[i] = orderTrace{ctx: octx, span: span}
	}
	return b
}

// context is the batch span's context, or ctx when b is nil.
func (b *batchTrace) context(ctx context.Context) context.Context {
	if b == nil {
		return ctx
	}
	return b.ctx
}

// orderContext is the context of event i's span, or ctx when it has none.
func (b *batchTrace) orderContext(ctx context.Context, i int) context.Context {
	if b == nil || b.orders[i].span == nil {
		return ctx
	}
	return b.orders[i].ctx
}

// scriptContext is the context a script run for event i alone goes under:
// the order's span, or the batch's when the order's trace is not sampled
// (never a root of its own), or ctx when b is nil.
func (b *batchTrace) scriptContext(ctx context.Context, i int) context.Context {
	if b == nil {
		return ctx
	}
	if b.orders[i].span == nil {
		return b.ctx
	}
	return b.orders[i].ctx
}

// stepAll is step for every order of the batch.
func (b *batchTrace) stepAll(name string, start time.Time, err error) {
	if b == nil {
		return
	}
	all := make([]int, len(b.orders))
	for i := range all {
		all[i] = i
	}
	b.step(name, start, err, all)
}

// step records, in the trace of each order of which (event indexes), a
// span named name from start to now: the order's share of a batch step.
func (b *batchTrace) step(name string, start time.Time, err error, which []int) {
	if b == nil {
		return
	}
	end := time.Now()
	for _, i := range which {
		o := b.orders[i]
		if o.span == nil {
			continue
		}
		_, span := b.tracer.Start(o.ctx, name, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient))
		tracing.Fail(span, err)
		span.End(trace.WithTimestamp(end))
	}
}

// outcome records what became of event i: its outcome, or the error of a
// retry.
func (b *batchTrace) outcome(i int, r consume.Result) {
	if b == nil || b.orders[i].span == nil {
		return
	}
	b.orders[i].span.SetAttributes(tracing.AttrOutcome.String(string(outcomeOf(r))))
	if r.Outcome == consume.Retry || r.Outcome == consume.Poison {
		tracing.Fail(b.orders[i].span, r.Err)
	}
}

// end ends every span; err (the first retry's cause) fails the batch's.
func (b *batchTrace) end(err error) {
	if b == nil {
		return
	}
	for _, o := range b.orders {
		if o.span != nil {
			o.span.End()
		}
	}
	tracing.Fail(b.span, err)
	b.span.End()
}
