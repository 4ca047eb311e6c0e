package orderdb

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/domain/order"
)

// Pay moves the user's order from CREATED to PAID while its payment window
// is open and its sale is not cancelled, in one transaction: the sale's row
// is read with a shared lock first (saleCancelled), so a cancel either
// committed before (the order is not paid) or waits until the payment
// committed (and its closer then finds the order PAID). UPDATE ... WHERE
// status IN (the statuses that may become PAID: CREATED) is the
// compare-and-set that races a close for the same row; exactly one wins.
func (s *Orders) Pay(ctx context.Context, user, orderNo string) (order.Transition, error) {
	var tr order.Transition
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		cancelled, err := saleCancelled(tx, orderNo)
		if err != nil || cancelled {
			tr.SaleCancelled = cancelled
			return err
		}
		res := tx.Exec(`UPDATE orders SET status = ?
			WHERE order_no = ? AND user_id = ? AND status IN ?
			AND (pay_deadline IS NULL OR pay_deadline > ?)`,
			string(order.Paid), orderNo, user, becomesFrom(order.Paid), time.Now().UTC())
		tr.Won = res.RowsAffected == 1
		return res.Error
	})
	if errors.Is(err, gorm.ErrRecordNotFound) {
		err = nil // no such order: the read below says so
	}
	if err != nil {
		return order.Transition{}, wrap("pay", err)
	}
	o, err := s.Order(ctx, orderNo)
	if err != nil {
		return order.Transition{}, err
	}
	tr.Order = o
	tr.SaleCancelled = tr.SaleCancelled && o.Status == order.Created
	return tr, nil
}

// saleCancelled reports, inside tx, whether the sale of order orderNo was
// cancelled, reading the sale's row with a shared lock that the
// transaction holds until it ends: a cancel (EndActivity, which locks the
// row for update) cannot commit in between, so a payment that finds the
// sale not cancelled is ordered before the cancel, and its closer finds the
// order paid. gorm.ErrRecordNotFound when there is no such order.
func saleCancelled(tx *gorm.DB, orderNo string) (bool, error) {
	var o struct{ ActivityID int64 }
	if err := tx.Table("orders").Select("activity_id").Where("order_no = ?", orderNo).Take(&o).Error; err != nil {
		return false, err
	}
	var a struct{ CancelledAt *time.Time }
	// LOCK IN SHARE MODE is what MariaDB and MySQL both read (GORM's
	// SHARE strength writes FOR SHARE, which MariaDB does not know).
	if err := tx.Raw("SELECT cancelled_at FROM activities WHERE id = ? LOCK IN SHARE MODE", o.ActivityID).Scan(&a).Error; err != nil {
		return false, err
	}
	return a.CancelledAt != nil, nil
}

// CloseOrder moves an order from CREATED to CLOSED and gives its units back to
// MySQL stock, in one transaction. It does not touch Redis: callers release
// the reservation next and then call MarkReleased, so a crash between the
// two is finished by the closer later (ReleasesDue), never done twice.
// user "" means any user (the timeout closer).
func (s *Orders) CloseOrder(ctx context.Context, user, orderNo, reason string) (order.Transition, error) {
	won := false
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		won, err = closeCreated(tx, user, orderNo, reason)
		return err
	})
	if err != nil {
		return order.Transition{}, wrap("close", err)
	}
	o, err := s.Order(ctx, orderNo)
	if err != nil {
		return order.Transition{}, err
	}
	return order.Transition{Won: won, Order: o}, nil
}

// closeCreated is the close's compare-and-set inside tx: CREATED → CLOSED
// (the statuses that may become CLOSED), the units back to item_stock and
// the use of its presale code, if it has one, back to sale_codes.
// It reports whether it moved the order.
func closeCreated(tx *gorm.DB, user, orderNo, reason string) (bool, error) {
	q := `UPDATE orders SET status = ?, failure_reason = ?, released_at = NULL
		WHERE order_no = ? AND status IN ?`
	args := []any{string(order.Closed), reason, orderNo, becomesFrom(order.Closed)}
	if user != "" {
		q += " AND user_id = ?"
		args = append(args, user)
	}
	res := tx.Exec(q, args...)
	if res.Error != nil {
		return false, res.Error
	}
	if res.RowsAffected == 0 {
		return false, nil
	}
	if err := tx.Exec(`UPDATE item_stock s JOIN orders o ON o.item_id = s.item_id
		SET s.stock = s.stock + o.quantity WHERE o.order_no = ?`, orderNo).Error; err != nil {
		return false, err
	}
	return true, giveCodeOf(tx, orderNo)
}

// MarkReleased records that a closed order's Redis reservation was
// released.
func (s *Orders) MarkReleased(ctx context.Context, orderNo string) error {
	err := s.db(ctx).Exec(`UPDATE orders SET released_at = ?
		WHERE order_no = ? AND status = 'CLOSED' AND released_at IS NULL`, time.Now().UTC(), orderNo).Error
	return wrap("mark released", err)
}

// timeParam is a time placeholder that an index range can use. The driver
// sends a time.Time parameter of a prepared statement as a string, and
// MariaDB does not range a DATETIME key part on a string parameter: it
// reads every entry of the key's prefix and filters each (index condition
// pushdown, which Handler_read_* does not count). ExpiredUnpaid on
// "pay_deadline <= ?" read all 48,750 CREATED orders of a 1,000,000-order
// history, 4 ms of server CPU a call, where the cast reads the due ones.
const timeParam = "CAST(? AS DATETIME(3))"

// ExpiredUnpaid lists up to limit CREATED orders whose payment window ended
// before now, oldest deadline first: one range of idx_orders_deadline
// (status, pay_deadline), so a pass reads the orders due and no other.
func (s *Orders) ExpiredUnpaid(ctx context.Context, now time.Time, limit int) ([]string, error) {
	var nos []string
	err := s.db(ctx).Raw(`SELECT order_no FROM orders
		WHERE status = 'CREATED' AND pay_deadline <= `+timeParam+` ORDER BY pay_deadline LIMIT ?`, now.UTC(), limit).Scan(&nos).Error
	return nos, wrap("list expired", err)
}

// ReleasesDue lists up to limit CLOSED orders whose Redis release is not
// recorded yet and that were closed before olderThan. idx_orders_release
// (0011) makes it one range of exactly those orders: the closer asks every
// second, and every past sale's CLOSED orders have their release recorded.
func (s *Orders) ReleasesDue(ctx context.Context, olderThan time.Time, limit int) ([]order.Order, error) {
	q := s.db(ctx).Where("status = 'CLOSED' AND released_at IS NULL AND updated_at <= "+timeParam, olderThan.UTC()).Limit(limit)
	return findAs(q, "list releases due", orderRow.toOrder)
}

// becomesFrom is the WHERE status IN (...) list of an update that makes an
// order next: the statuses the domain lets become next
// (order.BecomesFrom), as MySQL stores them.
func becomesFrom(next order.Status) []string {
	from := order.BecomesFrom(next)
	out := make([]string, len(from))
	for i, s := range from {
		out[i] = string(s)
	}
	return out
}
