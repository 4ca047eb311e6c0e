package orderdb

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Bounds of the reconciler's reads: every statement stays within MySQL's
// limits (65,535 placeholders) and every read holds a bounded number of
// rows, whatever the size of the sale.
const (
	// ListBatch is the most values one IN list carries (MySQL allows
	// 65,535 placeholders in a statement).
	ListBatch = 5000
	// MaxClosing is the most closed orders awaiting their Redis release
	// an item's read takes in (they are in flight, not history: the
	// closer releases them within seconds).
	MaxClosing = 10_000
	// MaxMoved is the most orders a read takes in as made or closed while
	// it read.
	MaxMoved = 100_000
	// MaxPendingRestocks is the most restocks awaiting their Redis step a
	// read takes in.
	MaxPendingRestocks = 1000
)

func errTooManyClosing(itemID int64) error {
	return fmt.Errorf("item %d has more than %d closed orders whose Redis release is not recorded yet (the closer releases them): %w",
		itemID, MaxClosing, order.ErrTooBusy)
}

func errTooManyMoved(itemID int64) error {
	return fmt.Errorf("item %d: more than %d orders moved while it was read: %w", itemID, MaxMoved, order.ErrTooBusy)
}

// Activities lists the activities f picks, by id.
func (s *Reconcile) Activities(ctx context.Context, f drift.ActivityFilter) ([]activity.Activity, error) {
	q := s.db(ctx).Model(&activityRow{}).Order("id")
	if !f.EndsAfter.IsZero() {
		q = q.Where("ends_at > ?", f.EndsAfter.UTC())
	}
	if f.IDs != nil {
		q = q.Where("id IN ?", nonEmpty(f.IDs))
	}
	if f.Items != nil {
		q = q.Where("(item_id IN ? OR id IN (SELECT activity_id FROM activity_items WHERE item_id IN ?))", nonEmpty(f.Items), nonEmpty(f.Items))
	}
	var rows []activityRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, wrap("list activities", err)
	}
	out := make([]activity.Activity, len(rows))
	for i, row := range rows {
		a := activity.Activity{ID: row.ID, ItemID: row.ItemID, StartsAt: row.StartsAt, EndsAt: row.EndsAt, PerUserLimit: row.PerUserLimit,
			StockBuckets: max(row.StockBuckets, 1)}
		if row.PaymentWindowSeconds != nil {
			a.PaymentWindow = time.Duration(*row.PaymentWindowSeconds) * time.Second
		}
		out[i] = a
	}
	return out, wrap("list activities", withItems(s.db(ctx), out))
}

// nonEmpty keeps "IN ?" valid SQL for an empty list (it matches nothing).
func nonEmpty(ids []int64) []int64 {
	if len(ids) == 0 {
		return []int64{0}
	}
	return ids
}

// ReadMark takes the mark (clock and id first, then the closing orders).
func (s *Reconcile) ReadMark(ctx context.Context, itemID int64) (drift.ReadMark, error) {
	var m drift.ReadMark
	var maxID sql.NullInt64
	if err := s.db(ctx).Raw("SELECT NOW(3), MAX(id) FROM orders").Row().Scan(&m.At, &maxID); err != nil {
		return m, wrap("read clock", err)
	}
	m.MaxID = maxID.Int64
	var maxRestock sql.NullInt64
	if err := s.db(ctx).Raw("SELECT MAX(id) FROM restocks").Row().Scan(&maxRestock); err != nil {
		return m, wrap("read last restock", err)
	}
	m.MaxRestockID = maxRestock.Int64
	closing, err := s.ClosingOrders(ctx, itemID)
	if err != nil {
		return m, err
	}
	m.Closing = closing
	pending, err := s.restocks.PendingRestocks(ctx, itemID)
	if err != nil {
		return m, err
	}
	m.Restocks = make([]drift.PendingRestock, len(pending))
	for i, r := range pending {
		m.Restocks[i] = drift.PendingRestock{ID: r.ID, Quantity: r.Quantity}
	}
	return m, nil
}

