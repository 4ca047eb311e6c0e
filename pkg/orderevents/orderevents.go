// Package orderevents carries create-order events over Kafka with
// segmentio/kafka-go: a publisher that answers only after every in-sync
// replica acknowledged, topic set-up, and the consumer's Router, which owns
// the consume loop (fetch, per-partition batches, retry, dead letters,
// commit after the handler, drain). It is the only package that imports
// kafka-go (test helpers aside).
package orderevents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/pkg/batch"
	"github.com/seckill/seckill/pkg/order"
	"github.com/seckill/seckill/pkg/tick"
	"github.com/seckill/seckill/pkg/tracing"
)

// Config says where Kafka is and which topic carries orders.
type Config struct {
	Brokers    []string
	Topic      string
	Partitions int // when creating the topic (default 12)
	// ReplicationFactor of the topics it creates (default 1: one broker).
	// EnsureTopics refuses topics that exist with fewer replicas.
	ReplicationFactor int
	// MinInsyncReplicas is the topics' min.insync.replicas: how many
	// replicas must hold an event before the publish is acknowledged (with
	// fewer in sync, publishes are refused); 0 leaves the broker's default.
	MinInsyncReplicas int
	// WriteTimeout bounds one publish; past it the outcome is unknown.
	WriteTimeout time.Duration
	// Tracer makes a span of each publish and puts its W3C trace context
	// in the message headers; nil: no span, no headers.
	Tracer *tracing.Tracer
}

// DLQTopic is the dead-letter topic of topic.
func DLQTopic(topic string) string { return topic + ".dlq" }

// EnsureTopics creates the orders topic and its dead-letter topic if they do
// not exist yet, with cfg's replication factor, min.insync.replicas and
// unclean leader election off (an out-of-sync replica never becomes leader:
// that would drop acknowledged events). A topic that exists with fewer
// replicas than cfg asks for is an error.
func EnsureTopics(ctx context.Context, cfg Config) error {
	parts := cfg.Partitions
	if parts <= 0 {
		parts = 12
	}
	rf := max(cfg.ReplicationFactor, 1)
	entries := []kafka.ConfigEntry{{ConfigName: "unclean.leader.election.enable", ConfigValue: "false"}}
	if cfg.MinInsyncReplicas > 0 {
		entries = append(entries, kafka.ConfigEntry{ConfigName: "min.insync.replicas", ConfigValue: strconv.Itoa(cfg.MinInsyncReplicas)})
	}
	err := CreateTopics(ctx, cfg.Brokers,
		kafka.TopicConfig{Topic: cfg.Topic, NumPartitions: parts, ReplicationFactor: rf, ConfigEntries: entries},
		kafka.TopicConfig{Topic: DLQTopic(cfg.Topic), NumPartitions: 1, ReplicationFactor: rf, ConfigEntries: entries})
	if err != nil {
		if errors.Is(err, kafka.InvalidReplicationFactor) {
			return fmt.Errorf("%w (replication factor %d: the cluster needs that many live brokers)", err, rf)
		}
		return err
	}
	return checkReplicas(ctx, cfg.Brokers, rf, cfg.Topic, DLQTopic(cfg.Topic))
}

// checkReplicas fails when a partition of topics has fewer than rf replicas
// (the topic existed before, made with a smaller replication factor). A
// broker may not know a topic created a moment ago yet: that is asked again
// for up to 10 s.
func checkReplicas(ctx context.Context, brokers []string, rf int, topics ...string) error {
	tr := &kafka.Transport{DialTimeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 10 * time.Second}
	for deadline := time.Now().Add(10 * time.Second); ; {
		meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
		if err != nil {
			return fmt.Errorf("kafka metadata: %w: %w", order.ErrUnavailable, err)
		}
		var unknown error
		for _, t := range meta.Topics {
			if t.Error != nil {
				unknown = fmt.Errorf("kafka metadata of %s: %w: %w", t.Name, order.ErrUnavailable, t.Error)
				continue
			}
			for _, p := range t.Partitions {
				if len(p.Replicas) < rf {
					return fmt.Errorf("kafka topic %s exists with %d replicas, want %d (SECKILL_KAFKA_REPLICATION_FACTOR): "+
						"raise it with kafka-reassign-partitions, or use a new topic", t.Name, len(p.Replicas), rf)
				}
			}
		}
		if unknown == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return unknown
		}
		select {
		case <-ctx.Done():
			return unknown
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// CreateTopics creates topics through the cluster's controller; topics that
// exist already are fine.
func CreateTopics(ctx context.Context, brokers []string, topics ...kafka.TopicConfig) error {
	if len(brokers) == 0 {
		return errors.New("kafka: no brokers configured")
	}
	d := &kafka.Dialer{Timeout: 5 * time.Second}
	conn, err := dialAny(ctx, d, brokers)
	if err != nil {
		return fmt.Errorf("kafka dial: %w: %w", order.ErrUnavailable, err)
	}
	defer conn.Close()
	ctl, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("kafka controller: %w: %w", order.ErrUnavailable, err)
	}
	cc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ctl.Host, strconv.Itoa(ctl.Port)))
	if err != nil {
		return fmt.Errorf("kafka dial controller: %w: %w", order.ErrUnavailable, err)
	}
	defer cc.Close()
	if err := cc.CreateTopics(topics...); err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("kafka create topics: %w", err)
	}
	return nil
}

