package reconcile

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Target is one item to check and the activities of it whose quota is
// checked.
type Target struct {
	ItemID     int64
	Activities []activity.Activity
	// Tag is the first item of the sale the item's keys are kept with
	// (activity.LatestTag): the item itself but for a size of a sale of
	// several items. 0 means ItemID.
	Tag int64
}

// item is where the target's keys are in Redis.
func (t Target) item() reservation.Item { return reservation.Item{ID: t.ItemID, Tag: t.Tag} }

// quotaOwner reports whether t checks a's quota keys: those of a sale of
// several items are checked once, with its first item, whose hash tag they
// share (every live order of the sale, whatever its item).
func (t Target) quotaOwner(a activity.Activity) bool { return a.ItemID == t.ItemID }

// Selection says which items to check. Empty: every item with an activity
// that has not ended or ended less than Checker.Window ago.
type Selection struct {
	Items, Activities []int64
}

// Targets resolves sel to the items to check, by item id.
func (c *Checker) Targets(ctx context.Context, sel Selection) ([]Target, error) {
	since := c.now().Add(-c.window())
	var acts []activity.Activity
	var items []int64
	if len(sel.Items) == 0 && len(sel.Activities) == 0 {
		a, err := c.DB.Activities(ctx, drift.ActivityFilter{EndsAfter: since})
		if err != nil {
			return nil, err
		}
		acts = a
	} else {
		if len(sel.Activities) > 0 {
			a, err := c.DB.Activities(ctx, drift.ActivityFilter{IDs: sel.Activities})
			if err != nil {
				return nil, err
			}
			for _, id := range sel.Activities {
				if !slices.ContainsFunc(a, func(x activity.Activity) bool { return x.ID == id }) {
					return nil, fmt.Errorf("activity %d: %w", id, order.ErrNotFound)
				}
			}
			acts = append(acts, a...)
		}
		if len(sel.Items) > 0 {
			// An item asked for that does not exist is the caller's
			// mistake, not an item whose check failed.
			for _, id := range sel.Items {
				if _, err := c.DB.Item(ctx, id); err != nil {
					return nil, fmt.Errorf("item %d: %w", id, err)
				}
			}
			a, err := c.DB.Activities(ctx, drift.ActivityFilter{Items: sel.Items})
			if err != nil {
				return nil, err
			}
			acts = append(acts, a...)
			items = append(items, sel.Items...)
		}
	}
	byItem := map[int64][]activity.Activity{}
	for _, id := range items {
		byItem[id] = nil
	}
	for _, a := range acts {
		for _, item := range a.ItemIDs() {
			if !slices.ContainsFunc(byItem[item], func(x activity.Activity) bool { return x.ID == a.ID }) {
				byItem[item] = append(byItem[item], a)
			}
		}
	}
	out := make([]Target, 0, len(byItem))
	for id, as := range byItem {
		sort.Slice(as, func(i, j int) bool { return as[i].ID < as[j].ID })
		out = append(out, Target{ItemID: id, Activities: as, Tag: activity.LatestTag(id, as)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ItemID < out[j].ItemID })
	return out, nil
}

// quotaChecked reports whether a's quota keys should still exist: the
// activity ended less than Window ago (the keys live order.KeyMargin past
// it: Activity.RecordsLiveUntil).
func (c *Checker) quotaChecked(a activity.Activity, now time.Time) bool {
	return a.EndsAt.Add(min(c.window(), order.KeyMargin)).After(now)
}

// buckets is the number of stock buckets the item's keys are laid out in
// when Redis lost them all: that of the sale that started last by now (the
// one selling, or the last that sold), else of the next to start; 1 for
// one stock key. Never an older sale's: its buckets would be dead keys that
// nobody sells from (docs/adr/0002-stock-buckets.md).
func buckets(t Target, now time.Time) int {
	if cur := current(t, now); cur != nil {
		return max(cur.StockBuckets, 1)
	}
	return 1
}

// current is the sale of t that started last by now, else the next to
// start; nil when t has none.
func current(t Target, now time.Time) *activity.Activity {
	var cur *activity.Activity
	for i := range t.Activities {
		a := &t.Activities[i]
		switch {
		case cur == nil:
			cur = a
		case !a.StartsAt.After(now) && (cur.StartsAt.After(now) || a.StartsAt.After(cur.StartsAt)):
			cur = a // started, and later than cur (or cur has not started)
		case a.StartsAt.After(now) && cur.StartsAt.After(now) && a.StartsAt.Before(cur.StartsAt):
			cur = a // neither started: the next one
		}
	}
	return cur
}

// started reports whether any of t's activities has started: a missing
// stock key is then a fault, not an item nobody warmed yet.
func started(t Target, now time.Time) bool {
	for _, a := range t.Activities {
		if !now.Before(a.StartsAt) {
			return true
		}
	}
	return len(t.Activities) == 0
}

// horizon is when the item's keys may expire: the latest KeysLiveUntil of
// its activities, and at least order.KeyMargin from now.
func (c *Checker) horizon(t Target, now time.Time) time.Time {
	h := now.Add(order.KeyMargin)
	for _, a := range t.Activities {
		if e := a.KeysLiveUntil(c.paymentWindow()); e.After(h) {
			h = e
		}
	}
	return h
}
