package stockredis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/seckill/seckill/pkg/domain/reservation"
)

// member is item it's entry in the warmed-items set: its id, then
// "@<tag>" when it is not its own tag.
func member(it reservation.Item) string {
	if it.Own() {
		return strconv.FormatInt(it.ID, 10)
	}
	return strconv.FormatInt(it.ID, 10) + "@" + strconv.FormatInt(it.Tag, 10)
}

// parseMember reads member back; false for anything else.
func parseMember(m string) (reservation.Item, bool) {
	id, tag, grouped := strings.Cut(m, "@")
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return reservation.Item{}, false
	}
	if !grouped {
		return reservation.One(n), true
	}
	t, err := strconv.ParseInt(tag, 10, 64)
	if err != nil || t <= 0 {
		return reservation.Item{}, false
	}
	return reservation.In(t, n), true
}

// Keys names the keys of one item.
type Keys struct {
	prefix    string
	tag, item int64
}

// group is "<prefix>:{i<tag>}:", where the sale-wide keys (quota,
// idempotency records, reservations) are; built without fmt: every order
// names seven keys.
func (k Keys) group() string { return k.prefix + ":{i" + strconv.FormatInt(k.tag, 10) + "}:" }

// base is where the item's own keys are: group for the sale's first item
// (the layout of a sale of one item), "<group><item>:" for the others.
func (k Keys) base() string {
	if k.tag == k.item {
		return k.group()
	}
	return k.group() + strconv.FormatInt(k.item, 10) + ":"
}

// bucketTag is the hash tag of the item's bucket n: i<item>b<n>, with the
// sale's tag before it when the item is not its own tag.
func (k Keys) bucketTag(n int) string {
	if k.tag == k.item {
		return fmt.Sprintf("i%db%d", k.item, n)
	}
	return fmt.Sprintf("i%d.%db%d", k.tag, k.item, n)
}

// Stock is the units Redis may still sell.
func (k Keys) Stock() string { return k.base() + "stock" }

// Inflight is the sum of quantities in RESERVED or CLAIMED reservations.
func (k Keys) Inflight() string { return k.base() + "inflight" }

// Pending is the sorted set of unconfirmed order numbers by reserve time.
func (k Keys) Pending() string { return k.base() + "pending" }

// Reservation is the hash of one order's reservation (sale-wide: an order
// number is unique, and order.TagOf finds the tag from it).
func (k Keys) Reservation(orderNo string) string { return k.group() + "r:" + orderNo }

// Quota holds the order number that uses the user's quota in the activity,
// whichever of the sale's items it bought.
func (k Keys) Quota(activityID int64, userID string) string {
	return k.group() + "q:" + strconv.FormatInt(activityID, 10) + ":" + UserSegment(userID)
}

// Idem holds the order number the user's idempotency key produced, in any
// of the sale's items.
func (k Keys) Idem(userID, key string) string {
	return k.group() + "k:" + UserSegment(userID) + ":" + key
}

// quotaPattern matches every quota key of an activity (for SCAN).
func (k Keys) quotaPattern(activityID int64) string {
	return fmt.Sprintf("%sq:%d:*", k.group(), activityID)
}

// Keys returns the key names of item.
func (s *Store) Keys(item reservation.Item) Keys { return s.keys(item) }

// keys returns the key names of item.
func (c *core) keys(item reservation.Item) Keys {
	item = item.Tagged()
	return Keys{prefix: c.prefix, tag: item.Tag, item: item.ID}
}

func (c *core) itemsKey() string { return c.prefix + ":items" }

// Codes is the hash of the sale's presale codes (access.LoadedField and a
// field per usable code, see package access), in the sale's slot beside
// the reservations and quotas, so the reserve script uses a code in the
// same step as the stock and the quota.
func (k Keys) Codes(activityID int64) string {
	return k.group() + "codes:" + strconv.FormatInt(activityID, 10)
}
