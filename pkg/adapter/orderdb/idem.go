package orderdb

import (
	"context"
	"database/sql"

	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/order"
)

// IdemOrderPage lists every order (CREATED, PAID, CLOSED and FAILED alike)
// with its idempotency key of the next users of the activity: those whose
// user id sorts after after (by bytes; "" for the first page), up to users
// of them, each with all its orders, by id. last is the last of those
// users ("" when there are none left): the after of the next page. Both
// statements are range reads of uk_orders_live.
func (s *Reconcile) IdemOrderPage(ctx context.Context, activityID int64, after string, users int) (orders []drift.IdemOrder, last string, err error) {
	var bound sql.NullString
	err = s.db(ctx).Raw(`SELECT MAX(user_id) FROM (SELECT DISTINCT user_id FROM orders
		WHERE activity_id = ? AND user_id > ? ORDER BY user_id LIMIT ?) page`, activityID, after, users).Row().Scan(&bound)
	if err != nil {
		return nil, "", wrap("page users with orders", err)
	}
	if !bound.Valid {
		return nil, "", nil
	}
	var rows []struct {
		ID             int64
		OrderNo        string
		UserID         string
		ItemID         int64
		IdempotencyKey string
		Status         string
		FailureReason  *string
	}
	err = s.db(ctx).Model(&orderRow{}).
		Select("id, order_no, user_id, item_id, idempotency_key, status, failure_reason").
		Where("activity_id = ? AND user_id > ? AND user_id <= ?", activityID, after, bound.String).Order("id").Scan(&rows).Error
	if err != nil {
		return nil, "", wrap("list orders with idempotency keys", err)
	}
	out := make([]drift.IdemOrder, len(rows))
	for i, r := range rows {
		out[i] = drift.IdemOrder{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: r.ItemID,
			IdempotencyKey: r.IdempotencyKey, Status: order.Status(r.Status)}
		if r.FailureReason != nil {
			out[i].FailureReason = *r.FailureReason
		}
	}
	return out, bound.String, nil
}
