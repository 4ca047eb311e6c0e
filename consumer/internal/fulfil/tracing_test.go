package fulfil_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/tracingtest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// TestTraceFollowsTheOrderThroughKafka publishes three orders the way the
// api does (a request span, the reserve script, the traced publish) and
// runs the router and the handler in-process, against the real Redis,
// Kafka and MySQL, with the SDK's in-memory exporter. A sampled order's
// consumer spans (claim, MySQL transaction, confirm; the release of the
// one MySQL refuses) join its trace through the message headers; the
// batch span is a trace of its own that links to every order's, and the
// order whose trace was not sampled gets no span of the consumer's.
func TestTraceFollowsTheOrderThroughKafka(t *testing.T) {
	t.Parallel()
	tracer, exp := tracingtest.New(t)

	e := newEnv(t)
	e.store.Trace(tracer)
	e.handler.Tracer = tracer
	ctx := context.Background()
	topic := kafkatest.NewTopic(t, 1)
	s := e.newSale(3, 1)
	pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: topic, Tracer: tracer})
	defer pub.Close()

	// place is the api's part: a request span, the reserve script and the
	// publish under it. parent, when valid, is the caller's span context.
	place := func(user int64, parent trace.SpanContext) (order.Event, trace.SpanContext) {
		t.Helper()
		rctx, req := tracer.Start(trace.ContextWithRemoteSpanContext(ctx, parent), "POST /api/v1/orders")
		defer req.End()
		ev := e.event(s, user, 1)
		ev.TraceParent = "ignored: the publisher writes the headers"
		_, err := e.store.Reservations.Reserve(rctx, reservation.Reservation{OrderNo: ev.OrderNo, UserID: strconv.FormatInt(user, 10),
			ItemID: s.item, ActivityID: s.activity, Quantity: 1, IdempotencyKey: ev.IdempotencyKey, At: ev.ReservedAt,
			QuotaTTL: 2 * time.Hour, ReservationTTL: 3 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(rctx, ev); err != nil {
			t.Fatal(err)
		}
		return ev, req.SpanContext()
	}
	created, createdSC := place(1, trace.SpanContext{})
	refused, refusedSC := place(2, trace.SpanContext{})
	unsampledParent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, Remote: true})
	unsampled, unsampledSC := place(3, unsampledParent)
	if !createdSC.IsSampled() || unsampledSC.IsSampled() {
		t.Fatalf("sampled: %v, %v", createdSC.IsSampled(), unsampledSC.IsSampled())
	}
	// MySQL holds one unit where Redis sold three: the orders after the
	// first are refused there and released in Redis.
	if err := e.db.Gorm().Exec("UPDATE item_stock SET stock = 1 WHERE item_id = ?", s.item).Error; err != nil {
		t.Fatal(err)
	}

	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	router := orderevents.NewRouter(orderevents.RouterConfig{Brokers: kafkatest.Brokers(), Topic: topic,
		GroupID: kafkatest.Name("g"), DrainTimeout: 5 * time.Second}, e.handler, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go func() { done <- router.Run(rctx) }()
	waittest.Until(t, 30*time.Second, "the three orders final in MySQL", func() bool {
		return e.status(created.OrderNo) == order.Created && e.status(refused.OrderNo) == order.Failed &&
			e.status(unsampled.OrderNo) == order.Failed
	})
	stop()
	if err := <-done; err != nil && rctx.Err() == nil {
		t.Fatal(err)
	}

	spans := exp.GetSpans()
	named := func(name string, sc trace.SpanContext) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, sp := range spans {
			if sp.Name == name && (!sc.IsValid() || sp.SpanContext.TraceID() == sc.TraceID()) {
				out = append(out, sp)
			}
		}
		return out
	}
	one := func(name string, parent trace.SpanContext) tracetest.SpanStub {
		t.Helper()
		var found []tracetest.SpanStub
		for _, sp := range named(name, parent) {
			if sp.Parent.SpanID() == parent.SpanID() {
				found = append(found, sp)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d spans %q under %s in trace %s, want 1", len(found), name, parent.SpanID(), parent.TraceID())
		}
		return found[0]
	}

	for _, c := range []struct {
		ev      order.Event
		req     trace.SpanContext
		outcome string
		steps   []string
	}{
		{created, createdSC, "created", []string{"claim", "mysql transaction", "confirm"}},
		{refused, refusedSC, "failed", []string{"claim", "mysql transaction"}},
	} {
		one("redis reserve", c.req)
		publish := one("publish "+topic, c.req)
		fulfil := one("fulfil order", publish.SpanContext)
		if tracingtest.Attr(fulfil, tracing.AttrOrderNo) != c.ev.OrderNo || tracingtest.Attr(fulfil, tracing.AttrOutcome) != c.outcome {
			t.Errorf("order %s: fulfil span attributes %v", c.ev.OrderNo, fulfil.Attributes)
		}
		for _, step := range c.steps {
			one(step, fulfil.SpanContext)
		}
		if c.outcome == "failed" {
			release := one("redis release", fulfil.SpanContext)
			if tracingtest.Attr(release, tracing.AttrOrderNo) != c.ev.OrderNo {
				t.Errorf("release span attributes %v", release.Attributes)
			}
		} else if n := len(named("confirm", c.req)); n != 1 {
			t.Errorf("order %s: %d confirm spans in its trace", c.ev.OrderNo, n)
		}
	}
	if n := len(named("confirm", refusedSC)); n != 0 {
		t.Errorf("the refused order has %d confirm spans", n)
	}
	if n := len(named("fulfil order", trace.SpanContext{})); n != 2 {
		t.Errorf("%d fulfil order spans, want 2: none for the unsampled order", n)
	}
	for _, sp := range spans {
		if sp.SpanContext.TraceID() == unsampledParent.TraceID() {
			t.Errorf("span %q recorded in the unsampled trace", sp.Name)
		}
	}

	// Every order's trace is linked from a batch span, a root of its own
	// with the scripts and the transaction under it.
	var linked []trace.TraceID
	unsampledRelease := 0
	for _, b := range named("fulfil batch", trace.SpanContext{}) {
		if b.Parent.IsValid() || b.SpanContext.TraceID() == createdSC.TraceID() {
			t.Errorf("batch span under %v in trace %s: want a root of its own", b.Parent, b.SpanContext.TraceID())
		}
		for _, l := range b.Links {
			linked = append(linked, l.SpanContext.TraceID())
		}
		one("redis claim", b.SpanContext)
		one("mysql fulfil", b.SpanContext)
		// The unsampled order's release runs under the batch, not as a
		// root of its own.
		for _, r := range named("redis release", b.SpanContext) {
			if r.Parent.SpanID() == b.SpanContext.SpanID() && tracingtest.Attr(r, tracing.AttrOrderNo) == unsampled.OrderNo {
				unsampledRelease++
			}
		}
	}
	if unsampledRelease != 1 {
		t.Errorf("%d release spans of the unsampled order under a batch span, want 1", unsampledRelease)
	}
	for _, r := range named("redis release", trace.SpanContext{}) {
		if !r.Parent.IsValid() {
			t.Errorf("a release span is a root of its own: %v", r.Attributes)
		}
	}
	for _, sc := range []trace.SpanContext{createdSC, refusedSC, unsampledSC} {
		if !slices.Contains(linked, sc.TraceID()) {
			t.Errorf("no batch span links to trace %s", sc.TraceID())
		}
	}
}