// Ping checks that a broker answers a metadata request (the first of
// brokers that can be reached: one broker of a cluster down is not Kafka
// down).
func Ping(ctx context.Context, brokers []string) error {
	if len(brokers) == 0 {
		return errors.New("kafka: no brokers configured")
	}
	d := &kafka.Dialer{Timeout: 2 * time.Second}
	conn, err := dialAny(ctx, d, brokers)
	if err != nil {
		return fmt.Errorf("kafka: %w: %w", order.ErrUnavailable, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Brokers(); err != nil {
		return fmt.Errorf("kafka: %w: %w", order.ErrUnavailable, err)
	}
	return nil
}

// dialAny connects to the first of brokers that accepts, in order.
func dialAny(ctx context.Context, d *kafka.Dialer, brokers []string) (*kafka.Conn, error) {
	var errs []error
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// Publisher writes create-order events, keyed by item id so one item's
// orders stay in one partition, in order.
//
// Concurrent publishes are sent together. kafka-go writes one batch at a
// time to a partition, and on its own it closes a batch after BatchTimeout
// whatever the partition is doing: a burst for one item (every order of a
// flash sale goes to its item's partition) became a queue of small batches,
// each waiting for the acknowledgement of the one before, and a first sale's
// 200th buyer waited for about 20 round trips. Here each item's events go
// through one of a few lanes: a lane's sender takes every event waiting and
// writes them in one call, so the events that arrive while a write is in
// flight form the next one. A lone event is not delayed, and under load the
// batches grow with the round trip instead of the queue.
type Publisher struct {
	w       *kafka.Writer
	timeout time.Duration
	tracer  *tracing.Tracer

	mu     sync.RWMutex // held to queue an event; Close takes it to close the lanes
	closed bool
	lanes  []chan publishing
	sent   sync.WaitGroup
}

// publishing is one event waiting in a lane.
type publishing struct {
	msg      kafka.Message
	deadline time.Time
	done     chan error
}

const (
	// publishLanes is how many writes may be in flight at once for
	// different items; an item always uses the same lane.
	publishLanes = 4
	// publishBatch bounds the events of one write (kafka-go's BatchSize).
	publishBatch = 1000
	// kafkaLinger is how long kafka-go keeps a batch open for another
	// call after a lane's write: the lane did the batching already.
	kafkaLinger = 100 * time.Microsecond
	// writeSpacing is the least time from the start of a lane's write to
	// the start of its next: under a steady load whose round trip is
	// shorter, the events of 2 ms go in one produce request (as kafka-go's
	// own 2 ms batches did) instead of many small ones that cost the broker
	// CPU. The first event after a quiet moment goes at once.
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
		w: &kafka.Writer{
			Addr:         kafka.TCP(cfg.Brokers...),
			Topic:        cfg.Topic,
			Balancer:     &kafka.Hash{},
			RequiredAcks: kafka.RequireAll,
			BatchSize:    publishBatch,
			BatchBytes:   4 << 20,
			BatchTimeout: kafkaLinger,
			WriteTimeout: timeout,
			ReadTimeout:  timeout,
			// kafka-go resends a produce after a temporary broker error
			// or a broken connection (a leader change, a broker restart).
			// Unlike a Redis script, a produce is safe to send again: a
			// second copy of an event is a duplicate the consumer already
			// takes (orders are created once per order number, and a FAILED
			// row is final). The caller still waits no longer than its
			// deadline, and a copy that lands after it gave up meets the
			// FAILED row the API recorded. 3, because 0 means kafka-go's 10.
			MaxAttempts: 3,
			// Its own transport, refreshing metadata every second: the
			// shared default caches it for 6 s, so a topic created just
			// before the first publish would be unknown for that long.
			Transport: &kafka.Transport{MetadataTTL: time.Second, DialTimeout: timeout},
		},
		lanes: make([]chan publishing, publishLanes),
	}
	for i := range p.lanes {
		p.lanes[i] = make(chan publishing, publishBatch)
		p.sent.Go(func() { batch.Drain(p.lanes[i], publishBatch, p.write) })
	}
	return p
}

// write sends a lane's waiting events in one call and answers each. The
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
	err := p.w.WriteMessages(ctx, msgs...)
	cancel()
	var each kafka.WriteErrors
	perEvent := errors.As(err, &each) && len(each) == len(live)
	for i, w := range live {
		if perEvent {
			w.done <- each[i]
		} else {
			w.done <- err
		}
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
	c := &kafka.Client{Addr: p.w.Addr, Transport: p.w.Transport}
	var offsets []kafka.OffsetRequest
	for offsets == nil {
		meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{p.w.Topic}})
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
				return fmt.Errorf("warm the publisher: topic %s not known yet: %w: %w", p.w.Topic, order.ErrUnavailable, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	// ListOffsets goes to each partition's leader through the same pool a
	// produce uses.
	if _, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{p.w.Topic: offsets}}); err != nil {
		return fmt.Errorf("warm the publisher: %w: %w", order.ErrUnavailable, err)
	}
	return nil
}

