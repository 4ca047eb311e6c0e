package fulfil

import "github.com/seckill/seckill/pkg/foundation/consume"

// Outcome is what the handler made of one event, in the shop's words. The
// router knows only whether an event is done, to retry or poison: result
// maps each Outcome to one of those, and carries its name as the label the
// router counts (seckill_consumer_events_total{outcome}) and the orders'
// spans show (seckill.outcome).
type Outcome string

// The outcomes.
const (
	// Created: a new order.
	Created Outcome = "created"
	// Failed: MySQL refused the order (out of stock, already purchased).
	Failed Outcome = "failed"
	// Existing: MySQL had the order already (a redelivery).
	Existing Outcome = "existing"
	// Skipped: the API had released the reservation; no order.
	Skipped Outcome = "skipped"
	// Poison: the event can never be an order; the router dead-letters it.
	Poison Outcome = "poison"
	// Retry: not final; the router hands the event over again.
	Retry Outcome = "retry"
)

// result is the router's answer for an event whose outcome is o; err says
// why (a poison's reason, a retry's cause).
func result(o Outcome, err error) consume.Result {
	r := consume.Result{Outcome: consume.Done, Label: string(o), Err: err}
	switch o {
	case Retry:
		r.Outcome = consume.Retry
	case Poison:
		r.Outcome = consume.Poison
	}
	return r
}

// outcomeOf is the Outcome a router result stands for; a result left unset
// (the router's zero value) is Retry.
func outcomeOf(r consume.Result) Outcome {
	if r.Label == "" {
		return Retry
	}
	return Outcome(r.Label)
}
