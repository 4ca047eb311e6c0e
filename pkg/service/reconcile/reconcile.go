// Package reconcile checks, item by item, that Redis and MySQL agree, and
// repairs what they disagree on when asked.
//
// # Stock
//
// The invariant is
//
//	Redis stock + in flight = MySQL stock
//
// where "in flight" is every unit Redis has taken out of its stock that
// MySQL still counts as its own. From the Redis side that is the inflight
// counter (the quantities of RESERVED and CLAIMED reservations), corrected
// for the orders MySQL has already decided but Redis has not heard of yet:
//
//	in flight = inflight − committed + closing + restocking
//	drift     = Redis stock + in flight − MySQL stock
//
// where:
//
//   - committed: pending reservations (RESERVED|CLAIMED) whose order MySQL
//     has as CREATED or PAID. MySQL took their units when it committed;
//     the confirm that takes them off the counter follows. Counting them
//     would count them twice.
//   - releasing: pending reservations whose order MySQL has as FAILED (or
//     CLOSED before the confirm). MySQL never took their units and the
//     release that follows moves them from the counter back to Redis stock;
//     stock + inflight does not change, so they stay in "in flight". (They
//     are not in flight in the sense of "undecided": the report shows them
//     apart; undecided = inflight − committed − releasing.)
//   - closing: CONFIRMED reservations of orders MySQL has CLOSED (cancel,
//     payment timeout) whose Redis release has not run yet. MySQL has the
//     units back already; Redis gets them with the release.
//   - restocking: restocks MySQL committed (table restocks, applied_at
//     NULL) that Redis stock does not hold yet: no marker, and the stock
//     key's restock record does not include them (lua/restock.lua: a
//     warm-up's figure did not). MySQL has the units; Redis gets them with
//     the restock's Redis step, which runs once per restock (the API's, a
//     retry's, or the repair's).
//
// # Reading without false drift
//
// Orders flow while the reconciler reads, so each read is ordered so that
// every cross-store step (MySQL first, Redis second: commit then confirm,
// close then release) is seen consistently:
//
//  1. MySQL: the item's CLOSED orders without a recorded release and its
//     restocks not recorded as applied (and the server's clock, the last
//     order id and the last restock id).
//  2. Redis, one script, one instant: stock, inflight, the pending order
//     numbers, the reservation states of the orders from step 1, and the
//     markers of its restocks.
//  3. MySQL, one REPEATABLE READ snapshot: the stock and the status of every
//     pending order from step 2.
//
// A pending order that commits between 2 and 3 is seen committed in 3 and
// is still in the counter read in 2: it is subtracted once, as it should
// be. MySQL being read after Redis is what makes this exact. Two moves
// remain that the order of reads cannot place: an order reserved after
// step 2 and committed before step 3, and a cancel or timeout close that
// lands between step 1 and step 3. Step 1 also notes the server's clock and
// the last order id, and the snapshot of step 3 lists the live orders
// created since (not pending in step 2) and the orders closed since; when
// there are any, the item is read again at once (up to three times). Then,
// as a last guard, a mismatch is read again after a pause
// (Checker.Recheck), and it is drift only when two reads in a row show the
// same values. A restock made after step 1 is listed by the snapshot too
// (a larger restock id) and the item is read again at once.
//
// # Quota
//
// Every user with a live order in an activity must hold the activity's
// quota key with that order's number (after a Redis restart they would not,
// and could buy again), and a quota key whose order is neither live in
// MySQL nor RESERVED/CLAIMED in Redis is stale (the user can never buy
// again) — unless MySQL closed that order and its release, which deletes
// the key, has not run yet. The check reads a page at a time, so it holds
// a few pages whatever the size of the sale: first the live orders in user
// order (a keyset scan of uk_orders_live), each page before the keys of its
// users (MGET), and the users whose key is missing read again (a key goes
// only after its order left the live set); then the quota keys by SCAN, each
// step before the live orders of its users, for the keys whose user holds
// no live order. A suspect key is read together with its reservation
// (MULTI) before MySQL is asked about its order, so neither an order being
// closed nor one on its way is taken for drift. On a cluster the item's
// hash tag puts all its keys on one node, and that node is scanned. Issues
// are counted, and the first MaxListed of each kind listed.
//
// # Repair
//
// Only drift seen in two reads in a row is repaired, under the caller's
// lock, with every write a compare-and-set script that carries the lock's
// fencing token (see package stockredis). Quota keys are restored before
// stock, so a restored item never sells to a buyer whose quota is still
// missing. Every repair pass also gives the orders MySQL holds their
// idempotency records back where Redis lost them (see idem.go), first of
// all, on every item it read. Before reading, it gives CREATED orders their
// reservation hashes back where Redis lost them (see reservations.go) and
// finishes the restocks whose Redis step was left undone (an API that
// answered 503 and was not retried; see restock.go), and it finishes those
// again once it brought back a missing stock key (a restock's step adds
// nothing to a missing key).
//
// # One item at a time
//
// An item whose check or repair fails (a key of the wrong type, a statement
// MySQL refuses) is reported Unchecked with its error, and the run goes on
// with the other items: one bad item never keeps the others unchecked or
// unrepaired. A run stops only when its context ends, its lock is lost, or
// a store is down (it no longer answers a ping after an item failed).
package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// LockName is the distributed lock every repair of Redis from MySQL runs
// under (the reconciler's runs, and the consumer's repair after Redis lost
// data): one at a time.
const LockName = "reconcile"