// KeepWarm warms the publisher every interval until ctx ends, so that an
// api idle before a sale keeps its connections (the transport closes
// idle ones after 30 s, the broker after ten minutes).
func (p *Publisher) KeepWarm(ctx context.Context, interval time.Duration, log *slog.Logger) {
	tick.Every(ctx, interval, func(ctx context.Context) {
		if err := p.Warm(ctx); err != nil && ctx.Err() == nil {
			log.Debug("publisher not warmed", "err", err)
		}
	})
}

// Publish sends e and returns once Kafka acknowledged it. An error wraps
// order.ErrUnavailable; the event may or may not have been written.
func (p *Publisher) Publish(ctx context.Context, e order.Event) (err error) {
	// The event's own encoder, called directly: through json.Marshal its
	// output would be checked and compacted a second time (2.0 -> 0.85 µs).
	b, err := e.MarshalJSON()
	if err != nil {
		return err
	}
	msg := kafka.Message{Key: ItemKey(e.ItemID), Value: b}
	if p.tracer.On() {
		var span trace.Span
		ctx, span = p.tracer.Start(ctx, "publish "+p.w.Topic, trace.WithSpanKind(trace.SpanKindProducer))
		if span.IsRecording() {
			span.SetAttributes(attribute.String("messaging.system", "kafka"),
				attribute.String("messaging.destination.name", p.w.Topic),
				attribute.String("messaging.operation.type", "send"),
				tracing.AttrOrderNo.String(e.OrderNo), tracing.AttrItemID.Int64(e.ItemID),
				tracing.AttrActivityID.Int64(e.ActivityID))
		}
		defer func() { tracing.Fail(span, err); span.End() }()
		msg.Headers = traceHeaders(ctx)
	}
	if err := p.send(ctx, msg, e.ItemID); err != nil {
		return fmt.Errorf("publish order %s: %w: %w", e.OrderNo, order.ErrUnavailable, err)
	}
	return nil
}

// send queues msg in its item's lane and waits for the answer: at most
// p.timeout in all, or until ctx ends while it is still queued. Once its
// lane's sender has it, the answer is awaited even if ctx ends, so that
// whatever happened to the event is what the caller hears.
func (p *Publisher) send(ctx context.Context, msg kafka.Message, itemID int64) error {
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
	lane := p.lanes[uint64(itemID)%publishLanes]
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return fmt.Errorf("not sent: %w", io.ErrClosedPipe)
	}
	select {
	case lane <- w:
	case <-ctx.Done():
		p.mu.RUnlock()
		return fmt.Errorf("not sent: %w", ctx.Err())
	}
	p.mu.RUnlock()
	return <-w.done
}

// traceHeaders are the W3C trace context headers of ctx's span (none when
// ctx holds no span).
func traceHeaders(ctx context.Context) []kafka.Header {
	parent, state := tracing.Header(ctx)
	if parent == "" {
		return nil
	}
	h := []kafka.Header{{Key: "traceparent", Value: []byte(parent)}}
	if state != "" {
		h = append(h, kafka.Header{Key: "tracestate", Value: []byte(state)})
	}
	return h
}

// withTrace copies the W3C trace context of m's headers into e.
func withTrace(e order.Event, m kafka.Message) order.Event {
	for _, h := range m.Headers {
		switch h.Key {
		case "traceparent":
			e.TraceParent = string(h.Value)
		case "tracestate":
			e.TraceState = string(h.Value)
		}
	}
	return e
}

// Close sends what the lanes hold, then flushes and closes the writer. A
// Publish after Close fails without sending.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		for _, l := range p.lanes {
			close(l)
		}
	}
	p.mu.Unlock()
	p.sent.Wait()
	return p.w.Close()
}

// ItemKey is the message key of an item's events.
func ItemKey(itemID int64) []byte { return strconv.AppendInt(nil, itemID, 10) }

