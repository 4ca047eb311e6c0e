package orderevents

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
)

// EntriesTopic is the draw entries' topic beside the orders' topic.
func EntriesTopic(ordersTopic string) string { return ordersTopic + ".entries" }

// EnsureEntriesTopic creates the entries' topic and its dead-letter topic
// if they do not exist yet, as EnsureTopics does the orders'.
func EnsureEntriesTopic(ctx context.Context, cfg Config) error {
	t := EntriesTopic(cfg.Topic)
	return ensure(ctx, cfg, kafka.TopicConfig{Topic: t}, kafka.TopicConfig{Topic: DLQTopic(t), NumPartitions: 1})
}

// NewEntryPublisher is a publisher to cfg.Topic's entries' topic.
func NewEntryPublisher(cfg Config) *Publisher {
	cfg.Topic = EntriesTopic(cfg.Topic)
	return NewPublisher(cfg)
}

// PublishEntry sends e to the entries' topic (p is a NewEntryPublisher)
// and returns once Kafka acknowledged it. It is keyed by the buyer, so a
// sale's entries spread over the partitions and the consumers. An error
// wraps order.ErrUnavailable; the event may or may not have been written.
func (p *Publisher) PublishEntry(ctx context.Context, e draw.EntryEvent) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := p.send(ctx, kafka.Message{Key: []byte(e.UserID), Value: b}); err != nil {
		return fmt.Errorf("publish entry %s: %w: %w", e.EntryID, order.ErrUnavailable, err)
	}
	return nil
}

// EntryCodec reads the entries' topic.
var EntryCodec = Codec[draw.EntryEvent]{
	Decode: func(m kafka.Message) (draw.EntryEvent, error) {
		var e draw.EntryEvent
		if err := json.Unmarshal(m.Value, &e); err != nil {
			return e, fmt.Errorf("decode entry event: %w", err)
		}
		if err := e.Validate(); err != nil {
			return e, fmt.Errorf("invalid entry event: %w", err)
		}
		return e, nil
	},
	Loose: func(b []byte) draw.EntryEvent {
		var e draw.EntryEvent
		_ = json.Unmarshal(b, &e)
		return e
	},
}
