package activity

import (
	"time"

	"github.com/seckill/seckill/pkg/domain/access"

	"github.com/seckill/seckill/pkg/domain/order"
)

// Activity is a flash sale of one item, or of several (its sizes), within a
// time window.
type Activity struct {
	ID int64
	// ItemID is the sale's first item: its only one, or the first of its
	// sizes, whose hash tag every Redis key of the sale shares.
	ItemID int64
	// Items are what it sells, ItemID first, in the operator's order; a
	// sale created with item_id alone has that one, without a label.
	Items        []Item
	StartsAt     time.Time
	EndsAt       time.Time
	PerUserLimit int
	// PaymentWindow is how long a CREATED order may stay unpaid; zero means
	// the global default.
	PaymentWindow time.Duration
	// StockBuckets is how many Redis keys (on different cluster slots) the
	// item's stock is split over during this activity; 1 (or 0) is one key.
	StockBuckets int
	// SalePrice is the unit price of the sale's first item (the item's
	// price unless the operator set another); zero when neither has one.
	// Each item's is in Items.
	SalePrice order.Money
	// CancelledAt is when an operator cancelled the sale (its EndsAt moved
	// there too); zero when not cancelled.
	CancelledAt time.Time
	// Room is the sale's waiting room; the zero value is none.
	Room WaitingRoom
	// Draw is the sale's draw; the zero value is a first-come sale.
	Draw Draw
	// Access is whom the sale takes orders from (access.Open when "").
	Access access.Mode
	// Name is what buyers see the sale as: its first item's name (read
	// with the sale; empty where it was not).
	Name string
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
		return order.ReasonSaleNotStarted
	case !reservedAt.Before(a.EndsAt) && !a.CancelledAt.IsZero():
		return order.ReasonSaleCancelled
	case !reservedAt.Before(a.EndsAt):
		return order.ReasonSaleEnded
	case quantity > a.PerUserLimit:
		return order.ReasonOverLimit
	}
	return ""
}

// MaxStockBuckets bounds Activity.StockBuckets.
const MaxStockBuckets = 16

// ActiveAt reports whether t lies within [StartsAt, EndsAt).
func (a Activity) ActiveAt(t time.Time) bool {
	return !t.Before(a.StartsAt) && t.Before(a.EndsAt)
}

// Ending is how an operator ends a running sale now.
type Ending int

const (
	// EndNow stops new orders; orders already accepted finish.
	EndNow Ending = iota
	// CancelNow ends the sale and marks it cancelled, so its unpaid
	// orders close.
	CancelNow
)
