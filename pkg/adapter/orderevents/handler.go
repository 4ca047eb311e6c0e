package orderevents

import (
	"context"
	"encoding/json"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/consume"
)

// EventHandler decides events of type E; it knows nothing of Kafka. Its
// answers are consume.Results.
type EventHandler[E any] interface {
	// Handle returns one Result per event, in order. Events of one call
	// may come from several partitions, each partition's in offset order.
	Handle(ctx context.Context, events []E) []consume.Result
	// DeadLettered is told of each poison message once the dead-letter
	// topic holds it, with whatever its value decodes to (possibly a zero
	// event). An error retries the call, never the dead letter.
	DeadLettered(ctx context.Context, e E) error
}

// Handler decides create-order events.
type Handler = EventHandler[order.Event]

// Codec reads a topic's events of type E from their messages.
type Codec[E any] struct {
	// Decode parses and validates the event of m (its headers' trace
	// context included); an error makes m poison.
	Decode func(m kafka.Message) (E, error)
	// Loose is whatever of an event b holds, for the handler's
	// DeadLettered (possibly a zero event).
	Loose func(b []byte) E
}

// orderCodec reads create-order events.
var orderCodec = Codec[order.Event]{
	Decode: func(m kafka.Message) (order.Event, error) {
		e, err := Decode(m.Value)
		return withTrace(e, m), err
	},
	Loose: func(b []byte) order.Event {
		var e order.Event
		_ = json.Unmarshal(b, &e)
		return e
	},
}
