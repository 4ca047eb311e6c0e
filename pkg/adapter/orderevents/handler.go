package orderevents

import (
	"context"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/consume"
)

// Handler decides events; it knows nothing of Kafka. Its answers are
// consume.Results.
type Handler interface {
	// Handle returns one Result per event, in order. Events of one call
	// may come from several partitions, each partition's in offset order.
	Handle(ctx context.Context, events []order.Event) []consume.Result
	// DeadLettered is told of each poison message once the dead-letter
	// topic holds it, with whatever its value decodes to (possibly a zero
	// Event). An error retries the call, never the dead letter.
	DeadLettered(ctx context.Context, e order.Event) error
}
