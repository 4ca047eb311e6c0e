// Package order is the flash-sale domain: order numbers, statuses and their
// legal transitions, the create-order event, and the domain errors every
// adapter translates its own failures into. It imports no adapter: only the
// standard library and oklog/ulid, whose ULIDs are the first part of every
// order number.
package order

import (
	"errors"
	"fmt"
	"time"
)

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
)

// AnsweredUnavailable reports whether an order that failed for reason was
// refused to the buyer with 503 UNAVAILABLE: its idempotency key must be
// free again when its reservation is released, so a retry can try anew.
func AnsweredUnavailable(reason string) bool {
	return reason == ReasonPublishFailed || reason == ReasonReserveFailed
}

// Domain errors. Adapters translate their own errors (redis.Nil, MySQL 1062,
// Kafka errors) into these; transports map them to their protocol in one
// place.
var (
	ErrNotFound          = errors.New("not found")
	ErrNotWarmed         = errors.New("item stock is not loaded")
	ErrSoldOut           = errors.New("sold out")
	ErrAlreadyPurchased  = errors.New("user already holds a live order in this activity")
	ErrActivityNotActive = errors.New("activity is not active")
	// ErrActivityStarted: the change is allowed only before the sale starts.
	ErrActivityStarted = errors.New("activity has started")
	// ErrStockLimit: a valid quantity that would take an item's stock past
	// the most it may hold, given the stock it holds now.
	ErrStockLimit      = errors.New("item stock limit")
	ErrInvalidArgument = errors.New("invalid argument")
	ErrUnavailable     = errors.New("dependency unavailable")
	ErrNotPayable      = errors.New("order is not payable")
	ErrNotCancellable  = errors.New("order is not cancellable")
	// ErrPaymentRefused: a payment notification that cannot be taken (its
	// amount differs from the order's, the order has no price, its
	// transaction id was used for another payment).
	ErrPaymentRefused = errors.New("payment refused")
	// ErrKeyReused: an Idempotency-Key came back with a different request
	// (a restock of another quantity).
	ErrKeyReused = errors.New("idempotency key reused for a different request")
	// ErrTooBusy: an item has more orders in flight than one check of it
	// reads at once; it is checked again later.
	ErrTooBusy = errors.New("too many orders in flight to check now")
)

// Error is a domain error with a message chosen for the client: what a
// transport may show. Code is one of the sentinels above; errors.Is matches
// it. Whatever wraps an Error (context, adapter causes) stays out of what
// the client sees (benbjohnson/wtf's Error{Code, Message}).
type Error struct {
	Code    error
	Message string
}

// Errorf returns an *Error of code whose client message is the formatted
// text. Pass no error among args: the message goes to the client.
func Errorf(code error, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error is the code's text and the message, as the client reads it.
func (e *Error) Error() string { return e.Code.Error() + ": " + e.Message }

// Unwrap returns the code, so errors.Is(err, ErrX) holds.
func (e *Error) Unwrap() error { return e.Code }

// ClientMessage returns the text a client may read for err: that of the
// first *Error in its chain, else "" (the transport then shows the code's
// fixed text).
func ClientMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Error()
	}
	return ""
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

// Activity is a flash sale of one item within a time window.
type Activity struct {
	ID           int64
	ItemID       int64
	StartsAt     time.Time
	EndsAt       time.Time
	PerUserLimit int
	// PaymentWindow is how long a CREATED order may stay unpaid; zero means
	// the global default.
	PaymentWindow time.Duration
	// StockBuckets is how many Redis keys (on different cluster slots) the
	// item's stock is split over during this activity; 1 (or 0) is one key.
	StockBuckets int
	// SalePrice is the unit price of the sale (the item's price unless the
	// operator set another); zero when neither has one.
	SalePrice Money
	// CancelledAt is when an operator cancelled the sale (its EndsAt moved
	// there too); zero when not cancelled.
	CancelledAt time.Time
}

// Refusal returns why the sale refuses an order of quantity units reserved
// at reservedAt, or "" when it may become an order. The consumer asks it of
// MySQL's row, read in the transaction that writes the orders, so whatever
// an instance's copy said, an order reserved outside [StartsAt, EndsAt)
// (EndsAt moved by an end or cancel included) or above the per-user limit
// never becomes a live order. reservedAt is the event's, from the instance's
// shared clock (package clock), the clock an end writes EndsAt with.
func (a Activity) Refusal(reservedAt time.Time, quantity int) string {
	switch {
	case reservedAt.Before(a.StartsAt):
		return ReasonSaleNotStarted
	case !reservedAt.Before(a.EndsAt) && !a.CancelledAt.IsZero():
		return ReasonSaleCancelled
	case !reservedAt.Before(a.EndsAt):
		return ReasonSaleEnded
	case quantity > a.PerUserLimit:
		return ReasonOverLimit
	}
	return ""
}

// MaxStockBuckets bounds Activity.StockBuckets.
const MaxStockBuckets = 16

// ActiveAt reports whether t lies within [StartsAt, EndsAt).
func (a Activity) ActiveAt(t time.Time) bool {
	return !t.Before(a.StartsAt) && t.Before(a.EndsAt)
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

// EventVersion is the current create-order event schema version.
const EventVersion = 1

// Event is the create-order message the API publishes to Kafka after a
// successful reservation. It carries everything the consumer needs to write
// the order and to find the reservation in Redis.
type Event struct {
	Version        int       `json:"v"`
	OrderNo        string    `json:"order_no"`
	IdempotencyKey string    `json:"idempotency_key"`
	UserID         string    `json:"user_id"` // a number on the wire when numeric (see MarshalJSON)
	ItemID         int64     `json:"item_id"`
	ActivityID     int64     `json:"activity_id"`
	Quantity       int       `json:"quantity"`
	ReservedAt     time.Time `json:"reserved_at"`
	RequestID      string    `json:"request_id,omitempty"`
	// TraceParent and TraceState are the W3C trace context of the span that
	// published the event (empty when tracing is off). They travel in the
	// Kafka message's headers, not in its JSON.
	TraceParent string `json:"-"`
	TraceState  string `json:"-"`
}

// Validate reports what is impossible about e, or nil.
func (e Event) Validate() error {
	switch {
	case e.Version != EventVersion:
		return fmt.Errorf("unknown event version %d", e.Version)
	case !ValidOrderNo(e.OrderNo):
		return fmt.Errorf("bad order_no %q", e.OrderNo)
	case !ValidIdempotencyKey(e.IdempotencyKey):
		return fmt.Errorf("bad idempotency_key %q", e.IdempotencyKey)
	case !ValidUserID(e.UserID):
		return fmt.Errorf("bad user_id %q", e.UserID)
	case e.ItemID <= 0 || e.ActivityID <= 0 || ItemOf(e.OrderNo) != e.ItemID:
		return fmt.Errorf("bad ids item=%d activity=%d", e.ItemID, e.ActivityID)
	case e.Quantity <= 0 || e.Quantity > MaxQuantity:
		return fmt.Errorf("bad quantity %d", e.Quantity)
	case e.ReservedAt.IsZero():
		return errors.New("missing reserved_at")
	}
	return nil
}

// MaxQuantity bounds the units of one order whatever an activity allows.
const MaxQuantity = 1000
