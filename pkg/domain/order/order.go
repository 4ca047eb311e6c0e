// Package order is the flash-sale domain: order numbers, statuses and their
// legal transitions, the create-order event, the domain errors every
// adapter translates its own failures into, and the rules of a sale (its
// validation, the lifetimes of its keys, the layout of its stock). Callers
// ask it; the adapters carry out what it decided. It imports no adapter:
// only the standard library (ulid.go writes the ULIDs that begin every
// order number).
package order

import "time"

// Failure reasons recorded on FAILED orders and released reservations.
const (
	ReasonOutOfStock       = "OUT_OF_STOCK"
	ReasonAlreadyPurchased = "ALREADY_PURCHASED"
	ReasonPublishFailed    = "PUBLISH_FAILED"
	ReasonInvalidEvent     = "INVALID_EVENT"
	ReasonCancelled        = "CANCELLED"
	ReasonPaymentTimeout   = "PAYMENT_TIMEOUT"
	ReasonSaleCancelled    = "SALE_CANCELLED"
	// ReasonSaleEnded, ReasonSaleNotStarted, ReasonOverLimit: MySQL's copy
	// of the sale refused an order an instance reserved on an older copy
	// (see Activity.Refusal).
	ReasonSaleEnded      = "SALE_ENDED"
	ReasonSaleNotStarted = "SALE_NOT_STARTED"
	ReasonOverLimit      = "OVER_LIMIT"
	// ReasonReserveFailed: Redis may have run the reserve script but its
	// answer was lost, so the API answered 503 and gave the reservation up.
	ReasonReserveFailed = "RESERVE_FAILED"
	// ReasonDuplicateRequest: the key already made an order in this sale
	// (CREATED, PAID or CLOSED); a retry whose idempotency record Redis
	// lost reserved a new order number, and MySQL refuses it.
	ReasonDuplicateRequest = "DUPLICATE_REQUEST"
	// ReasonCodeUsed, ReasonCodeInvalid: MySQL, the last word on a presale
	// code, had no use of the order's code left (every use held by live
	// orders), or no such code for this buyer (revoked, never loaded,
	// bound to another buyer), although Redis had reserved one.
	ReasonCodeUsed    = "CODE_USED"
	ReasonCodeInvalid = "CODE_INVALID"
)

// KeepsCode reports whether the release of an order that failed for reason
// leaves its presale code's use taken in Redis: MySQL refused the order
// because the code has no use left there, so giving Redis one back would
// let another order reserve a use MySQL does not have.
func KeepsCode(reason string) bool {
	return reason == ReasonCodeUsed || reason == ReasonCodeInvalid
}

// AnsweredUnavailable reports whether an order that failed for reason was
// refused to the buyer with 503 UNAVAILABLE: its idempotency key must be
// free again when its reservation is released, so a retry can try anew.
func AnsweredUnavailable(reason string) bool {
	return reason == ReasonPublishFailed || reason == ReasonReserveFailed
}

// ValidIdempotencyKey reports whether k is 1-64 characters of A-Z a-z 0-9
// _ - (^[A-Za-z0-9_-]{1,64}$; the fuzz test holds the two to the same
// answers).
func ValidIdempotencyKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := range len(k) {
		switch c := k[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Order is one buyer's order as stored in MySQL.
type Order struct {
	OrderNo        string
	UserID         string
	ItemID         int64
	ActivityID     int64
	Quantity       int
	Status         Status
	FailureReason  string
	IdempotencyKey string
	// UnitPrice and Amount (UnitPrice times Quantity) are what the order
	// cost when it was written; zero for orders without a price.
	UnitPrice Money
	Amount    Money
	CreatedAt time.Time
	UpdatedAt time.Time
}

// KeyMargin is how long an item's keys outlive what they serve: quota and
// idempotency records live this long past the sale's end, reservations and
// stock this long past the payment window after it.
const KeyMargin = 24 * time.Hour
