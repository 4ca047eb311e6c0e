// Package consume is the contract between a consume loop and its handler:
// what the loop does with one event once the handler answered. The loop
// (the Kafka router of pkg/adapter/orderevents) owns fetching, retrying,
// dead-lettering and committing; the handler (the consumer's fulfilment)
// decides each event and answers a Result, knowing nothing of the broker.
package consume

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
