package orderevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/domain/order"
)

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

// deadLetterAll writes every message in state poison to the dead-letter
// topic, once, and tells the handler of every dead-lettered one; it
// returns the first error.
func (r *EventRouter[E]) deadLetterAll(ctx context.Context, batch []kafka.Message, state []msgState, reasons []error) error {
	var first error
	for i, m := range batch {
		if state[i] == poison {
			if err := r.deadLetter(ctx, m, reasons[i]); err != nil {
				first = firstErr(first, err)
				continue
			}
			state[i] = deadLettered
		}
		if state[i] == deadLettered {
			// Whatever of the event is there (the router's Decode refused
			// it, or the handler did).
			if err := r.handler.DeadLettered(ctx, r.codec.Loose(m.Value)); err != nil {
				first = firstErr(first, err)
				continue
			}
			state[i] = final
		}
	}
	return first
}

func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// deadLetter publishes a poison message to the dead-letter topic with the
// reason.
func (r *EventRouter[E]) deadLetter(ctx context.Context, m kafka.Message, cause error) error {
	if cause == nil {
		cause = errors.New("poison")
	}
	dl := DeadLetter{Reason: cause.Error(), Topic: m.Topic, Partition: m.Partition,
		Offset: m.Offset, Original: m.Value, At: time.Now().UTC()}
	b, _ := json.Marshal(dl)
	if err := r.dlq.WriteMessages(ctx, kafka.Message{Key: m.Key, Value: b}); err != nil {
		return fmt.Errorf("dead-letter: %w: %w", order.ErrUnavailable, err)
	}
	r.metrics.DeadLettered()
	r.log.Error("poison message dead-lettered", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "reason", cause.Error())
	return nil
}
