package orderevents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/batch"
	"github.com/seckill/seckill/pkg/foundation/periodic"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// Publisher writes create-order events, keyed by sale so one sale's
// orders stay in one partition, in order.
//
// Concurrent publishes are sent together. Sent one by one, or in batches
// closed after a fixed linger whatever the partition is doing, a burst for
// one item (every order of a flash sale goes to its sale's partition)
// would become a queue of small batches, each waiting for the
// acknowledgement of the one before, and the 200th buyer of a first sale
// would wait for about 20 round trips. Here every event goes through one
// lane: its sender takes every event waiting and writes them at once, one
// produce request per broker whatever the sales and partitions (producer),
// so the events that arrive while a write is in flight form the next one.
// A lone event is not delayed, and under load the batches grow with the
// round trip instead of the queue. One lane is enough: a write to any
// number of partitions is one request, and it was more lanes, each a
// request of its own every writeSpacing, that cost twenty sales at once
// more broker and api CPU per order than one sale.
type Publisher struct {
	prod    *producer
	timeout time.Duration
	tracer  *tracing.Tracer

	mu     sync.RWMutex // held to queue an event; Close takes it to close the lane
	closed bool
	lane   chan publishing
	sent   sync.WaitGroup
}

// publishing is one event waiting in a lane.
type publishing struct {
	msg      kafka.Message
	deadline time.Time
	done     chan error
}

const (
	// publishBatch bounds the events of one write: a partition's share of
	// it stays well under the broker's 1 MiB limit of a record batch.
	publishBatch = 1000
	// writeSpacing is the least time from the start of a write to the
	// start of its next: under a steady load whose round trip is shorter,
	// the events of 2 ms go in one produce request instead of many small
	// ones that cost the broker CPU. The first event after a quiet moment
	// goes at once.
	writeSpacing = 2 * time.Millisecond
)

// NewPublisher returns a publisher; Close stops it.
func NewPublisher(cfg Config) *Publisher {
	timeout := cfg.WriteTimeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	p := &Publisher{
		tracer:  cfg.Tracer,
		timeout: timeout,
		// Its own transport, refreshing metadata every second: the shared
		// default caches it for 6 s, so a topic created just before the
		// first publish would be unknown for that long.
		prod: &producer{
			tr:    &kafka.Transport{MetadataTTL: time.Second, DialTimeout: timeout},
			addr:  kafka.TCP(cfg.Brokers...),
			topic: cfg.Topic,
		},
		lane: make(chan publishing, publishBatch),
	}
	p.sent.Go(func() { batch.Drain(p.lane, publishBatch, p.write) })
	return p
}

// write sends the lane's waiting events in one call and answers each. The
// call may take until the earliest of their deadlines; an event already
// past its deadline is answered without being sent. It returns no sooner
// than writeSpacing after it started.
func (p *Publisher) write(waiting []publishing) {
	now := time.Now()
	defer func() { time.Sleep(writeSpacing - time.Since(now)) }()
	msgs := make([]kafka.Message, 0, len(waiting))
	live := waiting[:0:0]
	var deadline time.Time
	for _, w := range waiting {
		if !now.Before(w.deadline) {
			w.done <- fmt.Errorf("not sent: %w", context.DeadlineExceeded)
			continue
		}
		if deadline.IsZero() || w.deadline.Before(deadline) {
			deadline = w.deadline
		}
		msgs = append(msgs, w.msg)
		live = append(live, w)
	}
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	errs := p.prod.write(ctx, msgs)
	cancel()
	for i, w := range live {
		w.done <- errs[i]
	}
}

