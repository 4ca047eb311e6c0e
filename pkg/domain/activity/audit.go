package activity

import (
	"encoding/json"
	"time"
)

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
	// ActionCreate is the sale's creation, ActionChange a change of its
	// settings before the start, ActionWarmup an operator's warm-up; their
	// detail is the sale's settings after it (SettingsDetail).
	ActionCreate Action = "sale.create"
	ActionChange Action = "sale.change"
	ActionWarmup Action = "sale.warmup"
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

// settingsDetail is a sale's settings as the audit records them.
type settingsDetail struct {
	StartsAt       time.Time `json:"starts_at"`
	EndsAt         time.Time `json:"ends_at"`
	Items          []int64   `json:"items"`
	PerUserLimit   int       `json:"per_user_limit"`
	StockBuckets   int       `json:"stock_buckets"`
	PaymentWindow  int       `json:"payment_window_seconds,omitempty"`
	Mode           string    `json:"mode"`
	EntriesCloseAt time.Time `json:"entries_close_at,omitzero"`
	Access         string    `json:"access"`
	AdmitPerSecond int       `json:"admit_per_second,omitempty"`
}

// SettingsDetail is a's settings as an audit entry's detail (a JSON
// object): its window, items, limits, how it sells, whom it takes.
func (a Activity) SettingsDetail() string {
	d := settingsDetail{StartsAt: a.StartsAt.UTC(), EndsAt: a.EndsAt.UTC(), PerUserLimit: a.PerUserLimit,
		StockBuckets: max(a.StockBuckets, 1), PaymentWindow: int(a.PaymentWindow / time.Second),
		Mode: a.Mode(), Access: string(a.AccessMode()), AdmitPerSecond: a.Room.AdmitPerSecond}
	for _, it := range a.Items {
		d.Items = append(d.Items, it.ItemID)
	}
	if len(d.Items) == 0 {
		d.Items = []int64{a.ItemID}
	}
	if a.Draw.On() {
		d.EntriesCloseAt = a.Draw.EntriesCloseAt.UTC()
	}
	b, err := json.Marshal(d)
	if err != nil {
		return "{}"
	}
	return string(b)
}
