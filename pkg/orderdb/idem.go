package orderdb

import (
	"context"

	"github.com/seckill/seckill/pkg/order"
)

// IdemOrder is what the reconciler needs of an order to give its
// idempotency record back.
type IdemOrder struct {
	OrderNo        string
	UserID         string
	ItemID         int64
	IdempotencyKey string
	Status         order.Status
	// FailureReason is "" for an order without one.
	FailureReason string
}

// IdemOrders lists every order of the activity (CREATED, PAID, CLOSED and
// FAILED alike) with its idempotency key, in one query, by id.
func (db *DB) IdemOrders(ctx context.Context, activityID int64) ([]IdemOrder, error) {
	var rows []struct {
		ID             int64
		OrderNo        string
		UserID         string
		ItemID         int64
		IdempotencyKey string
		Status         string
		FailureReason  *string
	}
	err := db.gdb.WithContext(ctx).Model(&orderRow{}).
		Select("id, order_no, user_id, item_id, idempotency_key, status, failure_reason").
		Where("activity_id = ?", activityID).Order("id").Scan(&rows).Error
	if err != nil {
		return nil, wrap("list orders with idempotency keys", err)
	}
	out := make([]IdemOrder, len(rows))
	for i, r := range rows {
		out[i] = IdemOrder{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: r.ItemID,
			IdempotencyKey: r.IdempotencyKey, Status: order.Status(r.Status)}
		if r.FailureReason != nil {
			out[i].FailureReason = *r.FailureReason
		}
	}
	return out, nil
}
