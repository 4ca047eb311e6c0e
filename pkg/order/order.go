// Package order is the flash-sale domain: order numbers, statuses and their
// legal transitions, the create-order event, and the domain errors every
// adapter translates its own failures into. It imports no adapter: only the
// standard library and oklog/ulid, whose ULIDs are the first part of every
// order number.
package order

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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

// ActivityTTL is how long an ActivityCache trusts a copy: an operator may
// end a sale early or move its times before it starts, and every process
// sees the change within this time while MySQL answers.
const ActivityTTL = time.Second

// ActivityReloadTimeout bounds the re-read of an activity a cache already
// holds; when it fails or times out, the cache keeps serving its last copy,
// for at most ActivityMaxStale after that copy was read.
const ActivityReloadTimeout = 500 * time.Millisecond

// ActivityMaxStale bounds how old a copy of an activity a process still
// sells on. A copy is as old as the time since the read that gave it
// started; once its re-reads have failed or been slower than
// ActivityReloadTimeout for this long, ActivityCache.Get answers
// ErrUnavailable (503) until MySQL answers again. An instance whose MySQL
// is slow therefore stops selling within ActivityMaxStale of the last read
// that reached it; an order it took in that time after an end or cancel it
// did not see is refused by the consumer (ReasonSaleEnded,
// ReasonSaleCancelled), which decides against MySQL's row, so the bound
// limits how long buyers get a 202 that ends FAILED, not what is sold. It
// is long enough to sell through a MySQL restart or failover (4-7 s
// measured here; the chaos suite stops MariaDB for 10 s under load, and
// with a soak beside it the copy was past 15 s before MariaDB answered
// again), short enough that a MySQL that stays slow stops the sale within
// half a minute.
const ActivityMaxStale = 30 * time.Second

// activityRefreshAt is the age at which a request that finds a good copy
// starts reading the activity again in the background (one read at a
// time), still answering from the copy: under steady traffic the copy is
// replaced before it expires, and no request waits for MySQL. Waiting for
// the re-read of an expired copy put a MySQL round trip (milliseconds on a
// busy box) in the way of every request of that moment, once a second.
const activityRefreshAt = ActivityTTL / 2

// ActivityCache remembers activities by id for ActivityTTL. A copy older
// than activityRefreshAt is re-read in the background while it still
// answers. Requests for an activity whose copy is missing or expired wait
// for one load between them, so a process reads an activity at most about
// twice a second whatever its request rate. When a re-read fails (MySQL down
// or slow past ActivityReloadTimeout) the last copy is kept for another
// ActivityTTL, so a blip of MySQL does not stop the sale, but never past
// ActivityMaxStale from the read that gave it: then Get fails with
// ErrUnavailable, so a sale ended meanwhile is not sold on. The zero value
// is ready.
type ActivityCache struct {
	m  sync.Map // id -> *activityEntry
	mu sync.Mutex
}

type activityEntry struct {
	done chan struct{} // closed when the load ended
	a    Activity
	err  error
	// loaded is when the read that gave a started: the copy is at least
	// that fresh. expires is when a request must read it again.
	loaded, expires time.Time
	refreshing      atomic.Bool // a background re-read of this copy started
}

// fresh reports whether e holds a good copy that has not expired; it waits
// for nothing.
func (e *activityEntry) fresh(now time.Time) bool {
	select {
	case <-e.done:
		return e.err == nil && now.Before(e.expires)
	default:
		return false
	}
}

// expiry is when a copy read at loaded, and last checked at checked, must
// be read again: ActivityTTL after the check, ActivityMaxStale after the
// read at the latest.
func expiry(loaded, checked time.Time) time.Time {
	e := checked.Add(ActivityTTL)
	if m := loaded.Add(ActivityMaxStale); m.Before(e) {
		return m
	}
	return e
}

// Get returns activity id, calling load when no fresh copy is held (a
// failed first load is not remembered; once a copy was held, every read is
// bounded by ActivityReloadTimeout).
func (c *ActivityCache) Get(ctx context.Context, id int64, load func(context.Context, int64) (Activity, error)) (Activity, error) {
	if v, ok := c.m.Load(id); ok {
		e, now := v.(*activityEntry), time.Now()
		if e.fresh(now) {
			if now.Sub(e.loaded) >= activityRefreshAt && e.refreshing.CompareAndSwap(false, true) {
				go c.refresh(id, e, load)
			}
			return e.a, nil
		}
	}
	c.mu.Lock()
	var prev *activityEntry
	if v, ok := c.m.Load(id); ok {
		e := v.(*activityEntry)
		if e.fresh(time.Now()) {
			c.mu.Unlock()
			return e.a, nil
		}
		select {
		case <-e.done: // expired: load anew below, keeping it in case that fails
			prev = e
		default: // another request is loading it: wait for that load
			c.mu.Unlock()
			select {
			case <-e.done:
				return e.a, e.err
			case <-ctx.Done():
				return Activity{}, ctx.Err()
			}
		}
	}
	e := &activityEntry{done: make(chan struct{})}
	c.m.Store(id, e)
	c.mu.Unlock()
	lctx, cancel := ctx, context.CancelFunc(func() {})
	if prev != nil {
		// Others wait on this load: the caller going away must not fail it.
		lctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), ActivityReloadTimeout)
	}
	started := time.Now()
	e.a, e.err = load(lctx, id)
	if e.err != nil && lctx.Err() != nil && ctx.Err() == nil {
		// The re-read ran out of its own time: MySQL is slow.
		e.err = fmt.Errorf("read activity %d: %w: %w", id, ErrUnavailable, e.err)
	}
	cancel()
	e.loaded, e.expires = started, expiry(started, time.Now())
	if e.err != nil && prev != nil && prev.err == nil {
		// Keep the last copy, as old as it was: it expires for good
		// ActivityMaxStale after its own read.
		now := time.Now()
		if now.Sub(prev.loaded) < ActivityMaxStale {
			e.a, e.err, e.loaded, e.expires = prev.a, nil, prev.loaded, expiry(prev.loaded, now)
		} else {
			// Too old to sell on. The entry stays (failed), so the next
			// request's read is bounded by ActivityReloadTimeout too.
			e.a, e.err = Activity{}, tooOld(id, prev.loaded, e.err)
		}
		close(e.done)
		return e.a, e.err
	}
	close(e.done)
	if e.err != nil {
		if prev == nil {
			c.m.CompareAndDelete(id, e)
		} // else the failed entry stays, so the next read is bounded too
		return Activity{}, e.err
	}
	return e.a, nil
}

// tooOld is the error of a copy read at loaded, past ActivityMaxStale,
// whose re-read failed with cause.
func tooOld(id int64, loaded time.Time, cause error) error {
	return fmt.Errorf("activity %d: its last read is %v old, past %v (re-read: %v): %w",
		id, time.Since(loaded).Round(time.Millisecond), ActivityMaxStale, cause, ErrUnavailable)
}

// refresh re-reads activity id in the background and puts the new copy in
// place of old, unless something replaced old meanwhile. A failed re-read
// leaves old to expire: the next request then loads as usual, keeping old
// if that fails too.
func (c *ActivityCache) refresh(id int64, old *activityEntry, load func(context.Context, int64) (Activity, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), ActivityReloadTimeout)
	defer cancel()
	started := time.Now()
	a, err := load(ctx, id)
	if err != nil {
		return
	}
	e := &activityEntry{done: make(chan struct{}), a: a, loaded: started, expires: expiry(started, time.Now())}
	close(e.done)
	c.m.CompareAndSwap(id, old, e)
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