// Decode parses and validates an event.
func Decode(b []byte) (order.Event, error) {
	// The event's own decoder, called directly: it decodes (and so checks)
	// the whole message itself, which json.Unmarshal would scan once more
	// before handing it over.
	var e order.Event
	if err := e.UnmarshalJSON(b); err != nil {
		return e, fmt.Errorf("decode event: %w", err)
	}
	if err := e.Validate(); err != nil {
		return e, fmt.Errorf("invalid event: %w", err)
	}
	return e, nil
}

// fetchWait is how long the broker holds a fetch that finds no message.
// The reader asks MinBytes 1, so a fetch returns as soon as one message is
// there: the wait bounds only empty fetches, and an idle consumer sends one
// per partition per fetchWait (12 partitions at 50 ms were 240 fetches a
// second, most of Kafka's CPU while nobody bought; at 500 ms an idle
// consumer still added 1.6-3.9 % of a CPU to the broker, at 2 s 0.9-2 %).
// A close or a rebalance waits for the fetch under way, so it may take up
// to this long.
const fetchWait = 2 * time.Second

// commitEvery is how often the reader sends the offsets the router marked
// final. The router calls CommitMessages only once a batch's work is final
// (so only final offsets are ever sent), and the reader sends the newest of
// each partition every commitEvery, and once more when its generation ends
// (a rebalance or a close). One commit per batch was one OffsetCommit
// request for every few milliseconds of orders, about half of the broker's
// CPU under sustained load. What a crash loses is at most commitEvery of
// commits: those events are delivered again, and the handler is idempotent
// (the reservation's state machine and the unique order number).
const commitEvery = 200 * time.Millisecond

// newReader returns a consumer-group reader that never commits by itself:
// the router uses FetchMessage, and CommitMessages once the work is final.
// Failed commits (kafka-go retries each three times and keeps the offsets
// for the next tick) are logged and counted through failed.
func newReader(cfg RouterConfig, log *slog.Logger, failed func()) *kafka.Reader {
	start := kafka.FirstOffset
	if cfg.StartLast {
		start = kafka.LastOffset
	}
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:        cfg.Brokers,
		Topic:          cfg.Topic,
		GroupID:        cfg.GroupID,
		MinBytes:       1,
		MaxBytes:       8 << 20,
		MaxWait:        fetchWait,
		ReadBackoffMin: 10 * time.Millisecond,
		ReadBackoffMax: 200 * time.Millisecond,
		CommitInterval: commitEvery,
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			// Only commit failures: the router reports fetch errors itself.
			if text := fmt.Sprintf(msg, args...); strings.Contains(text, "commit") {
				failed()
				log.Warn("offset commit failed; the reader tries again at the next tick", "err", text)
			}
		}),
		StartOffset:           start,
		HeartbeatInterval:     1 * time.Second,
		SessionTimeout:        6 * time.Second,
		RebalanceTimeout:      10 * time.Second,
		JoinGroupBackoff:      500 * time.Millisecond,
		QueueCapacity:         4000,
		WatchPartitionChanges: true,
	})
}

// DeadLetter is what the dead-letter topic holds for a poison message.
type DeadLetter struct {
	Reason    string    `json:"reason"`
	Topic     string    `json:"topic"`
	Partition int       `json:"partition"`
	Offset    int64     `json:"offset"`
	Original  []byte    `json:"original"`
	At        time.Time `json:"at"`
}

// newDLQWriter returns a writer for topic's dead-letter topic.
func newDLQWriter(brokers []string, topic string) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        DLQTopic(topic),
		Balancer:     &kafka.LeastBytes{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 2 * time.Millisecond,
	}
}

// DeleteTopics deletes topics through the cluster's controller.
func DeleteTopics(ctx context.Context, brokers []string, topics ...string) error {
	if len(brokers) == 0 {
		return errors.New("kafka: no brokers configured")
	}
	d := &kafka.Dialer{Timeout: 5 * time.Second}
	conn, err := dialAny(ctx, d, brokers)
	if err != nil {
		return err
	}
	defer conn.Close()
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		_ = conn.SetDeadline(dl)
	}
	ctl, err := conn.Controller()
	if err != nil {
		return err
	}
	cc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ctl.Host, strconv.Itoa(ctl.Port)))
	if err != nil {
		return err
	}
	defer cc.Close()
	if hasDeadline {
		_ = cc.SetDeadline(dl)
	}
	return cc.DeleteTopics(topics...)
}

// DeleteGroup deletes a consumer group; a group that does not exist is fine.
func DeleteGroup(ctx context.Context, brokers []string, group string) error {
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	res, err := c.DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: []string{group}})
	if err == nil {
		err = res.Errors[group]
	}
	if err != nil && !errors.Is(err, kafka.GroupIdNotFound) {
		return fmt.Errorf("delete consumer group %s: %w", group, err)
	}
	return nil
}