// Defaults for the zero values of Checker.
const (
	DefaultRecheck = 500 * time.Millisecond
	DefaultWindow  = 24 * time.Hour
	// MaxReads bounds the reads of one item in one run.
	MaxReads = 3
)

// ErrLockLost means the lock the repairs run under was lost; nothing more
// was written.
var ErrLockLost = errors.New("reconcile: lock lost; repairs stopped")

// Lock is what the repairs need of the lock they run under (*lock.Lock).
type Lock interface {
	// Fence is the fencing token every repair carries.
	Fence() int64
	// Lost is closed when the lock is no longer held.
	Lost() <-chan struct{}
}

// Progress hears about each item checked. Start is called once per pass.
type Progress interface {
	Start(stage string, total int)
	Step()
	Done()
}

// Warmer lays out a bucketed item's stock keys (*stockredis.Store): it
// writes the bucket marker and creates the missing buckets from MySQL stock
// minus what is in flight, never raising an existing one, recording the
// restocks that stock includes (stockredis.WarmupFrom).
type Warmer interface {
	WarmupFrom(ctx context.Context, item reservation.Item, buckets int, ttl time.Duration, db reservation.StockReader) (int64, error)
}

// Checker checks and repairs items.
type Checker struct {
	Stock Stock
	DB    DB
	Log   *slog.Logger
	// Warmer restores the layout of a bucketed item whose bucket marker
	// Redis lost with its stock (the layout comes from the item's current
	// sale in MySQL, stock_buckets; see buckets). Nil: such an item is
	// reported and left alone.
	Warmer Warmer
	// Progress may be nil.
	Progress Progress
	// Stores are pinged after an item failed: one that does not answer
	// stops the run (a store down for one item is down for all). Nil: the
	// DB only.
	Stores []Pinger
	// Recheck is the pause before a mismatch is read again (default
	// DefaultRecheck).
	Recheck time.Duration
	// PaymentWindow is the payment window of activities without their own
	// (default activity.DefaultPaymentWindow); it bounds the TTL of restored
	// keys.
	PaymentWindow time.Duration
	// Window: the activities that ended less than Window ago are still
	// checked (default DefaultWindow).
	Window time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	// beforeWrite, when set (tests), runs before each repair write;
	// afterView between the Redis and the MySQL read of an item's stock.
	beforeWrite func(item int64)
	afterView   func(item int64)
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Checker) recheck() time.Duration {
	if c.Recheck > 0 {
		return c.Recheck
	}
	return DefaultRecheck
}

func (c *Checker) window() time.Duration {
	if c.Window > 0 {
		return c.Window
	}
	return DefaultWindow
}

// paymentWindow is the payment window of activities without their own.
func (c *Checker) paymentWindow() time.Duration {
	if c.PaymentWindow > 0 {
		return c.PaymentWindow
	}
	return activity.DefaultPaymentWindow
}
