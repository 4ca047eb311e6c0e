package activity

import "time"

// Action is what an operator did to a sale.
type Action string

// The operator actions the audit records.
const (
	// ActionRoomControl is a change of the room's live control
	// (RoomControl); its detail is the room's control after it.
	ActionRoomControl Action = "room.control"
	// ActionEnd and ActionCancel end the sale now (EndNow, CancelNow).
	ActionEnd    Action = "sale.end"
	ActionCancel Action = "sale.cancel"
	// ActionCodesAdd is a batch of presale codes generated or imported;
	// its detail counts them (never the codes).
	ActionCodesAdd Action = "codes.add"
	// ActionCodesRevoke is one code revoked; its detail has the code's
	// digest, not the code.
	ActionCodesRevoke Action = "codes.revoke"
)

// AuditEntry is one operator action on a sale, recorded in the transaction
// of the action itself: there is an entry exactly when the action took
// effect.
type AuditEntry struct {
	// ID orders the entries of every sale (a later entry has a higher one).
	ID         int64
	ActivityID int64
	Action     Action
	// Subject is the operator's token's subject.
	Subject string
	// Detail is the action's values, as a JSON object.
	Detail string
	At     time.Time
}

// MaxAuditPage is the most entries one read of a sale's audit returns.
const MaxAuditPage = 200
