package orderevents

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

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
// and returns once Kafka acknowledged it. It is keyed by the sale, as the
// orders are: a burst of one sale's entries goes in one partition's
// batches, a few large ones a write, and one consumer writes them in large
// units. Keyed by the buyer, every write carried a small batch for each
// of the topic's partitions, and the broker, the api and the consumer paid
// for each (bench/JOURNAL.md, "Draw entries keyed by the sale"). An error
// wraps order.ErrUnavailable; the event may or may not have been written.
func (p *Publisher) PublishEntry(ctx context.Context, e draw.EntryEvent) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := p.send(ctx, kafka.Message{Key: strconv.AppendInt(nil, e.ActivityID, 10), Value: b}); err != nil {
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
