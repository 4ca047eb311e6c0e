package orderdb

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/payment"
)

type paymentRow struct {
	ID            int64 `gorm:"primaryKey"`
	TransactionID string
	OrderNo       string
	Amount        int64
	Currency      string
	Outcome       string
	RefundReason  *string
	RefundedAt    *time.Time
	ReceivedAt    time.Time
}

func (paymentRow) TableName() string { return "payments" }

func (r paymentRow) toPayment() payment.Transaction {
	p := payment.Transaction{TransactionID: r.TransactionID, OrderNo: r.OrderNo, Amount: order.Money{Amount: r.Amount, Currency: r.Currency},
		Outcome: r.Outcome, ReceivedAt: r.ReceivedAt}
	if r.RefundReason != nil {
		p.RefundReason = *r.RefundReason
	}
	return p
}

// RecordPayment records one provider transaction for an order, once: in one
// transaction it inserts the payment (the unique transaction_id makes a
// second notification, even a concurrent one, a Duplicate that changes
// nothing) and moves the order from CREATED to PAID with the same
// compare-and-set as Pay. When the order is CLOSED, FAILED or already PAID
// (by another transaction, or by the buyer) the payment is recorded as a
// REFUND. An order still CREATED but past its payment window, or of a sale
// that was cancelled, is closed here (as the closer would a moment later)
// and the payment is a REFUND, so the outcome never waits for the closer;
// the sale's row is read with a shared lock (saleCancelled), so a
// concurrent cancel is either seen or waits for this transaction. The
// order returned is read with a lock too: the latest committed row, the
// one the outcome was decided on, even in a caller's unit whose snapshot
// is older (the refund.owed event states its status). The caller checked
// the amount against the order's.
func (s *Payments) RecordPayment(ctx context.Context, p payment.Transaction) (payment.Recorded, error) {
	var out payment.Recorded
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		row := paymentRow{TransactionID: p.TransactionID, OrderNo: p.OrderNo, Amount: p.Amount.Amount,
			Currency: p.Amount.Currency, Outcome: payment.Paid, ReceivedAt: time.Now().UTC()}
		// The insert goes first: a concurrent duplicate waits on the unique
		// key until this transaction ends, then finds the row.
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		// The sale's row with a shared lock, as Pay reads it: a cancel
		// committed before this is seen, and one after it waits for this
		// transaction (its closer then finds the order PAID).
		cancelled, err := saleCancelled(tx, p.OrderNo)
		if err != nil {
			return err
		}
		paid := false
		if !cancelled {
			res := tx.Exec(`UPDATE orders SET status = ?
				WHERE order_no = ? AND status IN ? AND (pay_deadline IS NULL OR pay_deadline > ?)`,
				string(order.Paid), p.OrderNo, becomesFrom(order.Paid), time.Now().UTC())
			if res.Error != nil {
				return res.Error
			}
			paid = res.RowsAffected == 1
		}
		if !paid {
			// A locking read: the latest committed status, not this
			// transaction's snapshot.
			var o orderRow
			if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("order_no = ?", p.OrderNo).Take(&o).Error; err != nil {
				return err
			}
			reason := o.Status
			if o.Status == string(order.Created) {
				// Past its window, or its sale cancelled: close it now,
				// units back in the same transaction, exactly as
				// CloseOrder (the closer) would a moment later.
				why := order.ReasonPaymentTimeout
				if cancelled {
					why = order.ReasonSaleCancelled
				}
				won, err := closeCreated(tx, "", p.OrderNo, why)
				if err != nil {
					return err
				}
				if !won {
					return errors.New("an order locked CREATED could not be closed")
				}
				out.Closed, reason = true, string(order.Closed)
			}
			row.Outcome, row.RefundReason = payment.Refund, &reason
			if err := tx.Model(&row).Updates(map[string]any{"outcome": payment.Refund, "refund_reason": reason}).Error; err != nil {
				return err
			}
		}
		out.Payment = row.toPayment()
		return nil
	})
	if duplicateKey(err) == "uk_payments_transaction" {
		var row paymentRow
		if err := s.db(ctx).Where("transaction_id = ?", p.TransactionID).Take(&row).Error; err != nil {
			return payment.Recorded{}, wrap("read payment", err)
		}
		out = payment.Recorded{Payment: row.toPayment(), Duplicate: true}
	} else if err != nil {
		return payment.Recorded{}, wrap("record payment", err)
	}
	var orow orderRow
	if err := s.db(ctx).Clauses(clause.Locking{Strength: "UPDATE"}).Where("order_no = ?", out.Payment.OrderNo).Take(&orow).Error; err != nil {
		return payment.Recorded{}, wrap("read order", err)
	}
	out.Order = orow.toOrder()
	return out, nil
}

// PaymentsOf returns the payments recorded for an order, oldest first.
func (s *Payments) PaymentsOf(ctx context.Context, orderNo string) ([]payment.Transaction, error) {
	return findAs(s.db(ctx).Where("order_no = ?", orderNo).Order("id"), "read payments", paymentRow.toPayment)
}

// RefundsNeeded counts the REFUND payments of an activity's orders not yet
// marked refunded.
func (s *Payments) RefundsNeeded(ctx context.Context, activityID int64) (int64, error) {
	var n int64
	err := s.db(ctx).Raw(`SELECT COUNT(*) FROM payments p JOIN orders o ON o.order_no = p.order_no
		WHERE o.activity_id = ? AND p.outcome = 'REFUND' AND p.refunded_at IS NULL`, activityID).Scan(&n).Error
	return n, wrap("count refunds", err)
}
