package orderdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

type itemRow struct {
	ID        int64 `gorm:"primaryKey"`
	Name      string
	Price     *int64
	Currency  *string
	CreatedAt time.Time
}

func (itemRow) TableName() string { return "items" }

type stockRow struct {
	ItemID    int64 `gorm:"primaryKey"`
	Stock     int64
	UpdatedAt time.Time
}

func (stockRow) TableName() string { return "item_stock" }

type activityRow struct {
	ID                   int64 `gorm:"primaryKey"`
	ItemID               int64
	StartsAt             time.Time
	EndsAt               time.Time
	PerUserLimit         int
	PaymentWindowSeconds *int
	StockBuckets         int
	SalePrice            *int64
	Currency             *string
	CancelledAt          *time.Time
	// Access is the sale's access.Mode (0022).
	Access    string
	CreatedAt time.Time
}

func (activityRow) TableName() string { return "activities" }

// priceColumns is a price as two nullable columns (amount, currency).
func priceColumns(m order.Money) (*int64, *string) {
	if !m.Priced() {
		return nil, nil
	}
	return &m.Amount, &m.Currency
}

// money reads two nullable price columns back; NULL is no price.
func money(amount *int64, currency *string) order.Money {
	if amount == nil || currency == nil {
		return order.Money{}
	}
	return order.Money{Amount: *amount, Currency: *currency}
}

// CreateItem inserts an item without a price and its stock row.
func (s *Activities) CreateItem(ctx context.Context, name string, stock int64) (activity.Product, error) {
	return s.CreatePricedItem(ctx, name, stock, order.Money{})
}

// CreatePricedItem inserts an item with its price (zero for none) and its
// stock row, in one transaction.
func (s *Activities) CreatePricedItem(ctx context.Context, name string, stock int64, price order.Money) (activity.Product, error) {
	row := itemRow{Name: name}
	row.Price, row.Currency = priceColumns(price)
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		return tx.Create(&stockRow{ItemID: row.ID, Stock: stock}).Error
	})
	if err != nil {
		return activity.Product{}, wrap("create item", err)
	}
	return activity.Product{ID: row.ID, Name: name, Stock: stock, Price: price}, nil
}

// Item returns one item with its MySQL stock, order.ErrNotFound if none.
func (s *Activities) Item(ctx context.Context, id int64) (activity.Product, error) {
	var row struct {
		ID       int64
		Name     string
		Price    *int64
		Currency *string
		Stock    int64
	}
	err := s.db(ctx).Table("items").Select("items.id, items.name, items.price, items.currency, item_stock.stock").
		Joins("JOIN item_stock ON item_stock.item_id = items.id").Where("items.id = ?", id).Take(&row).Error
	if err != nil {
		return activity.Product{}, wrap("read item", err)
	}
	return activity.Product{ID: row.ID, Name: row.Name, Stock: row.Stock, Price: money(row.Price, row.Currency)}, nil
}

// ItemStock returns the item's MySQL stock, order.ErrNotFound if none.
func (s *Activities) ItemStock(ctx context.Context, itemID int64) (int64, error) {
	var row stockRow
	err := s.db(ctx).Where("item_id = ?", itemID).Take(&row).Error
	if err != nil {
		return 0, wrap("read stock", err)
	}
	return row.Stock, nil
}

// SetItemStock overwrites an item's MySQL stock (operators and tests).
func (s *Activities) SetItemStock(ctx context.Context, itemID, stock int64) error {
	res := s.db(ctx).Model(&stockRow{}).Where("item_id = ?", itemID).Update("stock", stock)
	if res.Error != nil {
		return wrap("set stock", res.Error)
	}
	if res.RowsAffected == 0 {
		return order.ErrNotFound
	}
	return nil
}

// CreateActivity inserts an activity for an existing item. A sale without
// a price of its own sells at the item's price (none when the item has
// none); a sale price must be in the item's currency when the item has one.
func (s *Activities) CreateActivity(ctx context.Context, a activity.Activity) (activity.Activity, error) {
	return s.createActivity(ctx, a, nil)
}

