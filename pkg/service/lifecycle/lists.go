package lifecycle

import (
	"context"

	"github.com/seckill/seckill/pkg/domain/order"
)

// Lists are a user's orders in MySQL, a page at a time (*orderdb.Orders).
type Lists interface {
	UserOrders(ctx context.Context, user string, f order.Filter, before int64, limit int) ([]order.Listed, bool, error)
}

// Refunds count the payments owed back (*orderdb.Payments).
type Refunds interface {
	RefundsNeeded(ctx context.Context, activityID int64) (int64, error)
}

// UserOrders lists up to limit of the user's orders that f keeps, newest
// first, below row id before when before > 0; more reports whether older
// ones match too.
func (s *Service) UserOrders(ctx context.Context, user string, f order.Filter, before int64, limit int) (rows []order.Listed, more bool, err error) {
	return s.Lists.UserOrders(ctx, user, f, before, limit)
}

// RefundsNeeded counts the payments for the sale's orders that arrived
// when the order could not be paid any more and are not yet refunded.
func (s *Service) RefundsNeeded(ctx context.Context, activityID int64) (int64, error) {
	return s.Refunds.RefundsNeeded(ctx, activityID)
}
