// Package drift is the reconciler's view of the two stores that hold the
// stock (pkg/service/reconcile): what it reads of Redis and of MySQL to
// find where they disagree, and the records and the guard of the
// compare-and-set writes that repair Redis.
package drift

import (
	"strconv"
	"time"

	"github.com/seckill/seckill/pkg/domain/reservation"
)

// StockView is an item's stock as Redis saw it at one instant.
type StockView struct {
	// Warmed is false when the stock key is missing (Stock is then 0).
	Warmed   bool
	Stock    int64
	Inflight int64
	// Pending lists the RESERVED and CLAIMED order numbers, oldest first.
	Pending []string
	// States gives the reservation state of each order asked about
	// (reservation.StateMissing when there is none).
	States map[string]reservation.State
	// Buckets holds, for a bucketed item, the value of each bucket key
	// (-1 for a missing one), read right after the item's own keys; Stock
	// is then their sum and Warmed says none is missing. Nil for an item
	// with one stock key.
	Buckets []int64
	// BothLayouts is true when the item's one stock key exists beside its
	// bucket marker (the layout changed while the old keys lived): Stock
	// is then the buckets' sum, as the marker says, and SingleStock the
	// one key's value. The reconciler reports it and repairs neither.
	BothLayouts bool
	SingleStock int64
	// Restocking is the units of the restocks asked about that Redis stock
	// does not hold yet (their markers are missing and no warm-up's figure
	// included them): MySQL has them, and the restock's Redis step will
	// add them.
	Restocking int64
	// Moving is the units of a bucketed item between their bucket and its
	// in-flight counter: taken from the bucket by an order not yet
	// reserved, or released by an order not yet given back. Neither Stock
	// nor Inflight holds them, MySQL does, and the step still to come
	// puts them where they belong.
	Moving int64
}

// PendingRestock is a restock MySQL has not recorded as applied in Redis.
type PendingRestock struct {
	ID, Quantity int64
}

// Guard is the fencing token a repair carries and when the item's fence
// key expires (keep it past the item's keys).
type Guard struct {
	Fence    int64
	ExpireAt time.Time
}

// QuotaRecord is a quota key the reconciler gives back: the user's live
// order, and how long the key lives.
type QuotaRecord struct {
	UserID  string
	OrderNo string
	TTL     time.Duration
}

// QuotaState is a quota key and the state of the reservation it names,
// read together.
type QuotaState struct {
	// Holder is the order number the key holds now ("" when missing).
	Holder string
	// State is the state of Holder's reservation (reservation.StateMissing for none).
	State reservation.State
}

// IdemRecord is one idempotency record the reconciler gives back: the
// order number the user's key produced on the item, and how long the
// record lives.
type IdemRecord struct {
	UserID  string
	Key     string
	OrderNo string
	TTL     time.Duration
}

// LostReservation is a CREATED order of the item whose reservation hash the
// reconciler gives back (CONFIRMED), so a later close's release credits its
// units to Redis.
type LostReservation struct {
	OrderNo        string
	UserID         string
	ActivityID     int64
	Quantity       int
	IdempotencyKey string
	ReservedAt     time.Time
	// TTL is the reservation's lifetime: past the sale's end and payment
	// window, as the API gives it.
	TTL time.Duration
}

// CAS is the outcome of one of the reconciler's compare-and-set repairs.
type CAS int

const (
	// Written: the repair was applied.
	Written CAS = iota
	// Changed: the keys changed since they were read; nothing was written.
	Changed
	// StaleFence: a reconciler with a larger fencing token already wrote
	// to this item; nothing was written.
	StaleFence
)

func (c CAS) String() string {
	switch c {
	case Written:
		return "written"
	case Changed:
		return "changed concurrently"
	case StaleFence:
		return "stale fencing token"
	}
	return "CAS(" + strconv.Itoa(int(c)) + ")"
}
