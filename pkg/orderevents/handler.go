package orderevents

import (
	"context"

	"github.com/seckill/seckill/pkg/order"
)

// Outcome is what a handler made of one event.
type Outcome int

// The outcomes. Every one but Retry is final: the router may commit the
// event's offset once the other events before it are final too.
const (
	// Retry: not final; the router hands the event to the handler again,
	// with backoff. The zero value, so a result the handler left unset
	// retries.
	Retry Outcome = iota
	// Created: a new order.
	Created
	// Failed: MySQL refused the order (out of stock, already purchased).
	Failed
	// Existing: MySQL had the order already (a redelivery).
	Existing
	// Skipped: the API had released the reservation; no order.
	Skipped
	// Poison: the event can never be an order; the router dead-letters it.
	Poison
)

// Result is a handler's answer for one event.
type Result struct {
	Outcome Outcome
	// Err says why: a Poison's reason (written to the dead letter), a
	// Retry's cause (logged).
	Err error
}

// Handler decides events; it knows nothing of Kafka.
type Handler interface {
	// Handle returns one Result per event, in order. Events of one call
	// come from one partition, in offset order.
	Handle(ctx context.Context, events []order.Event) []Result
	// DeadLettered is told of each poison message once the dead-letter
	// topic holds it, with whatever its value decodes to (possibly a zero
	// Event). An error retries the call, never the dead letter.
	DeadLettered(ctx context.Context, e order.Event) error
}
