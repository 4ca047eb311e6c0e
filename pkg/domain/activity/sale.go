package activity

import (
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Draft is a sale as an operator asks for it, before anything is
// written: nil for a setting left out.
type Draft struct {
	// ItemID is a sale of one item; Items one of several. One of the two.
	ItemID           int64
	Items            []NewItem
	StartsAt, EndsAt time.Time
	// PerUserLimit defaults to 1.
	PerUserLimit *int
	// PaymentWindowSeconds defaults to none of its own (the programs'
	// window, SECKILL_PAYMENT_WINDOW).
	PaymentWindowSeconds *int
	// StockBuckets defaults to 1 (one stock key).
	StockBuckets *int
	// Access is the sale's access as given ("": access.Open), read with
	// access.ParseMode; whether the sale may have it (a room for
	// code_priority) is Activity.CheckAccess's, once the room is set.
	Access string
}

// Activity returns the sale n asks for, or the first thing wrong with it
// (an *Error of ErrInvalidArgument, its message naming the API's field):
// a positive item id or a list of items (CheckSaleItems), both times, ends_at after starts_at, the per-user
// limit, payment window and bucket count within their bounds, and times
// within the range of CheckSaleTimes, now being the shared clock's time.
// Its prices are the caller's to set (OptionalPrice, and each of Items's):
// they may need the items.
func (n Draft) Activity(now time.Time) (Activity, error) {
	a := Activity{ItemID: n.ItemID, StartsAt: n.StartsAt, EndsAt: n.EndsAt, PerUserLimit: 1, StockBuckets: 1}
	if n.PerUserLimit != nil {
		a.PerUserLimit = *n.PerUserLimit
	}
	if n.StockBuckets != nil {
		a.StockBuckets = *n.StockBuckets
	}
	w := n.PaymentWindowSeconds
	mode, err := access.ParseMode(n.Access)
	if err != nil {
		return Activity{}, err
	}
	a.Access = mode
	switch {
	case n.ItemID != 0 && n.Items != nil:
		return Activity{}, order.Errorf(order.ErrInvalidArgument, "give item_id (a sale of one item) or items (a sale of several), not both")
	case n.Items != nil:
		if err := CheckItems(n.Items); err != nil {
			return Activity{}, err
		}
		a.ItemID = n.Items[0].ItemID
		a.Items = make([]Item, len(n.Items))
		for i, it := range n.Items {
			a.Items[i] = Item{ItemID: it.ItemID, Label: it.Label}
		}
	case n.ItemID <= 0:
		return Activity{}, order.Errorf(order.ErrInvalidArgument, "item_id must be a positive integer")
	default:
		a.Items = []Item{{ItemID: n.ItemID}}
	}
	switch {
	case n.StartsAt.IsZero() || n.EndsAt.IsZero():
		return Activity{}, order.Errorf(order.ErrInvalidArgument, "starts_at and ends_at are required (RFC 3339)")
	case !n.EndsAt.After(n.StartsAt):
		return Activity{}, order.Errorf(order.ErrInvalidArgument, "ends_at must be after starts_at")
	}
	if err := checkPerUserLimit(a.PerUserLimit); err != nil {
		return Activity{}, err
	}
	if w != nil && (*w < 1 || *w > int(MaxPaymentWindow/time.Second)) {
		return Activity{}, order.Errorf(order.ErrInvalidArgument, "payment_window_seconds must be from 1 to %d", int(MaxPaymentWindow/time.Second))
	}
	if err := checkStockBuckets(a.StockBuckets); err != nil {
		return Activity{}, err
	}
	// Within the range every key lifetime computed from them stays exact.
	if err := CheckTimes(n.StartsAt, n.EndsAt, now); err != nil {
		return Activity{}, err
	}
	if w != nil {
		a.PaymentWindow = time.Duration(*w) * time.Second
	}
	return a, nil
}

// CheckQuantity refuses (ErrInvalidArgument) an order of q units the sale
// does not take: fewer than one, more than its per-user limit or than
// MaxQuantity.
func (a Activity) CheckQuantity(q int) error {
	if q < 1 || q > a.PerUserLimit || q > order.MaxQuantity {
		return order.Errorf(order.ErrInvalidArgument, "quantity must be from 1 to %d", a.PerUserLimit)
	}
	return nil
}

// Change is what an operator asks to change of a sale that has not
// started: nil fields stay.
type Change struct {
	StartsAt, EndsAt *time.Time
	PerUserLimit     *int
	StockBuckets     *int
	// Items replaces the sale's items (CheckSaleItems); nil keeps them.
	Items []NewItem
	// Room is true when the change sets the sale's waiting room (checked
	// by NewWaitingRoom and Activity.CheckRoom).
	Room bool
	// Access is the sale's new access (access.ParseMode'd); nil keeps it.
	// code_priority needs the room the sale has or the change gives it
	// (Activity.CheckAccess, with the row locked).
	Access *access.Mode
}

// Check refuses (ErrInvalidArgument) a change of nothing, or one whose
// per-user limit or bucket count is out of bounds. The times are checked
// against the sale's others when it is read (CheckSaleTimes), and whether
// the sale may still change by CheckChangeable.
func (c Change) Check() error {
	if c.StartsAt == nil && c.EndsAt == nil && c.PerUserLimit == nil && c.StockBuckets == nil && c.Items == nil && !c.Room && c.Access == nil {
		return order.Errorf(order.ErrInvalidArgument, "give at least one of starts_at, ends_at, per_user_limit, stock_buckets, items, waiting_room, access")
	}
	if c.Items != nil {
		if err := CheckItems(c.Items); err != nil {
			return err
		}
	}
	if c.StockBuckets != nil {
		if err := checkStockBuckets(*c.StockBuckets); err != nil {
			return err
		}
	}
	if c.PerUserLimit != nil {
		return checkPerUserLimit(*c.PerUserLimit)
	}
	return nil
}

// CheckChangeable refuses (ErrActivityStarted) a change of a sale that
// starts at starts, at now or later than SettingsGuard before it: every
// instance must see a change before the sale opens.
func CheckChangeable(starts, now time.Time) error {
	if !now.Before(starts.Add(-SettingsGuard)) {
		return order.Errorf(order.ErrActivityStarted, "the sale starts at %s: its settings can no longer change (not later than %s before the start, so that every instance sees the change)",
			starts.UTC().Format(time.RFC3339Nano), SettingsGuard)
	}
	return nil
}

// RoomGuard is how long before its start a sale must have its waiting
// room: an instance sells from a copy of the sale up to ActivityMaxStale
// old (and every instance stops changing at SettingsGuard), so a room set
// later could still be unknown to an instance when the sale opens, and
// that instance would take orders without admissions.
const RoomGuard = MaxStale + SettingsGuard

// CheckRoomInTime refuses (ErrSettingLocked) a change that leaves a sale
// with a waiting room and could reach some instance only after the sale
// opens: a room added (hadRoom false) to a sale that starts at starts less
// than RoomGuard after now, or the start of a sale with a room moved
// earlier (from oldStarts) to less than RoomGuard after now. (A start moved
// later keeps the room as far ahead of it as the room's own change was.)
func CheckRoomInTime(hadRoom, hasRoom bool, oldStarts, starts, now time.Time) error {
	if !hasRoom || (hadRoom && !starts.Before(oldStarts)) || !now.After(starts.Add(-RoomGuard)) {
		return nil
	}
	what := "a waiting room can be added"
	if hadRoom {
		what = "the start of a sale with a waiting room can move earlier"
	}
	return order.Errorf(ErrSettingLocked, "%s only while the sale starts more than %s later (at %s: an instance may sell from a copy of the sale up to %s old, and must know the room before the sale opens)",
		what, RoomGuard, now.Add(RoomGuard).UTC().Format(time.RFC3339), MaxStale)
}

func checkPerUserLimit(n int) error {
	if n < 1 || n > order.MaxQuantity {
		return order.Errorf(order.ErrInvalidArgument, "per_user_limit must be from 1 to %d", order.MaxQuantity)
	}
	return nil
}

func checkStockBuckets(n int) error {
	if n < 1 || n > MaxStockBuckets {
		return order.Errorf(order.ErrInvalidArgument, "stock_buckets must be from 1 to %d", MaxStockBuckets)
	}
	return nil
}

// KeyChange is what a change of a sale touches of the settings its Redis
// keys are laid out and timed by.
type KeyChange struct {
	// Buckets: another bucket count.
	Buckets bool
	// Items: other items (their keys are laid out under the first's tag).
	Items bool
	// End: another end; LaterEnd: a later one (the keys' lifetimes were
	// computed from the end they have).
	End, LaterEnd bool
}

// Any reports whether the change touches a key setting: instances holding
// an older copy would lay out or time keys by the old ones.
func (k KeyChange) Any() bool { return k.Buckets || k.End || k.Items }

// KeyChangeOf is what c changes of a's key settings.
func KeyChangeOf(a Activity, c Change) KeyChange {
	return KeyChange{
		Buckets:  c.StockBuckets != nil && *c.StockBuckets != max(a.StockBuckets, 1),
		Items:    c.Items != nil && !sameItems(a, c.Items),
		End:      c.EndsAt != nil && !c.EndsAt.Equal(a.EndsAt),
		LaterEnd: c.EndsAt != nil && c.EndsAt.After(a.EndsAt),
	}
}

// CheckWarmed refuses (ErrSettingLocked) a change of a sale whose stock
// was loaded into Redis at warmedAt (zero: not loaded) that live keys
// depend on: another bucket count, other items, or a later end (an
// earlier end only leaves the keys living longer than needed).
func (k KeyChange) CheckWarmed(warmedAt time.Time) error {
	if warmedAt.IsZero() || (!k.Buckets && !k.LaterEnd && !k.Items) {
		return nil
	}
	what := "stock_buckets"
	switch {
	case k.Items:
		what = "items"
	case !k.Buckets:
		what = "a later ends_at"
	}
	return order.Errorf(ErrSettingLocked,
		"the sale's stock was loaded into Redis at %s with keys laid out and timed by its current settings: %s cannot be set now (end this sale and create another)",
		warmedAt.UTC().Format(time.RFC3339), what)
}

// sameItems reports whether items list a's items, in its order, with its
// labels (prices aside: a change of price alone is no change of keys).
func sameItems(a Activity, items []NewItem) bool {
	if len(items) != len(a.Items) {
		return false
	}
	for i, it := range items {
		if it.ItemID != a.Items[i].ItemID || it.Label != a.Items[i].Label {
			return false
		}
	}
	return true
}

// Patch is what a change to a stored sale may change; nil fields stay.
type Patch struct {
	StartsAt, EndsAt *time.Time
	PerUserLimit     *int
	StockBuckets     *int
	// Items replaces the sale's items (labelled, each with the sale price
	// the operator gave, if any; the item's own otherwise); nil keeps them.
	Items []Item
	// Guard checks a new StockBuckets or Items against the items' live
	// keys; required with either.
	Guard *KeyGuard
	// Room sets the sale's waiting room: a room it has keeps its seed and
	// key (the seed's commitment is public), a new one takes Room's.
	Room *WaitingRoom
	// PaymentWindow is the programs' payment window, a sale's without its
	// own: a draw's close must leave it before the end
	// (Activity.CheckDraw).
	PaymentWindow time.Duration
	// Access is the sale's new access; nil keeps it.
	Access *access.Mode
}

// Change is the patch as the rules read it.
func (p Patch) Change() Change {
	c := Change{StartsAt: p.StartsAt, EndsAt: p.EndsAt, PerUserLimit: p.PerUserLimit, StockBuckets: p.StockBuckets, Access: p.Access}
	if p.Items != nil {
		c.Items = make([]NewItem, len(p.Items))
		for i, it := range p.Items {
			c.Items[i] = NewItem{ItemID: it.ItemID, Label: it.Label}
		}
	}
	return c
}
