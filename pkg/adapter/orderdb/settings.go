package orderdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

// CreateSale is CreateActivity refusing, with activity.ErrSettingLocked, a
// sale whose bucket count contradicts the item's live keys: Redis's (g.Live)
// or those of another sale of the item laid out otherwise whose keys may
// still live; and, with order.ErrItemInAnotherSale, a sale whose window
// overlaps another sale of one of its items that is neither cancelled nor
// over at g.Now (activity.CheckOneOwner). It holds the items' rows locked
// meanwhile (itemSalesTx), so two such changes of one item happen one
// after the other. Nothing is written when it refuses.
func (s *Activities) CreateSale(ctx context.Context, a activity.Activity, g activity.KeyGuard) (activity.Activity, error) {
	return s.createActivity(ctx, a, &g)
}

// itemSalesTx is how a transaction that calls lockItemSales runs: READ
// COMMITTED, so the item's sales it reads once it holds the item's row are
// those every earlier holder committed (under REPEATABLE READ the read
// would come from a snapshot taken at the transaction's first read, maybe
// before the lock was granted, and miss a sale committed in between).
var itemSalesTx = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// lockItemSales locks item's row inside tx (every change of the bucket
// count, the grouping, the window or the items of the item's sales does, so
// they happen one at a time) and returns its sales other than except: those
// whose first item it is and those that list it among their items. tx runs
// with itemSalesTx.
func lockItemSales(tx *gorm.DB, item, except int64) (itemRow, []activity.Activity, error) {
	var it itemRow
	if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", item).Take(&it).Error; err != nil {
		return it, nil, err
	}
	var rows []activityRow
	if err := tx.Where("id <> ? AND (item_id = ? OR id IN (SELECT activity_id FROM activity_items WHERE item_id = ?))",
		except, item, item).Find(&rows).Error; err != nil {
		return it, nil, err
	}
	out := make([]activity.Activity, len(rows))
	for i, r := range rows {
		out[i] = r.activity()
	}
	return it, out, nil
}

// checkChange refuses, inside tx with the activity's row locked, a change
// that live keys depend on once the sale was warmed up
// (activity.KeyChange.CheckWarmed, with the warm-up MySQL recorded). A new
// bucket count or new items must also fit each item's other sales and
// Redis (g), with the items' rows locked; it returns the list prices of
// the items it locked.
func checkChange(tx *gorm.DB, row activityRow, ch activity.Patch) (map[int64]order.Money, error) {
	a, err := withItemsOne(tx, row.activity())
	if err != nil {
		return nil, err
	}
	k := activity.KeyChangeOf(a, ch.Change())
	if !k.Buckets && !k.LaterEnd && !k.Items {
		return nil, nil
	}
	var w struct{ WarmedAt *time.Time }
	if err := tx.Table("activities").Select("warmed_at").Where("id = ?", row.ID).Take(&w).Error; err != nil {
		return nil, err
	}
	if w.WarmedAt != nil {
		if err := k.CheckWarmed(*w.WarmedAt); err != nil {
			return nil, err
		}
	}
	if !k.Buckets && !k.Items {
		return nil, nil
	}
	if ch.Guard == nil {
		return nil, order.Errorf(activity.ErrSettingLocked, "stock_buckets and items can change only with a check of the items' keys")
	}
	buckets, items, tag := max(row.StockBuckets, 1), a.ItemIDs(), a.ItemID
	if ch.StockBuckets != nil {
		buckets = *ch.StockBuckets
	}
	if ch.Items != nil {
		items, tag = nil, ch.Items[0].ItemID
		for _, it := range ch.Items {
			items = append(items, it.ItemID)
		}
	}
	lists := map[int64]order.Money{}
	for _, item := range lockOrder(items) {
		it, others, err := lockItemSales(tx, item, row.ID)
		if err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return nil, order.Errorf(order.ErrNotFound, "item %d does not exist", item)
			}
			return nil, err
		}
		if err := ch.Guard.Check(item, tag, others, buckets); err != nil {
			return nil, fmt.Errorf("item %d: %w", item, err)
		}
		lists[item] = money(it.Price, it.Currency)
	}
	return lists, nil
}

