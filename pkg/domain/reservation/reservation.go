// Package reservation is the reservation of stock for one order, as the
// reserve script takes it and a release gives it back (docs/adr/0001):
// where an item's stock is, the request to reserve, the states a
// reservation moves through, and what a release may do.
package reservation

import (
	"context"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Item says where one item's keys are: the item, and its sale's tag, the
// item whose hash tag every key of the sale shares (a sale's first item,
// activity.Activity.ItemID). One reserve script must see the buyer's quota
// in the sale and the chosen item's stock at once, so on Redis Cluster
// they share a slot. For a sale of one item the tag is the item itself and
// the keys are named as they were before sales had sizes.
type Item struct {
	ID  int64
	Tag int64 // 0: ID
}

// One is the item of a sale of one item (its own tag).
func One(id int64) Item { return Item{ID: id, Tag: id} }

// In is item of a sale whose first item is tag.
func In(tag, item int64) Item { return Item{ID: item, Tag: tag} }

// Tagged is it with Tag filled in.
func (it Item) Tagged() Item {
	if it.Tag == 0 {
		it.Tag = it.ID
	}
	return it
}

// Own reports whether the item is its own tag (a sale's first item).
func (it Item) Own() bool { return it.Tag == 0 || it.Tag == it.ID }

// State is where a reservation is in its life (docs/adr/0001): the
// reserve script writes it RESERVED, a consumer CLAIMED, its MySQL commit
// CONFIRMED, a release RELEASED. MISSING is no reservation at all.
type State string

// The reservation states, as the scripts write them.
const (
	StateReserved  State = "RESERVED"
	StateClaimed   State = "CLAIMED"
	StateConfirmed State = "CONFIRMED"
	StateReleased  State = "RELEASED"
	StateMissing   State = "MISSING"
)

// Reservation is a request to take stock for one order.
type Reservation struct {
	OrderNo        string
	UserID         string
	ItemID         int64
	ActivityID     int64
	Quantity       int
	IdempotencyKey string
	At             time.Time
	// QuotaTTL keeps the quota and idempotency records (until the activity
	// ends plus a margin); ReservationTTL keeps the reservation hash (past
	// the payment window, so cancel and timeout can release through it).
	QuotaTTL       time.Duration
	ReservationTTL time.Duration
	// Buckets is the number of stock buckets of the activity (0 or 1: the
	// item has one stock key).
	Buckets int
	// Tag is the sale's first item (activity.Activity.ItemID), whose hash tag
	// the keys share; 0 means ItemID. The order number names it too.
	Tag int64
	// Selling is how the sale sells: in a sale with a waiting room
	// (activity.SellsInRoom) the order must hold an admission of the
	// buyer's (see Room), and uses it up.
	Selling activity.Selling
	// Code is the digest of the presale code the order uses ("" for
	// none): the reserve script takes one of its uses with the stock, and
	// the release gives it back.
	Code access.Digest
}

// Item is where the reservation's keys are.
func (r Reservation) Item() Item { return Item{ID: r.ItemID, Tag: r.Tag}.Tagged() }

// Result says what the reserve script did.
type Result struct {
	// OrderNo is the new order's number, or the original one for a
	// duplicate idempotency key.
	OrderNo string
	// Duplicate is true when the key was used before; nothing was reserved.
	Duplicate bool
	// Left is the stock left after the reservation (or seen when sold out).
	Left int64
}

// Ref identifies a reservation and every key its release touches.
type Ref struct {
	OrderNo        string
	UserID         string
	ItemID         int64
	ActivityID     int64
	IdempotencyKey string
}

// Item is where the reservation's keys are: its order number names the
// sale's tag (order.TagOf).
func (r Ref) Item() Item { return In(order.TagOf(r.OrderNo), r.ItemID) }

// EventRef is the reservation of an order's create event.
func EventRef(e order.Event) Ref {
	return Ref{OrderNo: e.OrderNo, UserID: e.UserID, ItemID: e.ItemID, ActivityID: e.ActivityID, IdempotencyKey: e.IdempotencyKey}
}

// OrderRef is the reservation of an order MySQL holds.
func OrderRef(o order.Order) Ref {
	return Ref{OrderNo: o.OrderNo, UserID: o.UserID, ItemID: o.ItemID, ActivityID: o.ActivityID, IdempotencyKey: o.IdempotencyKey}
}

// ReleaseOptions says which reservation a release may give back, and how.
type ReleaseOptions struct {
	// Reason is recorded on the released reservation.
	Reason string
	// From are the states the reservation may be released from; in any
	// other state it is left as it is.
	From []State
	// FreeKey also deletes the idempotency record, so the same key buys
	// again (the API answered 503, which promised that).
	FreeKey bool
	// QuotaTo, when set, is the buyer's live order the quota key passes
	// to instead of being deleted (while it holds the released order):
	// MySQL refused the released one for that order.
	QuotaTo string
}

// Released is what a release did: whether it released the reservation,
// and the state it found it in (StateReleased for a release repeated).
type Released struct {
	Released bool
	State    State
}

// Gone reports whether nothing is held for the reservation any more: it
// was released now or before, or there is none.
func (r Released) Gone() bool {
	return r.Released || r.State == StateReleased || r.State == StateMissing
}

// Info is what a reservation hash holds.
type Info struct {
	Ref
	State      State
	Quantity   int
	ReservedAt time.Time
	Reason     string
	// Code is the digest of the presale code the reservation holds a use
	// of ("" for none).
	Code access.Digest
}

// PriorOrders are the order numbers the reserve script looks for before it
// looks at stock; "" for none.
type PriorOrders struct {
	// ByKey is the order the user's idempotency key produced for the item.
	ByKey string
	// QuotaHolder is the order holding the user's quota in the activity.
	QuotaHolder string
}

// Snapshot is an item's stock as Redis sees it.
type Snapshot struct {
	Warmed   bool
	Stock    int64
	Inflight int64
}

// Restocked says what a restock did in Redis.
type Restocked struct {
	// Warmed is false when the item's stock is not in Redis (no stock key,
	// or a bucket missing): nothing was added to what is missing and the
	// restock is not done in Redis. The warm-up that loads the stock
	// carries it when its MySQL figure includes the restock; else running
	// this again once the stock is there adds it.
	Warmed bool
	// Added is the units this call added (0 when an earlier run did).
	Added int64
}

// A StockReader is MySQL as a warm-up reads it: the stock and restocks
// it loads into Redis.
type StockReader interface {
	// WarmupStock reads the item's stock and the id of its last restock
	// (0: none) at one instant: the stock includes exactly the item's
	// restocks up to that id (an item's restocks commit in id order). At
	// the same instant it lists the orders among pending that MySQL holds
	// live (CREATED or PAID): committed, their units are out of the stock
	// read, although Redis counts them in flight until their confirm.
	WarmupStock(ctx context.Context, item int64, pending []string) (stock, lastRestock int64, committed []string, err error)
	// MarkRestocksWarmed records the item's restocks up to id as applied
	// in Redis: a warm-up loaded them with the stock.
	MarkRestocksWarmed(ctx context.Context, item, upTo int64) error
	// RestocksBetween lists the item's restocks with an id above after
	// and at most upTo, by id, at most limit of them: their ids and
	// quantities.
	RestocksBetween(ctx context.Context, item, after, upTo int64, limit int) (ids, quantities []int64, err error)
}

// A SaleOrders is one sale's orders in a call that settles several sales
// at once (a store's ClaimAll and ConfirmAll): the sale's hash tag (its
// first item), and its order numbers by item. Ctx, if set, is what the sale's span starts
// under (the consumer's batch span of that sale); otherwise the call's.
type SaleOrders struct {
	Ctx      context.Context
	Tag      int64
	Items    []int64    // for ConfirmAll; ClaimAll needs only the tag
	OrderNos [][]string // OrderNos[i]: Items[i]'s (for ClaimAll: OrderNos[0], every item's)
}
