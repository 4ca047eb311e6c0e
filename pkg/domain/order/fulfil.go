package order

import "time"

// FulfilOutcome is what fulfilment did with one order.
type FulfilOutcome struct {
	Status Status
	Reason string
	// Existing is true when MySQL already had the order (a redelivery).
	Existing bool
	// Holder is the buyer's live order in the sale that made this one
	// FAILED (Reason ALREADY_PURCHASED or DUPLICATE_REQUEST), "" for any
	// other outcome: the quota key the refused order took in Redis (only
	// a lost quota lets a second order through) belongs to it.
	Holder string
}

// CollidesWithLive reports whether reason is a refusal for a live order
// of the buyer's own in the sale: MySQL's uk_orders_live, or the key's
// first order (uk_orders_key).
func CollidesWithLive(reason string) bool {
	return reason == ReasonAlreadyPurchased || reason == ReasonDuplicateRequest
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