// Warm opens, before the first order needs them, what a first publish
// would wait for: the topic's metadata and a connection to the leader of
// every partition, in the writer's own connection pool. The api calls it
// before it listens, so the first buyers of a fresh api do not pay for
// them.
func (p *Publisher) Warm(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*p.timeout)
	defer cancel()
	c := &kafka.Client{Addr: p.prod.addr, Transport: p.prod.tr}
	var offsets []kafka.OffsetRequest
	for offsets == nil {
		meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{p.prod.topic}})
		if err != nil {
			return fmt.Errorf("warm the publisher: %w: %w", order.ErrUnavailable, err)
		}
		for _, t := range meta.Topics {
			// A topic created a moment ago may be unknown yet to the
			// broker asked, or have no leader yet: ask again.
			if errors.Is(t.Error, kafka.UnknownTopicOrPartition) || errors.Is(t.Error, kafka.LeaderNotAvailable) {
				offsets = nil
				break
			}
			if t.Error != nil {
				return fmt.Errorf("warm the publisher: topic %s: %w: %w", t.Name, order.ErrUnavailable, t.Error)
			}
			for _, part := range t.Partitions {
				offsets = append(offsets, kafka.LastOffsetOf(part.ID))
			}
		}
		if offsets == nil {
			select {
			case <-ctx.Done():
				return fmt.Errorf("warm the publisher: topic %s not known yet: %w: %w", p.prod.topic, order.ErrUnavailable, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	// ListOffsets goes to each partition's leader through the same pool a
	// produce uses.
	if _, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{p.prod.topic: offsets}}); err != nil {
		return fmt.Errorf("warm the publisher: %w: %w", order.ErrUnavailable, err)
	}
	return nil
}

// KeepWarm warms the publisher every interval until ctx ends, so that an
// api idle before a sale keeps its connections (the transport closes
// idle ones after 30 s, the broker after ten minutes).
func (p *Publisher) KeepWarm(ctx context.Context, interval time.Duration, log *slog.Logger) {
	periodic.Every(ctx, interval, func(ctx context.Context) {
		if err := p.Warm(ctx); err != nil && ctx.Err() == nil {
			log.Debug("publisher not warmed", "err", err)
		}
	})
}

// Publish sends e and returns once Kafka acknowledged it. An error wraps
// order.ErrUnavailable; the event may or may not have been written.
func (p *Publisher) Publish(ctx context.Context, e order.Event) (err error) {
	// The event's own encoder, called directly: json.Marshal would check
	// and compact its output a second time, which costs more than the
	// encoding itself.
	b, err := e.MarshalJSON()
	if err != nil {
		return err
	}
	// Keyed by the sale's tag (its first item; the item itself for a sale
	// of one), so a sale's events, whatever their sizes, share a partition
	// and the consumer takes them in one batch.
	tag := order.TagOf(e.OrderNo)
	msg := kafka.Message{Key: ItemKey(tag), Value: b}
	if p.tracer.On() {
		var span trace.Span
		ctx, span = p.tracer.Start(ctx, "publish "+p.prod.topic, trace.WithSpanKind(trace.SpanKindProducer))
		if span.IsRecording() {
			span.SetAttributes(attribute.String("messaging.system", "kafka"),
				attribute.String("messaging.destination.name", p.prod.topic),
				attribute.String("messaging.operation.type", "send"),
				tracing.AttrOrderNo.String(e.OrderNo), tracing.AttrItemID.Int64(e.ItemID),
				tracing.AttrActivityID.Int64(e.ActivityID))
		}
		defer func() { tracing.Fail(span, err); span.End() }()
		msg.Headers = traceHeaders(ctx)
	}
	if err := p.send(ctx, msg); err != nil {
		return fmt.Errorf("publish order %s: %w: %w", e.OrderNo, order.ErrUnavailable, err)
	}
	return nil
}

// send queues msg in the lane and waits for the answer: at most
// p.timeout in all, or until ctx ends while it is still queued. Once its
// lane's sender has it, the answer is awaited even if ctx ends, so that
// whatever happened to the event is what the caller hears.
func (p *Publisher) send(ctx context.Context, msg kafka.Message) error {
	deadline := time.Now().Add(p.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not sent: %w", err)
	}
	// A full lane (Kafka slow or down) is waited for no longer than the
	// publish may take.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	w := publishing{msg: msg, deadline: deadline, done: make(chan error, 1)}
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return fmt.Errorf("not sent: %w", io.ErrClosedPipe)
	}
	select {
	case p.lane <- w:
	case <-ctx.Done():
		p.mu.RUnlock()
		return fmt.Errorf("not sent: %w", ctx.Err())
	}
	p.mu.RUnlock()
	return <-w.done
}

// Close sends what the lane holds, then closes the connections. A Publish
// after Close fails without sending.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.lane)
	}
	p.mu.Unlock()
	p.sent.Wait()
	p.prod.tr.CloseIdleConnections()
	return nil
}
