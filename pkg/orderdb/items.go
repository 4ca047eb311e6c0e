package orderdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/order"
)

type itemRow struct {
	ID        int64 `gorm:"primaryKey"`
	Name      string
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
	CreatedAt            time.Time
}

func (activityRow) TableName() string { return "activities" }

// Item is a product with its MySQL stock.
type Item struct {
	ID    int64
	Name  string
	Stock int64
}

// CreateItem inserts an item and its stock row in one transaction.
func (db *DB) CreateItem(ctx context.Context, name string, stock int64) (Item, error) {
	row := itemRow{Name: name}
	err := db.gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		return tx.Create(&stockRow{ItemID: row.ID, Stock: stock}).Error
	})
	if err != nil {
		return Item{}, wrap("create item", err)
	}
	return Item{ID: row.ID, Name: name, Stock: stock}, nil
}

// ItemStock returns the item's MySQL stock, order.ErrNotFound if none.
func (db *DB) ItemStock(ctx context.Context, itemID int64) (int64, error) {
	var row stockRow
	err := db.gdb.WithContext(ctx).Where("item_id = ?", itemID).Take(&row).Error
	if err != nil {
		return 0, wrap("read stock", err)
	}
	return row.Stock, nil
}

// SetItemStock overwrites an item's MySQL stock (operators and tests).
func (db *DB) SetItemStock(ctx context.Context, itemID, stock int64) error {
	res := db.gdb.WithContext(ctx).Model(&stockRow{}).Where("item_id = ?", itemID).Update("stock", stock)
	if res.Error != nil {
		return wrap("set stock", res.Error)
	}
	if res.RowsAffected == 0 {
		return order.ErrNotFound
	}
	return nil
}

// CreateActivity inserts an activity for an existing item.
func (db *DB) CreateActivity(ctx context.Context, a order.Activity) (order.Activity, error) {
	row := activityRow{ItemID: a.ItemID, StartsAt: a.StartsAt.UTC(), EndsAt: a.EndsAt.UTC(), PerUserLimit: a.PerUserLimit,
		StockBuckets: max(a.StockBuckets, 1)}
	if a.PaymentWindow > 0 {
		s := int(a.PaymentWindow / time.Second)
		row.PaymentWindowSeconds = &s
	}
	err := db.gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&itemRow{}).Where("id = ?", a.ItemID).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return order.ErrNotFound
		}
		return tx.Create(&row).Error
	})
	if err != nil {
		return order.Activity{}, wrap("create activity", err)
	}
	a.ID, a.StockBuckets = row.ID, row.StockBuckets
	return a, nil
}

// Activity returns one activity, order.ErrNotFound if none.
func (db *DB) Activity(ctx context.Context, id int64) (order.Activity, error) {
	var row activityRow
	if err := db.gdb.WithContext(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		return order.Activity{}, wrap("read activity", err)
	}
	a := order.Activity{ID: row.ID, ItemID: row.ItemID, StartsAt: row.StartsAt, EndsAt: row.EndsAt, PerUserLimit: row.PerUserLimit,
		StockBuckets: max(row.StockBuckets, 1)}
	if row.PaymentWindowSeconds != nil {
		a.PaymentWindow = time.Duration(*row.PaymentWindowSeconds) * time.Second
	}
	return a, nil
}

// wrap translates GORM and driver errors into domain errors.
func wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gorm.ErrRecordNotFound):
		return fmt.Errorf("%s: %w", op, order.ErrNotFound)
	case errors.Is(err, order.ErrNotFound):
		return fmt.Errorf("%s: %w", op, err)
	case isTransient(err):
		return fmt.Errorf("%s: %w: %w", op, order.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
