package drift

import (
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// ActivityFilter picks activities for the reconciler. Set fields combine
// with AND; the zero filter picks every activity.
type ActivityFilter struct {
	// EndsAfter keeps activities that end after it.
	EndsAfter time.Time
	// IDs keeps these activities; Items keeps the activities that sell
	// these items.
	IDs, Items []int64
}

// OrderState is an order's status and quantity.
type OrderState struct {
	Status   order.Status
	Quantity int64
}

// ReadMark is where a reconciler's read of an item starts in MySQL: the
// server's clock and the largest order id then, and the item's closing
// orders (CLOSED, Redis release not recorded).
type ReadMark struct {
	At      time.Time
	MaxID   int64
	Closing map[string]OrderState
	// Restocks are the item's restocks not recorded as applied in Redis,
	// and MaxRestockID the largest restock id then.
	Restocks     []PendingRestock
	MaxRestockID int64
}

// StockSnapshot is an item's MySQL stock and some of its orders, read in
// one consistent snapshot.
type StockSnapshot struct {
	Stock int64
	// Orders holds the orders MySQL has among those asked about.
	Orders map[string]OrderState
	// Moved lists the orders that changed the stock since the mark without
	// being among those asked about: live orders created after it, and
	// orders closed (or their release recorded) after it that are not
	// among its closing orders, and restocks made after it ("restock <id>").
	Moved []string
}

// LiveOrder is a live (CREATED or PAID) order as the reconciler reads it.
type LiveOrder struct {
	OrderNo        string
	UserID         string
	ItemID         int64
	Status         order.Status
	Quantity       int
	IdempotencyKey string
	CreatedAt      time.Time
}

// IdemOrder is what the reconciler needs of an order to give its
// idempotency record back.
type IdemOrder struct {
	OrderNo        string
	UserID         string
	ItemID         int64
	IdempotencyKey string
	Status         order.Status
	// FailureReason is "" for an order without one.
	FailureReason string
}
