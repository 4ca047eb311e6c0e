package activity

import (
	"unicode/utf8"

	"github.com/seckill/seckill/pkg/domain/order"
)

// Item is one item a sale sells: a size, a tier, a denomination.
type Item struct {
	ItemID int64
	// Label is what buyers see for it ("EU 42", "VIP"); empty for the item
	// of a sale created with item_id alone.
	Label string
	// SalePrice is its unit price in the sale (the item's price unless the
	// operator set another); zero when neither has one.
	SalePrice order.Money
}

// MaxItems bounds the items of one sale.
const MaxItems = 100

// MaxLabelLength bounds a SaleItem's Label, in characters.
const MaxLabelLength = 40

// NewItem is one entry of a sale's items as the operator gives it.
type NewItem struct {
	ItemID int64
	Label  string
	// SalePrice is nil when the operator gave none.
	SalePrice *order.Money
}

// CheckItems refuses (ErrInvalidArgument) a list of items a sale
// cannot sell: none or more than MaxSaleItems, an item id that is not
// positive or comes twice, a label of no or more than MaxLabelLength
// characters. That the items exist, and that a priced sale's items share
// one currency, is checked where their prices are known (CheckCurrencies).
func CheckItems(items []NewItem) error {
	if len(items) < 1 || len(items) > MaxItems {
		return order.Errorf(order.ErrInvalidArgument, "items must list from 1 to %d items", MaxItems)
	}
	seen := make(map[int64]bool, len(items))
	for i, it := range items {
		switch {
		case it.ItemID <= 0:
			return order.Errorf(order.ErrInvalidArgument, "items[%d].item_id must be a positive integer", i)
		case seen[it.ItemID]:
			return order.Errorf(order.ErrInvalidArgument, "items[%d].item_id %d is listed twice: a sale lists each item once", i, it.ItemID)
		case it.Label == "" || utf8.RuneCountInString(it.Label) > MaxLabelLength || !utf8.ValidString(it.Label):
			return order.Errorf(order.ErrInvalidArgument, "items[%d].label must be 1-%d characters", i, MaxLabelLength)
		}
		seen[it.ItemID] = true
	}
	return nil
}

// CheckCurrencies refuses (ErrInvalidArgument) a sale whose priced items
// are in more than one currency, or whose items are priced and unpriced
// at once: one order's amount, and the sale's total, are in one currency.
func CheckCurrencies(items []Item) error {
	var currency string
	priced := 0
	for _, it := range items {
		if !it.SalePrice.Priced() {
			continue
		}
		priced++
		if currency == "" {
			currency = it.SalePrice.Currency
		} else if it.SalePrice.Currency != currency {
			return order.Errorf(order.ErrInvalidArgument, "every item of a priced sale has the same currency: item %d is in %s, another in %s",
				it.ItemID, it.SalePrice.Currency, currency)
		}
	}
	if priced > 0 && priced < len(items) {
		return order.Errorf(order.ErrInvalidArgument, "a priced sale has a price for every item: give sale_price for the items without one")
	}
	return nil
}

// Sized reports whether the sale sells more than one item: an order then
// names the one it buys.
func (a Activity) Sized() bool { return len(a.Items) > 1 }

// Item returns the sale's item id, and false when the sale does not sell it.
func (a Activity) Item(id int64) (Item, bool) {
	for _, it := range a.Items {
		if it.ItemID == id {
			return it, true
		}
	}
	if len(a.Items) == 0 && id == a.ItemID {
		return Item{ItemID: a.ItemID, SalePrice: a.SalePrice}, true
	}
	return Item{}, false
}

// ItemIDs lists the sale's items, the first (ItemID) first.
func (a Activity) ItemIDs() []int64 {
	if len(a.Items) == 0 {
		return []int64{a.ItemID}
	}
	ids := make([]int64, len(a.Items))
	for i, it := range a.Items {
		ids[i] = it.ItemID
	}
	return ids
}

// LatestTag is the hash tag of item's keys given acts, the sales of one
// item: the first item of the one created last (largest id); item when acts
// is empty (orderdb's Activities.ItemTag reads the same from MySQL).
func LatestTag(item int64, acts []Activity) int64 {
	var last *Activity
	for i := range acts {
		if last == nil || acts[i].ID > last.ID {
			last = &acts[i]
		}
	}
	if last == nil {
		return item
	}
	return last.ItemID
}

// ChooseItem returns the item an order of the sale buys: id, or, when id is
// 0, the sale's only item. ErrInvalidArgument when id is 0 for a sale of
// several items or names an item the sale does not sell.
func (a Activity) ChooseItem(id int64) (Item, error) {
	if id == 0 {
		if a.Sized() {
			return Item{}, order.Errorf(order.ErrInvalidArgument, "item_id is required: the sale sells %d items (its sizes)", len(a.Items))
		}
		id = a.ItemID
	}
	it, ok := a.Item(id)
	if !ok {
		return Item{}, order.Errorf(order.ErrInvalidArgument, "item %d is not sold in sale %d", id, a.ID)
	}
	return it, nil
}

// Product is an item with its stock in MySQL.
type Product struct {
	ID    int64
	Name  string
	Stock int64
	// Price is the item's list price; zero when it has none.
	Price order.Money
}

// Restock is units added to an item, recorded under its idempotency key.
type Restock struct {
	ID       int64
	ItemID   int64
	Key      string
	Quantity int64
	// Applied: Redis has the units too (the restock's Redis step added
	// them, or a warm-up's figure included them).
	Applied bool
}
