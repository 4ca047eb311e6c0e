package orderevents

import (
	"context"

	"github.com/seckill/seckill/pkg/domain/order"
)

// Outcome is what the router does with one event once the handler
// answered: the router knows nothing of what the event means.
type Outcome int

// The outcomes. Done and Poison are final: the router may commit the
// event's offset once the other events before it are final too.
const (
	// Retry: not final; the router hands the event to the handler again,
	// with backoff. The zero value, so a result the handler left unset
	// retries.
	Retry Outcome = iota
	// Done: the handler is finished with the event.
	Done
	// Poison: the event can never be handled; the router dead-letters it.
	Poison
)

// Result is a handler's answer for one event.
type Result struct {
	Outcome Outcome
	// Label is the handler's own name for what it made of the event (the
	// order handler says created, failed, existing or skipped); the router
	// counts Done events by it, in its metrics and its batch log line.
	// Empty counts as "done".
	Label string
	// Err says why: a Poison's reason (written to the dead letter), a
	// Retry's cause (logged).
	Err error
}

// Handler decides events; it knows nothing of Kafka.
type Handler interface {
	// Handle returns one Result per event, in order. Events of one call
	// may come from several partitions, each partition's in offset order.
	Handle(ctx context.Context, events []order.Event) []Result
	// DeadLettered is told of each poison message once the dead-letter
	// topic holds it, with whatever its value decodes to (possibly a zero
	// Event). An error retries the call, never the dead letter.
	DeadLettered(ctx context.Context, e order.Event) error
}
