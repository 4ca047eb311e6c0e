package activity

import (
	"errors"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// ErrItemInAnotherActivity: a sale's window overlaps that of another sale of
// one of its items that is neither cancelled nor over. One sale owns an
// item at a time: a waiting room admits, and a draw picks winners, for the
// stock it counts as its own, and a sibling sale selling the same units
// would leave an admitted buyer or a winner without one.
var ErrItemInAnotherActivity = errors.New("item in another sale")

// Overlaps reports whether a's window [StartsAt, EndsAt) and o's share an
// instant: windows that only touch (one ends when the other starts) do not.
func (a Activity) Overlaps(o Activity) bool {
	return a.StartsAt.Before(o.EndsAt) && o.StartsAt.Before(a.EndsAt)
}

// Owns reports whether a holds its items at now against another sale:
// neither cancelled nor over (a sale that ended, by its end or an
// operator's, gives its items up).
func (a Activity) Owns(now time.Time) bool {
	return a.CancelledAt.IsZero() && a.EndsAt.After(now)
}

// CheckOneOwner refuses (ErrItemInAnotherSale) sale a, which sells item,
// when its window overlaps that of one of others (the item's other sales;
// a itself, by id, is skipped) that still owns the item at now. The
// message names the other sale and the item.
func CheckOneOwner(a Activity, item int64, others []Activity, now time.Time) error {
	for _, o := range others {
		if a.ID != 0 && o.ID == a.ID || !o.Owns(now) || !a.Overlaps(o) {
			continue
		}
		return order.Errorf(ErrItemInAnotherActivity,
			"item %d is in sale %d from %s to %s, which overlaps this sale's window (%s to %s): one sale sells an item at a time; move this window clear of sale %d's, or change or end sale %d",
			item, o.ID, stamp(o.StartsAt), stamp(o.EndsAt), stamp(a.StartsAt), stamp(a.EndsAt), o.ID, o.ID)
	}
	return nil
}

// stamp is t as an operator reads it in a message.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