// checkOwner refuses (order.ErrItemInAnotherSale), inside tx with the
// activity's row locked, a change of its window or items that leaves the
// sale, from starts to ends, overlapping another sale of one of its items
// that still owns it at now (activity.CheckOneOwner). It locks the items' rows
// in lockOrder, as a create of a sale of them does, so of two such changes
// of one item the second sees the first.
func checkOwner(tx *gorm.DB, row activityRow, ch activity.Patch, starts, ends, now time.Time) error {
	if ch.StartsAt == nil && ch.EndsAt == nil && ch.Items == nil {
		return nil
	}
	a, err := withItemsOne(tx, row.activity())
	if err != nil {
		return err
	}
	a.StartsAt, a.EndsAt = starts, ends
	if ch.Items != nil {
		a.Items = ch.Items
	}
	for _, item := range lockOrder(a.ItemIDs()) {
		_, others, err := lockItemSales(tx, item, row.ID)
		if err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return order.Errorf(order.ErrNotFound, "item %d does not exist", item)
			}
			return err
		}
		if err := activity.CheckOneOwner(a, item, others, now); err != nil {
			return err
		}
	}
	return nil
}

// keySettingsChange reports whether ch changes a setting the sale's keys
// are laid out or timed by (its bucket count, its items, its end):
// PatchActivity then records when (key_settings_changed_at, MySQL's
// clock), for KeySettingsChangedWithin.
func keySettingsChange(tx *gorm.DB, row activityRow, ch activity.Patch) (bool, error) {
	a, err := withItemsOne(tx, row.activity())
	return activity.KeyChangeOf(a, ch.Change()).Any(), err
}

// MarkWarmedAsOf records that activity a.ID was warmed up now from the copy
// a, if MySQL still holds a's end, bucket count and items (in one transaction with
// the row locked, so a PatchActivity either came before and is seen, or
// comes after and finds the sale warmed). It reports false, recording
// nothing, when the sale changed since the copy was read: its keys may be
// laid out or timed by the old settings, and a warm-up from a fresh copy
// (the consumer's schedule warms every sale without a record) sets them
// right.
func (s *Activities) MarkWarmedAsOf(ctx context.Context, a activity.Activity) (bool, error) {
	ok := false
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		row, err := lockActivity(tx, a.ID)
		if err != nil {
			return err
		}
		if !row.EndsAt.Equal(a.EndsAt) || max(row.StockBuckets, 1) != max(a.StockBuckets, 1) {
			return nil
		}
		now, err := withItemsOne(tx, row.activity())
		if err != nil {
			return err
		}
		if !slices.Equal(now.ItemIDs(), a.ItemIDs()) {
			return nil // its items changed: the warm-up loaded others
		}
		ok = true
		return tx.Table("activities").Where("id = ?", a.ID).Update("warmed_at", gorm.Expr("NOW(3)")).Error
	})
	return ok, wrap("mark activity warmed", err)
}

// KeySettingsChangedWithin reports whether the bucket count or the end of
// activity id changed less than d ago, by MySQL's clock: an instance may
// still hold a copy of the sale from before the change (for up to
// activity.SettingsGuard), and a warm-up from it would lay out or time the
// keys by the old settings.
func (s *Activities) KeySettingsChangedWithin(ctx context.Context, id int64, d time.Duration) (bool, error) {
	var r struct{ Recent bool }
	err := s.db(ctx).Raw(`SELECT COALESCE(key_settings_changed_at > NOW(3) - INTERVAL ? MICROSECOND, FALSE) AS recent
		FROM activities WHERE id = ?`, d.Microseconds(), id).Take(&r).Error
	return r.Recent, wrap("read activity", err)
}
