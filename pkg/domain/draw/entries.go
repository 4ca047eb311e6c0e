package draw

import (
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
)

// NewEntry is a buyer's entry as the api takes it.
type NewEntry struct {
	ActivityID int64
	UserID     string
	ItemID     int64
	Quantity   int
	// At is the shared clock's time of the request: entries are taken
	// only before entries_close_at.
	At time.Time
	// Code is the digest of the presale code the entry uses ("" for
	// none): a code_required sale's entry holds one of its uses.
	Code access.Digest
}

// BuyerEntry is a buyer's entry and, once drawn, what became of it (Entry
// is the part the record shows).
type BuyerEntry struct {
	Entry
	ActivityID int64
	UserID     string
	CreatedAt  time.Time
	// Rank is its place in the ranking (from 1), Outcome its outcome at
	// the draw (Won, Alternate); zero and "" before the draw.
	Rank    int
	Outcome string
	// OrderNo is the order made for it: a winner's, or an alternate's that
	// units came back to; Issued once that order's event reached Kafka
	// (before, the order may still not come of it, for an alternate).
	OrderNo string
	Issued  bool
	// AlternatesBefore is, for an alternate without an issued order, how
	// many of its size's alternates without a number come before it.
	AlternatesBefore int64
}

// Picked is an entry of the ranking the draw gives (or has given) an order.
type Picked struct {
	// ActivityID is the draw's sale.
	ActivityID int64
	EntryID    string
	Rank       int
	ItemID     int64
	Quantity   int
	UserID     string
	Outcome    string
	OrderNo    string
}

// Ended is a page of the alternates of an ended draw sale left without an
// order, each now marked not selected (orderdb.Draws.NotSelected).
type Ended struct {
	// Reason is how the sale ended (order.ReasonSaleEnded, or
	// order.ReasonSaleCancelled); "" when it has not ended, and then
	// nothing was looked at.
	Reason string
	// Picks are the alternates marked, in ranking order.
	Picks []Picked
	// Last is the rank of the last alternate the page looked at (the next
	// page starts after it), 0 when none was left to look at.
	Last int
}

// Drawn is what a run of the draw did.
type Drawn struct {
	// Ran is false when there was nothing to do: drawn already, or not due.
	Ran     bool
	Entries int
	Winners int
}