// createActivity is CreateActivity, checked against g unless it is nil
// (CreateSale).
func (s *Activities) createActivity(ctx context.Context, a activity.Activity, g *activity.KeyGuard) (activity.Activity, error) {
	row := activityRow{ItemID: a.ItemID, StartsAt: a.StartsAt.UTC(), EndsAt: a.EndsAt.UTC(), PerUserLimit: a.PerUserLimit,
		StockBuckets: max(a.StockBuckets, 1), Access: string(a.AccessMode())}
	if a.PaymentWindow > 0 {
		s := int(a.PaymentWindow / time.Second)
		row.PaymentWindowSeconds = &s
	}
	if !labelled(a) {
		a.Items = []activity.Item{{ItemID: a.ItemID, SalePrice: a.SalePrice}}
	}
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		lists, othersOf := map[int64]order.Money{}, map[int64][]activity.Activity{}
		for _, item := range lockOrder(a.ItemIDs()) {
			it, others, err := lockItemSales(tx, item, 0)
			if err != nil {
				if errors.Is(err, gorm.ErrRecordNotFound) {
					return order.Errorf(order.ErrNotFound, "item %d does not exist", item)
				}
				return err
			}
			lists[item], othersOf[item] = money(it.Price, it.Currency), others
		}
		if err := priceItems(a.Items, lists); err != nil {
			return err
		}
		if g != nil {
			for _, item := range lockOrder(a.ItemIDs()) {
				if err := activity.CheckOneOwner(a, item, othersOf[item], g.Now); err != nil {
					return err
				}
			}
			for _, item := range lockOrder(a.ItemIDs()) {
				if err := g.Check(item, a.ItemID, othersOf[item], row.StockBuckets); err != nil {
					return fmt.Errorf("item %d: %w", item, err)
				}
			}
		}
		a.SalePrice = a.Items[0].SalePrice
		row.SalePrice, row.Currency = priceColumns(a.SalePrice)
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		a.ID = row.ID
		if a.Room.On() {
			if err := tx.Create(ptr(newRoomRow(a.ID, a.Room))).Error; err != nil {
				return err
			}
		}
		if a.Draw.On() {
			if err := createDraw(tx, a.ID, a.Draw); err != nil {
				return err
			}
		}
		if !labelled(a) {
			return nil
		}
		return tx.Create(saleItemRows(a)).Error
	}, itemSalesTx)
	if err != nil {
		return activity.Activity{}, wrap("create activity", err)
	}
	a.ID, a.StockBuckets = row.ID, row.StockBuckets
	return a, nil
}

// Activity returns one activity, order.ErrNotFound if none.
func (s *Activities) Activity(ctx context.Context, id int64) (activity.Activity, error) {
	// With its room and its first item's name in the same query: a sale
	// page reads the sale every second, in two queries (this and its items).
	var row activityRoomRow
	tx := s.db(ctx)
	err := tx.Table("activities").Select("activities.*, items.name AS item_name, "+roomColumns+", "+drawSelect).
		Joins("JOIN items ON items.id = activities.item_id").
		Joins("LEFT JOIN activity_rooms ON activity_rooms.activity_id = activities.id").
		Joins("LEFT JOIN activity_draws ON activity_draws.activity_id = activities.id").
		Where("activities.id = ?", id).Take(&row).Error
	if err != nil {
		return activity.Activity{}, wrap("read activity", err)
	}
	a := row.Activity.activity()
	a.Name = row.ItemName
	if row.Room.AdmitPerSecond > 0 {
		a.Room = row.Room.room()
	}
	a.Draw = row.Draw.draw()
	a, err = withItemsOne(tx, a)
	return a, wrap("read activity", err)
}

func (row activityRow) activity() activity.Activity {
	a := activity.Activity{ID: row.ID, ItemID: row.ItemID, StartsAt: row.StartsAt, EndsAt: row.EndsAt, PerUserLimit: row.PerUserLimit,
		StockBuckets: max(row.StockBuckets, 1), SalePrice: money(row.SalePrice, row.Currency), Access: access.Mode(row.Access)}
	if a.Access == "" {
		a.Access = access.Open
	}
	if row.PaymentWindowSeconds != nil {
		a.PaymentWindow = time.Duration(*row.PaymentWindowSeconds) * time.Second
	}
	if row.CancelledAt != nil {
		a.CancelledAt = *row.CancelledAt
	}
	return a
}

// findAs runs q's Find into rows of R and returns them converted by to;
// op names the read in the error.
func findAs[R, T any](q *gorm.DB, op string, to func(R) T) ([]T, error) {
	var rows []R
	if err := q.Find(&rows).Error; err != nil {
		return nil, wrap(op, err)
	}
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = to(r)
	}
	return out, nil
}

// wrap translates GORM and driver errors into domain errors.
func wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gorm.ErrRecordNotFound):
		return fmt.Errorf("%s: %w", op, order.ErrNotFound)
	case errors.Is(err, order.ErrNotFound), errors.Is(err, order.ErrInvalidArgument),
		errors.Is(err, order.ErrActivityNotActive), errors.Is(err, order.ErrActivityStarted),
		errors.Is(err, activity.ErrSettingLocked), errors.Is(err, activity.ErrItemInAnotherActivity):
		return fmt.Errorf("%s: %w", op, err)
	case isTransient(err):
		return fmt.Errorf("%s: %w: %w", op, order.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
