package orderevents

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// OutboxWriter publishes the shop's events (package outbox) to their
// topic, keyed by order number, each write acknowledged by every in-sync
// replica. One order's events go to one partition, in the order given.
type OutboxWriter struct {
	w *kafka.Writer
}

// relayBatch is the relay's default batch (relay.Relay.Batch).
const relayBatch = 500

// NewOutboxWriter writes to cfg's brokers, on topic (outbox.Topic when "").
func NewOutboxWriter(cfg Config, topic string) *OutboxWriter {
	if topic == "" {
		topic = outbox.Topic
	}
	timeout := cfg.WriteTimeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	// BatchSize is a relay's batch: kafka-go allocates (and clears) room
	// for BatchSize messages for each partition's batch of every write, so
	// a larger one costs CPU for nothing (10,000 was a sixth of a
	// consumer's CPU in the events bench); a larger write is split.
	return &OutboxWriter{w: &kafka.Writer{
		Addr: kafka.TCP(cfg.Brokers...), Topic: topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, MaxAttempts: 1, BatchTimeout: time.Millisecond, BatchSize: relayBatch,
		WriteTimeout: timeout, ReadTimeout: timeout,
		Transport: &kafka.Transport{MetadataTTL: time.Second, DialTimeout: timeout},
	}}
}

// Publish writes evs and returns once Kafka holds all of them. An error
// wraps order.ErrUnavailable: some may have been written (they are written
// again, with the same ids, by the next try).
func (p *OutboxWriter) Publish(ctx context.Context, evs []outbox.Event) error {
	msgs := make([]kafka.Message, len(evs))
	for i, e := range evs {
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		msgs[i] = kafka.Message{Key: []byte(e.Stream()), Value: v,
			Headers: []kafka.Header{{Key: "id", Value: []byte(e.ID)}, {Key: "type", Value: []byte(e.Type)}}}
	}
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("publish %d events: %w: %w", len(evs), order.ErrUnavailable, err)
	}
	return nil
}

// Close closes the writer.
func (p *OutboxWriter) Close() error { return p.w.Close() }

// EnsureOutboxTopic creates topic (outbox.Topic when "") as EnsureTopics
// creates the orders' topic: cfg's partitions, replicas and settings.
func EnsureOutboxTopic(ctx context.Context, cfg Config, topic string) error {
	if topic == "" {
		topic = outbox.Topic
	}
	c := cfg
	c.Topic = topic
	return ensure(ctx, c, kafka.TopicConfig{Topic: topic})
}
