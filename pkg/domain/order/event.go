package order

import (
	"errors"
	"fmt"
	"time"
)

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
	// AccessCode is the digest of the presale code the order uses
	// (access.Digest, 32 hex digits), "" for none: the consumer takes its
	// use in MySQL in the transaction that creates the order.
	AccessCode string `json:"access_code,omitempty"`
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
	case !ValidEventKey(e.IdempotencyKey):
		return fmt.Errorf("bad idempotency_key %q", e.IdempotencyKey)
	case !ValidUserID(e.UserID):
		return fmt.Errorf("bad user_id %q", e.UserID)
	case e.ItemID <= 0 || e.ActivityID <= 0 || TagOf(e.OrderNo) <= 0:
		return fmt.Errorf("bad ids item=%d activity=%d", e.ItemID, e.ActivityID)
	case e.Quantity <= 0 || e.Quantity > MaxQuantity:
		return fmt.Errorf("bad quantity %d", e.Quantity)
	case e.ReservedAt.IsZero():
		return errors.New("missing reserved_at")
	case !validDigest(e.AccessCode):
		return fmt.Errorf("bad access_code %q", e.AccessCode)
	}
	return nil
}

// MaxQuantity bounds the units of one order whatever an activity allows.
const MaxQuantity = 1000

// validDigest reports whether d is "" or a code's digest: 32 lower-case
// hex digits (access.Hash's form; package access imports this one).
func validDigest(d string) bool {
	if d == "" {
		return true
	}
	if len(d) != 32 {
		return false
	}
	for i := 0; i < len(d); i++ {
		if c := d[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
