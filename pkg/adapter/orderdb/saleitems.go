package orderdb

import (
	"context"
	"slices"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

// saleItemRow is one item of a sale of several (0012).
type saleItemRow struct {
	ActivityID int64 `gorm:"primaryKey"`
	ItemID     int64 `gorm:"primaryKey"`
	Position   int
	Label      string
	SalePrice  *int64
	Currency   *string
}

func (saleItemRow) TableName() string { return "activity_items" }

// withItems fills in the items of acts from activity_items, in their
// positions; a sale without rows there (created with item_id alone) keeps
// the one item its row names, at its sale price.
func withItems(tx *gorm.DB, acts []activity.Activity) error {
	ids := make([]int64, len(acts))
	for i := range acts {
		ids[i] = acts[i].ID
		if len(acts[i].Items) == 0 {
			acts[i].Items = []activity.Item{{ItemID: acts[i].ItemID, SalePrice: acts[i].SalePrice}}
		}
	}
	byActivity := map[int64][]activity.Item{}
	for chunk := range slices.Chunk(ids, ListBatch) {
		var rows []saleItemRow
		if err := tx.Where("activity_id IN ?", chunk).Order("activity_id, position").Find(&rows).Error; err != nil {
			return err
		}
		for _, r := range rows {
			byActivity[r.ActivityID] = append(byActivity[r.ActivityID],
				activity.Item{ItemID: r.ItemID, Label: r.Label, SalePrice: money(r.SalePrice, r.Currency)})
		}
	}
	for i := range acts {
		if items, ok := byActivity[acts[i].ID]; ok {
			acts[i].Items = items
		}
	}
	return nil
}

// withItemsOne is withItems for one sale.
func withItemsOne(tx *gorm.DB, a activity.Activity) (activity.Activity, error) {
	acts := []activity.Activity{a}
	err := withItems(tx, acts)
	return acts[0], err
}

// labelled reports whether a lists its items with labels (created with
// items): those are written to activity_items.
func labelled(a activity.Activity) bool {
	return len(a.Items) > 0 && a.Items[0].Label != ""
}

// saleItemRows are the activity_items rows of sale a.
func saleItemRows(a activity.Activity) []saleItemRow {
	rows := make([]saleItemRow, len(a.Items))
	for i, it := range a.Items {
		price, currency := priceColumns(it.SalePrice)
		rows[i] = saleItemRow{ActivityID: a.ID, ItemID: it.ItemID, Position: i, Label: it.Label, SalePrice: price, Currency: currency}
	}
	return rows
}

// lockOrder is ids in the order their rows are locked: ascending, so two
// transactions locking items of overlapping sales never wait on each other
// in a cycle.
func lockOrder(ids []int64) []int64 {
	return slices.Sorted(slices.Values(ids))
}

// ItemTag is the first item of the item's latest sale (the item itself when
// it has none, or when that sale sells it alone): the hash tag its Redis
// keys are kept with. A sale that keeps an item's keys under another tag
// than its other sales can only be created once their keys have expired
// (activity.CheckLayout), so while any of the item's keys live, they are
// under this one.
func (s *Activities) ItemTag(ctx context.Context, item int64) (int64, error) {
	var tags []int64
	err := s.db(ctx).Raw(`SELECT item_id FROM activities
		WHERE item_id = ? OR id IN (SELECT activity_id FROM activity_items WHERE item_id = ?)
		ORDER BY id DESC LIMIT 1`, item, item).Scan(&tags).Error
	if err != nil {
		return 0, wrap("read the item's sales", err)
	}
	if len(tags) == 0 {
		return item, nil
	}
	return tags[0], nil
}

// priceItems gives each of items without a sale price its list price
// (lists, by item), refuses a sale price in another currency than its
// item's, and a sale whose items are priced in more than one currency.
func priceItems(items []activity.Item, lists map[int64]order.Money) error {
	for i, it := range items {
		listPrice := lists[it.ItemID]
		switch {
		case !it.SalePrice.Priced():
			items[i].SalePrice = listPrice
		case listPrice.Priced() && listPrice.Currency != it.SalePrice.Currency:
			return order.Errorf(order.ErrInvalidArgument, "the sale price of item %d must be in the item's currency %s", it.ItemID, listPrice.Currency)
		}
	}
	return activity.CheckCurrencies(items)
}
