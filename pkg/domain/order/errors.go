package order

import (
	"errors"
	"fmt"
)

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
	// ErrInProgress: a request with this Idempotency-Key is still placing
	// its order (another instance's, or one whose answer is not known
	// yet): the same request sent again shortly gets its answer.
	ErrInProgress = errors.New("a request with this idempotency key is in progress")
	// ErrTooBusy: an item has more orders in flight than one check of it
	// reads at once; it is checked again later.
	ErrTooBusy = errors.New("too many orders in flight to check now")
	// ErrNotAdmitted: a sale with a waiting room refused an order without
	// a valid, unused admission of the buyer's.
	ErrNotAdmitted = errors.New("not admitted")
	// ErrDrawSale: a draw sale takes entries, not orders; its orders are
	// the winners' and the alternates', made by the draw.
	ErrDrawSale = errors.New("draw sale")
	// ErrOutcomeUnknown: a request that changes state was sent and its
	// answer lost (the connection broke, the wait ran out), so it may have
	// run. Such an error is ErrUnavailable too; the caller reads the state
	// the request would have left, and never sends it again blindly.
	ErrOutcomeUnknown = errors.New("outcome unknown: the request may have run")
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
