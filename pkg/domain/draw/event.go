package draw

import (
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
)

// EntryEventVersion is the entry event's schema version.
const EntryEventVersion = 1

// EntryEvent is an entry Redis took, as the api publishes it to the
// entries topic and the consumer writes it to MySQL (ADR 7).
type EntryEvent struct {
	Version    int       `json:"v"`
	ActivityID int64     `json:"activity_id"`
	UserID     string    `json:"user_id"`
	EntryID    string    `json:"entry_id"`
	ItemID     int64     `json:"item_id"`
	Quantity   int       `json:"quantity"`
	AcceptedAt time.Time `json:"accepted_at"`
	// AccessCode is the digest of the presale code whose use the entry
	// holds (left out for none): the consumer takes MySQL's use of it in
	// the transaction that writes the entry.
	AccessCode access.Digest `json:"access_code,omitempty"`
}

// EventOf is the event of a's entry of user in sale activity.
func EventOf(activity int64, user string, a Accepted) EntryEvent {
	return EntryEvent{Version: EntryEventVersion, ActivityID: activity, UserID: user, EntryID: a.ID, ItemID: a.ItemID,
		Quantity: a.Quantity, AcceptedAt: a.At, AccessCode: a.Code}
}

// Validate reports what is impossible about e, or nil.
func (e EntryEvent) Validate() error {
	switch {
	case e.Version != EntryEventVersion:
		return fmt.Errorf("unknown entry event version %d", e.Version)
	case e.ActivityID <= 0 || e.ItemID <= 0:
		return fmt.Errorf("bad ids activity=%d item=%d", e.ActivityID, e.ItemID)
	case !order.ValidUserID(e.UserID):
		return fmt.Errorf("bad user_id %q", e.UserID)
	case !ValidEntryID(e.EntryID):
		return fmt.Errorf("bad entry_id %q", e.EntryID)
	case e.Quantity <= 0 || e.Quantity > order.MaxQuantity:
		return fmt.Errorf("bad quantity %d", e.Quantity)
	case e.AcceptedAt.IsZero():
		return errors.New("missing accepted_at")
	case e.AccessCode != "":
		if _, err := access.ParseDigest(string(e.AccessCode)); err != nil {
			return fmt.Errorf("bad access_code: %w", err)
		}
	}
	return nil
}

// Entry is the buyer's entry the event carries.
func (e EntryEvent) Entry() BuyerEntry {
	return BuyerEntry{Entry: Entry{ID: e.EntryID, ItemID: e.ItemID, Quantity: e.Quantity}, ActivityID: e.ActivityID,
		UserID: e.UserID, CreatedAt: e.AcceptedAt}
}

// Written is what a write of entries (orderdb.Draws.WriteEntries) did with a batch of entries.
type Written struct {
	// New counts the entries written; Known the ones MySQL had (a buyer's
	// entry, published again by a retry); Late the ones refused because
	// the draw no longer took entries (drawn, or outside the sale's window
	// by MySQL's row of it).
	New, Known, Late int
	// CodeRefused counts the new entries whose presale code's use MySQL
	// refused (none left, or revoked meanwhile): they are written all the
	// same, holding the code, since Redis took the use and the buyer was
	// told 201 (ADR 7's costs).
	CodeRefused int
	// IsLate says, for each entry given, whether it was Late.
	IsLate []bool
}
