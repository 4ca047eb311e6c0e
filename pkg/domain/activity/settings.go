package activity

import (
	"errors"
	"strconv"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// ErrSettingLocked: a sale setting that live Redis keys depend on (the
// bucket count, the times the keys' lifetimes were computed from) cannot
// change now, or a change would come too close to the start for every
// instance to see it (SettingsGuard).
var ErrSettingLocked = errors.New("setting locked")

// SettingsGuard is how long before a sale starts its settings stop
// changing: an instance may answer from a copy of the sale as old as
// ActivityTTL, and a re-read of it may take ActivityReloadTimeout, so a
// change made later than this before the start could still be unseen by
// some instance when the sale opens.
const SettingsGuard = CopyTTL + ReloadTimeout

// Layout is the shape an item's stock has in Redis: how many stock keys
// it is split over (1: one stock key; 0: no stock key lives).
type Layout int

// LayoutOf is the layout a sale lays its item's stock out in.
func LayoutOf(a Activity) Layout { return Layout(max(a.StockBuckets, 1)) }

// KeySpace is where a sale keeps one item's keys in Redis: under the hash
// tag of its first item (Tag; the item's own for a sale of one item), its
// stock split over Buckets keys.
type KeySpace struct {
	Item, Tag int64
	Buckets   int
}

// CheckLayout refuses a sale that keeps item k.Item in k while other
// sales' keys of the item, laid out otherwise or under another tag, may
// still live (others, each with its end of key life): an item's keys stay
// in one place and one shape while they live
// (docs/adr/0002-stock-buckets.md, docs/adr/0004-sale-items.md). live is
// the layout Redis holds now under k.Tag (0: none), read before; until nil
// counts every other sale's keys as living.
func CheckLayout(k KeySpace, live Layout, others []Activity, until func(Activity) time.Time, now time.Time) error {
	want := Layout(max(k.Buckets, 1))
	if live != 0 && live != want {
		return order.Errorf(ErrSettingLocked, "the item's stock lives in Redis in %s: a sale with stock_buckets %d needs those keys gone first",
			live, want)
	}
	for _, o := range others {
		sameTag := o.ItemID == k.Tag
		if LayoutOf(o) == want && sameTag {
			continue
		}
		what := "uses stock_buckets " + strconv.Itoa(int(LayoutOf(o)))
		if !sameTag {
			what = "keeps its keys with item " + strconv.FormatInt(o.ItemID, 10) + " (its first item)"
		}
		if until == nil {
			return order.Errorf(ErrSettingLocked, "activity %d of the item %s and its keys' life is not known", o.ID, what)
		}
		if end := until(o); end.After(now) {
			if !sameTag {
				return order.Errorf(ErrSettingLocked, "activity %d of item %d %s and its Redis keys may live until %s: a sale that lists item %d first must wait until then, or list item %d first",
					o.ID, k.Item, what, end.UTC().Format(time.RFC3339), k.Tag, o.ItemID)
			}
			return order.Errorf(ErrSettingLocked, "activity %d of the item %s and its Redis keys may live until %s: a sale of the item with stock_buckets %d must wait until then",
				o.ID, what, end.UTC().Format(time.RFC3339), want)
		}
	}
	return nil
}

// String says the layout as an operator reads it.
func (l Layout) String() string {
	switch l {
	case 0:
		return "no stock key"
	case 1:
		return "one stock key"
	}
	return strconv.Itoa(int(l)) + " stock buckets"
}

// KeyGuard is what a change to an item's sales is checked against: the
// settings live Redis keys depend on stay as the keys have them
// (CheckLayout; docs/adr/0002-stock-buckets.md).
type KeyGuard struct {
	// Live is each item's stock layout in Redis (where the sale's keys of
	// it are), read by the caller just before (missing or 0: no stock key).
	// The check in MySQL covers the keys that Redis lost or that a warm-up
	// is about to write.
	Live map[int64]Layout
	// KeysUntil is how long a sale's keys may live
	// (Activity.KeysLiveUntil with the API's payment window).
	KeysUntil func(Activity) time.Time
	// Now is the time the sales' key lives are compared with.
	Now time.Time
}

// Check checks that item of a sale whose first item is tag, laid out in
// buckets keys, contradicts no live keys: Redis's (g.Live) or other
// sales' of the item (others), read while the item's sales cannot change.
func (g *KeyGuard) Check(item, tag int64, others []Activity, buckets int) error {
	return CheckLayout(KeySpace{Item: item, Tag: tag, Buckets: buckets}, g.Live[item], others, g.KeysUntil, g.Now)
}
