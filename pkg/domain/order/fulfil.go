package order

import "time"

// FulfilOutcome is what fulfilment did with one order.
type FulfilOutcome struct {
	Status Status
	Reason string
	// Existing is true when MySQL already had the order (a redelivery).
	Existing bool
}

// FulfilRequest is one order to fulfil: an accepted reservation on its
// way into MySQL.
type FulfilRequest struct {
	Event       Event
	PayDeadline time.Time
	// UnitPrice is the sale's price of one unit (zero: no price); the row
	// records it with amount = UnitPrice × quantity.
	UnitPrice Money
}
