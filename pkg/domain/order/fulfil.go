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

// Order is the order r becomes when MySQL writes it as out says.
func (r FulfilRequest) Order(out FulfilOutcome) Order {
	e := r.Event
	return Order{OrderNo: e.OrderNo, UserID: e.UserID, ItemID: e.ItemID, ActivityID: e.ActivityID,
		Quantity: e.Quantity, Status: out.Status, FailureReason: out.Reason, IdempotencyKey: e.IdempotencyKey,
		UnitPrice: r.UnitPrice, Amount: r.UnitPrice.Times(e.Quantity)}
}