// StockSnapshot reads the item's stock, the status and quantity of the
// orders among orderNos that exist, and what moved since mark, in one
// read-only REPEATABLE READ transaction: all of it comes from the instant
// of the first read, as if no order committed in between.
// order.ErrNotFound when the item has no stock row.
func (s *Reconcile) StockSnapshot(ctx context.Context, itemID int64, orderNos []string, mark drift.ReadMark) (drift.StockSnapshot, error) {
	snap := drift.StockSnapshot{Orders: make(map[string]drift.OrderState, len(orderNos))}
	asked := make(map[string]bool, len(orderNos))
	for _, no := range orderNos {
		asked[no] = true
	}
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		var row stockRow
		if err := tx.Where("item_id = ?", itemID).Take(&row).Error; err != nil {
			return err
		}
		snap.Stock = row.Stock
		for chunk := range slices.Chunk(orderNos, ListBatch) {
			var rows []struct {
				OrderNo  string
				Status   string
				Quantity int64
			}
			if err := tx.Model(&orderRow{}).Select("order_no, status, quantity").
				Where("order_no IN ?", chunk).Scan(&rows).Error; err != nil {
				return err
			}
			for _, r := range rows {
				snap.Orders[r.OrderNo] = drift.OrderState{Status: order.Status(r.Status), Quantity: r.Quantity}
			}
		}
		var created []string
		// Both lists are what moved while the item was read: the orders
		// made and closed in a moment, never its history.
		if err := tx.Model(&orderRow{}).Where("id > ? AND item_id = ? AND live = 1", mark.MaxID, itemID).
			Limit(MaxMoved+1).Pluck("order_no", &created).Error; err != nil {
			return err
		}
		if len(created) > MaxMoved {
			return errTooManyMoved(itemID)
		}
		for _, no := range created {
			if !asked[no] {
				snap.Moved = append(snap.Moved, no)
			}
		}
		var closed []string
		if err := tx.Model(&orderRow{}).Where("item_id = ? AND status = ? AND (released_at IS NULL OR updated_at >= ?)",
			itemID, string(order.Closed), mark.At).Limit(MaxClosing+MaxMoved+1).Pluck("order_no", &closed).Error; err != nil {
			return err
		}
		if len(closed) > MaxClosing+MaxMoved {
			return errTooManyMoved(itemID)
		}
		for _, no := range closed {
			if _, ok := mark.Closing[no]; !ok && !asked[no] {
				snap.Moved = append(snap.Moved, no)
			}
		}
		var restocked []int64
		if err := tx.Model(&restockRow{}).Where("id > ? AND item_id = ?", mark.MaxRestockID, itemID).
			Pluck("id", &restocked).Error; err != nil {
			return err
		}
		for _, id := range restocked {
			snap.Moved = append(snap.Moved, fmt.Sprintf("restock %d", id))
		}
		return nil
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return drift.StockSnapshot{}, wrap("read stock snapshot", err)
	}
	return snap, nil
}

// ClosingOrders lists the item's CLOSED orders whose Redis release is not
// recorded yet (released_at IS NULL): MySQL already has their units back,
// Redis may not. More than MaxClosing is an error: the closer is behind,
// and the item is checked once it caught up.
func (s *Reconcile) ClosingOrders(ctx context.Context, itemID int64) (map[string]drift.OrderState, error) {
	var rows []struct {
		OrderNo  string
		Quantity int64
	}
	err := s.db(ctx).Model(&orderRow{}).Select("order_no, quantity").
		Where("item_id = ? AND status = ? AND released_at IS NULL", itemID, string(order.Closed)).
		Limit(MaxClosing + 1).Scan(&rows).Error
	if err != nil {
		return nil, wrap("list closing orders", err)
	}
	if len(rows) > MaxClosing {
		return nil, errTooManyClosing(itemID)
	}
	out := make(map[string]drift.OrderState, len(rows))
	for _, r := range rows {
		out[r.OrderNo] = drift.OrderState{Status: order.Closed, Quantity: r.Quantity}
	}
	return out, nil
}

// LiveOrderPage returns up to limit live orders of the activity whose user
// id sorts after after (by bytes; "" for the first page), by user id: a
// keyset scan of uk_orders_live, so a page costs the same however far into
// the activity it is.
func (s *Reconcile) LiveOrderPage(ctx context.Context, activityID int64, after string, limit int) ([]drift.LiveOrder, error) {
	var rows []orderRow
	err := s.db(ctx).
		Select("order_no, user_id, item_id, status, quantity, idempotency_key, created_at").
		Where("activity_id = ? AND user_id > ? AND live = 1", activityID, after).
		Order("user_id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, wrap("list live orders", err)
	}
	out := make([]drift.LiveOrder, len(rows))
	for i, r := range rows {
		out[i] = drift.LiveOrder{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: r.ItemID, Status: order.Status(r.Status),
			Quantity: r.Quantity, IdempotencyKey: r.IdempotencyKey, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// LiveOrdersOf returns, for the users among users who have a live order in
// the activity, user -> that order's number (ListBatch users per query).
func (s *Reconcile) LiveOrdersOf(ctx context.Context, activityID int64, users []string) (map[string]string, error) {
	out := make(map[string]string, len(users))
	for chunk := range slices.Chunk(users, ListBatch) {
		var rows []struct {
			UserID  string
			OrderNo string
		}
		err := s.db(ctx).Model(&orderRow{}).Select("user_id, order_no").
			Where("activity_id = ? AND user_id IN ? AND live = 1", activityID, chunk).Scan(&rows).Error
		if err != nil {
			return nil, wrap("read live orders", err)
		}
		for _, r := range rows {
			out[r.UserID] = r.OrderNo
		}
	}
	return out, nil
}
