package orderdb

import (
	"context"

	"github.com/seckill/seckill/pkg/domain/order"
)

// OrderFilter narrows a user's order list; zero fields do not filter.
type OrderFilter struct {
	ActivityID int64
	Status     order.Status
}

// Listed is an order with its row id, the position keyset pagination
// resumes from.
type Listed struct {
	ID    int64
	Order order.Order
}

// UserOrders lists up to limit of the user's orders newest first (by row
// id, which MySQL gives in insertion order), only those with an id below
// before when before > 0. more reports whether older orders match too.
// idx_orders_user (user_id, id) serves it: a backward range scan of the
// user's rows, so a page costs the same however deep it is, and rows
// inserted meanwhile (higher ids) neither shift nor repeat older pages.
func (s *Orders) UserOrders(ctx context.Context, user string, f OrderFilter, before int64, limit int) (rows []Listed, more bool, err error) {
	q := s.gdb.WithContext(ctx).Where("user_id = ?", user)
	if f.ActivityID > 0 {
		q = q.Where("activity_id = ?", f.ActivityID)
	}
	if f.Status != "" {
		q = q.Where("status = ?", string(f.Status))
	}
	if before > 0 {
		q = q.Where("id < ?", before)
	}
	var found []orderRow
	if err := q.Order("id DESC").Limit(limit + 1).Find(&found).Error; err != nil {
		return nil, false, wrap("list orders", err)
	}
	if len(found) > limit {
		found, more = found[:limit], true
	}
	rows = make([]Listed, len(found))
	for i, r := range found {
		rows[i] = Listed{ID: r.ID, Order: r.toOrder()}
	}
	return rows, more, nil
}

// StatusTally is what an activity's orders in one status add up to.
type StatusTally struct {
	Orders int64
	Units  int64
	// Amount sums the amounts of the orders that have a price; Priced
	// counts them.
	Amount int64
	Priced int64
}

// ActivityTally adds up an activity's MySQL orders by item, then by
// status (the key is missing for a status with no orders; an item with
// none is missing too).
func (s *Activities) ActivityTally(ctx context.Context, activityID int64) (map[int64]map[order.Status]StatusTally, error) {
	var rows []struct {
		ItemID int64
		Status string
		StatusTally
	}
	err := s.gdb.WithContext(ctx).Model(&orderRow{}).
		Select("item_id, status, COUNT(*) AS orders, COALESCE(SUM(quantity), 0) AS units, COALESCE(SUM(amount), 0) AS amount, COUNT(amount) AS priced").
		Where("activity_id = ?", activityID).Group("item_id, status").Scan(&rows).Error
	if err != nil {
		return nil, wrap("tally orders", err)
	}
	out := map[int64]map[order.Status]StatusTally{}
	for _, r := range rows {
		if out[r.ItemID] == nil {
			out[r.ItemID] = map[order.Status]StatusTally{}
		}
		out[r.ItemID][order.Status(r.Status)] = r.StatusTally
	}
	return out, nil
}
