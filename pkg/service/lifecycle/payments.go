package lifecycle

import (
	"context"
	"errors"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/domain/payment"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// RecordPayment takes one provider transaction of amount for an order
// (whoever's), once. A CREATED order becomes PAID; a payment for an order
// that cannot be paid any more (CLOSED, FAILED, paid already, past its
// payment window, or of a cancelled sale: the last two are closed here as
// the closer would close them) is recorded
// as a refund owed, logged at alert level, and is not an error: the
// provider is to stop sending it. The same transaction again changes
// nothing and answers as the first time (Recorded.Duplicate).
//
// Refused, with nothing written: an order MySQL does not have
// (order.ErrNotFound, or order.ErrNotPayable while it is still being
// placed), an order without a price, an amount or currency other than the
// order's, and a transaction id recorded for another order or amount
// (order.ErrPaymentRefused).
func (s *Service) RecordPayment(ctx context.Context, txID, orderNo string, amount order.Money) (payment.Recorded, error) {
	o, err := s.DB.Order(ctx, orderNo)
	if errors.Is(err, order.ErrNotFound) {
		return payment.Recorded{}, s.notInMySQL(ctx, orderNo)
	}
	if err != nil {
		return payment.Recorded{}, err
	}
	switch {
	case !o.Amount.Priced() && o.Status == order.Failed:
		// An order the API gave up before it reached the consumer (its row
		// records no price): it never could be paid, so whatever arrived is
		// owed back, recorded as a refund like a payment of a closed order.
	case !o.Amount.Priced():
		return payment.Recorded{}, order.Errorf(order.ErrPaymentRefused,
			"order %s has no price (its sale had none), so no payment can be checked against it", orderNo)
	case amount != o.Amount:
		return payment.Recorded{}, order.Errorf(order.ErrPaymentRefused,
			"the payment of %s does not match the order's amount of %s", amount, o.Amount)
	}
	rec, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (payment.Recorded, error) {
		rec, err := s.Payments.RecordPayment(ctx, payment.Transaction{TransactionID: txID, OrderNo: orderNo, Amount: amount})
		if err != nil || rec.Duplicate {
			return rec, err
		}
		return rec, s.Events.Record(ctx, paymentEvents(rec, txID, amount)...)
	})
	if err != nil {
		return payment.Recorded{}, err
	}
	p := rec.Payment
	if rec.Duplicate {
		if p.OrderNo != orderNo || p.Amount != amount {
			return payment.Recorded{}, order.Errorf(order.ErrPaymentRefused,
				"transaction %s was recorded for another order or amount", txID)
		}
		return rec, nil
	}
	args := []any{"order_no", orderNo, "request_id", logs.RequestID(ctx), "transaction_id", txID,
		"user_id", rec.Order.UserID, "item_id", rec.Order.ItemID, "amount", amount.Amount, "currency", amount.Currency}
	if rec.Closed {
		reason := rec.Order.FailureReason
		s.Log.Info("order closed", append(args, "reason", reason, "status", order.Closed)...)
		// As after any close: release at most once, or the closer finishes.
		if err := s.release(context.WithoutCancel(ctx), rec.Order, reason); err != nil {
			s.Log.Warn("release after close failed; the closer will finish it", "order_no", orderNo,
				"request_id", logs.RequestID(ctx), "err", err)
		}
	}
	if p.Outcome == payment.Refund {
		s.Log.Log(ctx, logs.Alert, "payment arrived for an order that cannot be paid; refund it",
			append(args, "order_status", p.RefundReason)...)
		return rec, nil
	}
	s.Log.Info("order paid", append(args, "status", order.Paid)...)
	return rec, nil
}

// paymentEvents are the events of a payment recorded now: the order paid,
// or a refund owed (after the order's close when the payment closed it).
func paymentEvents(rec payment.Recorded, txID string, amount order.Money) []outbox.Event {
	if rec.Payment.Outcome != payment.Refund {
		e := outbox.Of(outbox.OrderPaid, rec.Order)
		e.Data.TransactionID = txID
		return []outbox.Event{e}
	}
	var evs []outbox.Event
	if rec.Closed {
		evs = append(evs, outbox.Of(outbox.OrderClosed, rec.Order))
	}
	return append(evs, outbox.Refund(rec.Order, txID, amount))
}

// notInMySQL says why MySQL has no order orderNo: still on its way, or none.
func (s *Service) notInMySQL(ctx context.Context, orderNo string) error {
	if order.TagOf(orderNo) == 0 {
		return order.ErrNotFound
	}
	info, err := s.Stock.Reservation(ctx, orderNo)
	if errors.Is(err, order.ErrNotFound) {
		return order.Errorf(order.ErrNotFound, "no order %s", orderNo)
	}
	if err != nil {
		return err
	}
	if info.State == reservation.StateReserved || info.State == reservation.StateClaimed || info.State == reservation.StateConfirmed {
		return order.Errorf(order.ErrNotPayable, "the order is still being placed; retry shortly")
	}
	return order.Errorf(order.ErrNotFound, "no order %s", orderNo)
}
