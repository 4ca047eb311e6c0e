package orderdb

import (
	"context"

	"github.com/seckill/seckill/pkg/domain/order"
)

// UserOrders lists up to limit of the user's orders newest first (by row
// id, which MySQL gives in insertion order), only those with an id below
// before when before > 0. more reports whether older orders match too.
// idx_orders_user (user_id, id) serves it: a backward range scan of the
// user's rows, so a page costs the same however deep it is, and rows
// inserted meanwhile (higher ids) neither shift nor repeat older pages.
func (s *Orders) UserOrders(ctx context.Context, user string, f order.Filter, before int64, limit int) (rows []order.Listed, more bool, err error) {
	q := s.db(ctx).Where("user_id = ?", user)
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
	rows = make([]order.Listed, len(found))
	for i, r := range found {
		rows[i] = order.Listed{ID: r.ID, Order: r.toOrder()}
	}
	return rows, more, nil
}

// ActivityTally adds up an activity's MySQL orders by item, then by
// status (the key is missing for a status with no orders; an item with
// none is missing too).
func (s *Activities) ActivityTally(ctx context.Context, activityID int64) (map[int64]map[order.Status]order.StatusTally, error) {
	var rows []struct {
		ItemID int64
		Status string
		order.StatusTally
	}
	err := s.db(ctx).Model(&orderRow{}).
		Select("item_id, status, COUNT(*) AS orders, COALESCE(SUM(quantity), 0) AS units, COALESCE(SUM(amount), 0) AS amount, COUNT(amount) AS priced").
		Where("activity_id = ?", activityID).Group("item_id, status").Scan(&rows).Error
	if err != nil {
		return nil, wrap("tally orders", err)
	}
	out := map[int64]map[order.Status]order.StatusTally{}
	for _, r := range rows {
		if out[r.ItemID] == nil {
			out[r.ItemID] = map[order.Status]order.StatusTally{}
		}
		out[r.ItemID][order.Status(r.Status)] = r.StatusTally
	}
	return out, nil
}

// ActivityIDs lists up to limit activities' ids, newest first, below
// before (0: from the newest), so an operator's console pages through
// every sale by its primary key.
func (s *Activities) ActivityIDs(ctx context.Context, before int64, limit int) ([]int64, error) {
	q := s.db(ctx).Table("activities")
	if before > 0 {
		q = q.Where("id < ?", before)
	}
	var ids []int64
	if err := q.Order("id DESC").Limit(limit).Pluck("id", &ids).Error; err != nil {
		return nil, wrap("list activities", err)
	}
	return ids, nil
}
