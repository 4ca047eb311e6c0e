package draw

import "time"

// NewEntry is a buyer's entry as the api takes it.
type NewEntry struct {
	ActivityID int64
	UserID     string
	ItemID     int64
	Quantity   int
	// At is the shared clock's time of the request: entries are taken
	// only before entries_close_at.
	At time.Time
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
	EntryID  string
	Rank     int
	ItemID   int64
	Quantity int
	UserID   string
	Outcome  string
	OrderNo  string
}

// Drawn is what a run of the draw did.
type Drawn struct {
	// Ran is false when there was nothing to do: drawn already, or not due.
	Ran     bool
	Entries int
	Winners int
}
