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

// MaxStock bounds an item's MySQL stock (item_stock.stock is an INT); a
// restock that would pass it is refused.
const MaxStock = 1_000_000_000

type restockRow struct {
	ID             int64 `gorm:"primaryKey"`
	ItemID         int64
	IdempotencyKey string
	Quantity       int64
	CreatedAt      time.Time
	AppliedAt      *time.Time
}

func (restockRow) TableName() string { return "restocks" }

func (r restockRow) toRestock() activity.Restock {
	return activity.Restock{ID: r.ID, ItemID: r.ItemID, Key: r.IdempotencyKey, Quantity: r.Quantity, Applied: r.AppliedAt != nil}
}

// errRestockExists ends the transaction of a restock whose key is taken.
var errRestockExists = errors.New("restock key exists")

// Restock adds qty units to the item's MySQL stock and records the
// restock under key, in one transaction, once per (item, key): a repeat
// with the same key and quantity returns the first record (created false)
// and adds nothing; with another quantity it fails with order.ErrKeyReused.
// A concurrent repeat waits for the first transaction (the unique key)
// and then finds its record. order.ErrNotFound: no such item;
// order.ErrStockLimit: the stock would pass MaxStock.
func (s *Restocks) Restock(ctx context.Context, itemID int64, key string, qty int64) (activity.Restock, bool, error) {
	row := restockRow{ItemID: itemID, IdempotencyKey: key, Quantity: qty}
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		var st stockRow
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("item_id = ?", itemID).Take(&st).Error; err != nil {
			return err
		}
		if err := tx.Create(&row).Error; err != nil {
			if duplicateKey(err) != "" {
				return errRestockExists
			}
			return err
		}
		if st.Stock+qty > MaxStock {
			return order.Errorf(order.ErrStockLimit, "the item holds %d units: %d more would pass the most it may hold, %d", st.Stock, qty, MaxStock)
		}
		return tx.Model(&stockRow{}).Where("item_id = ?", itemID).Update("stock", gorm.Expr("stock + ?", qty)).Error
	})
	if errors.Is(err, errRestockExists) {
		var old restockRow
		if err := s.db(ctx).Where("item_id = ? AND idempotency_key = ?", itemID, key).Take(&old).Error; err != nil {
			return activity.Restock{}, false, wrap("read restock", err)
		}
		if old.Quantity != qty {
			return activity.Restock{}, false, order.Errorf(order.ErrKeyReused,
				"this Idempotency-Key restocked %d units, not %d; use a new key for a new restock", old.Quantity, qty)
		}
		return old.toRestock(), false, nil
	}
	if err != nil {
		return activity.Restock{}, false, wrap("restock", err)
	}
	return row.toRestock(), true, nil
}

// WarmupStock reads the item's stock and the id of its last restock (0:
// none) in one statement, so from one snapshot: the stock includes every
// restock of the item up to that id and none after it, because an item's
// restocks commit in id order (each holds the item's stock row locked from
// before its insert until its commit). In the same snapshot (a read-only
// REPEATABLE READ transaction) it lists the orders among pending (the
// item's reservations Redis counts as in flight) that MySQL holds live,
// CREATED or PAID: the stock read no longer has their units. A warm-up
// loads this figure (stockredis.StockReader). order.ErrNotFound: no such
// item.
func (s *Restocks) WarmupStock(ctx context.Context, itemID int64, pending []string) (stock, lastRestock int64, committed []string, err error) {
	err = s.db(ctx).Transaction(func(tx *gorm.DB) error {
		var row struct {
			Stock       int64
			LastRestock int64
		}
		res := tx.Raw(`SELECT s.stock AS stock,
			COALESCE((SELECT MAX(r.id) FROM restocks r WHERE r.item_id = s.item_id), 0) AS last_restock
			FROM item_stock s WHERE s.item_id = ?`, itemID).Scan(&row)
		if res.Error == nil && res.RowsAffected == 0 {
			return gorm.ErrRecordNotFound
		}
		if res.Error != nil {
			return res.Error
		}
		stock, lastRestock = row.Stock, row.LastRestock
		for chunk := range slices.Chunk(pending, ListBatch) {
			var nos []string
			if err := tx.Model(&orderRow{}).Where("order_no IN ? AND live = 1", chunk).
				Pluck("order_no", &nos).Error; err != nil {
				return err
			}
			committed = append(committed, nos...)
		}
		return nil
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return 0, 0, nil, wrap("read item stock", err)
	}
	return stock, lastRestock, committed, nil
}

// MarkRestocksWarmed records the item's restocks up to id upTo as applied:
// a warm-up's figure included them (stockredis.StockReader).
func (s *Restocks) MarkRestocksWarmed(ctx context.Context, itemID, upTo int64) error {
	err := s.db(ctx).Model(&restockRow{}).Where("item_id = ? AND id <= ? AND applied_at IS NULL", itemID, upTo).
		Update("applied_at", gorm.Expr("NOW(3)")).Error
	return wrap("mark restocks warmed", err)
}

// RestocksBetween lists the item's restocks with an id above after and at
// most upTo, by id, at most limit of them (stockredis.StockReader).
func (s *Restocks) RestocksBetween(ctx context.Context, itemID, after, upTo int64, limit int) (ids, quantities []int64, err error) {
	var rows []restockRow
	err = s.db(ctx).Select("id, quantity").Where("item_id = ? AND id > ? AND id <= ?", itemID, after, upTo).
		Order("id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, nil, wrap("list restocks", err)
	}
	for _, r := range rows {
		ids = append(ids, r.ID)
		quantities = append(quantities, r.Quantity)
	}
	return ids, quantities, nil
}

// MarkRestockApplied records that Redis has the restock's units.
func (s *Restocks) MarkRestockApplied(ctx context.Context, id int64) error {
	err := s.db(ctx).Model(&restockRow{}).Where("id = ? AND applied_at IS NULL", id).
		Update("applied_at", gorm.Expr("NOW(3)")).Error
	return wrap("mark restock applied", err)
}

// PendingRestocks lists the item's restocks whose Redis step is not
// recorded, oldest first: in flight (a warm-up or the step records them),
// so more than MaxPendingRestocks is order.ErrTooBusy.
func (s *Restocks) PendingRestocks(ctx context.Context, itemID int64) ([]activity.Restock, error) {
	q := s.db(ctx).Where("item_id = ? AND applied_at IS NULL", itemID).Order("id").Limit(MaxPendingRestocks + 1)
	rs, err := findAs(q, "list pending restocks", restockRow.toRestock)
	if err == nil && len(rs) > MaxPendingRestocks {
		return nil, fmt.Errorf("item %d has more than %d restocks whose Redis step is not recorded: %w", itemID, MaxPendingRestocks, order.ErrTooBusy)
	}
	return rs, err
}

// RestockOf returns one restock by id, order.ErrNotFound if none.
func (s *Restocks) RestockOf(ctx context.Context, id int64) (activity.Restock, error) {
	var row restockRow
	if err := s.db(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		return activity.Restock{}, wrap("read restock", err)
	}
	return row.toRestock(), nil
}
