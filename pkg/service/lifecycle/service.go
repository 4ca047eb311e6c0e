// Package lifecycle moves orders after they exist: pay, cancel, and close
// on payment timeout, giving stock and quota back to both stores. Every
// transition is a compare-and-set in MySQL; the Redis release that follows a
// close is at most once, and a crash between the two is finished by the
// next closer run.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/domain/payment"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/failpoint"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// Service runs the transitions.
type Service struct {
	// Tx is the unit of work each transition's MySQL change runs in, with
	// the event it makes (Events).
	Tx       unit.Work
	Events   Events
	DB       Orders
	Payments Payments
	Stock    Stock
	// Numbers vouches for the order numbers the api issued (see Find);
	// nil vouches for none.
	Numbers Numbers
	// Lists and Refunds serve the reads (lists.go).
	Lists   Lists
	Refunds Refunds
	Log     *slog.Logger
}

// Pay marks the user's order PAID. Paying a PAID order again succeeds; an
// order of a cancelled sale is not payable (MySQL decides, see
// orderdb.DB.Pay), nor one past its payment window.
func (s *Service) Pay(ctx context.Context, user, orderNo string) (order.Order, error) {
	if err := s.pendingOrMissing(ctx, user, orderNo, order.ErrNotPayable); err != nil {
		return order.Order{}, err
	}
	tr, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (order.Transition, error) {
		return s.changed(ctx, outbox.OrderPaid)(s.DB.Pay(ctx, user, orderNo))
	})
	if err != nil {
		return order.Order{}, err
	}
	o := tr.Order
	switch {
	case o.UserID != user:
		return order.Order{}, order.ErrNotFound
	case o.Status == order.Paid:
		if tr.Won {
			s.Log.Info("order paid", "order_no", orderNo, "request_id", logs.RequestID(ctx), "user_id", user,
				"item_id", o.ItemID, "status", order.Paid)
		}
		return o, nil
	case o.Status == order.Created && tr.SaleCancelled:
		return order.Order{}, order.Errorf(order.ErrNotPayable, "the sale was cancelled")
	case o.Status == order.Created:
		return order.Order{}, order.Errorf(order.ErrNotPayable, "the payment window has passed")
	}
	return order.Order{}, order.Errorf(order.ErrNotPayable, "the order is %s", o.Status)
}

// Cancel closes the user's unpaid order and gives its stock and quota back.
// Cancelling a CLOSED order again succeeds.
func (s *Service) Cancel(ctx context.Context, user, orderNo string) (order.Order, error) {
	if err := s.pendingOrMissing(ctx, user, orderNo, order.ErrNotCancellable); err != nil {
		return order.Order{}, err
	}
	o, _, err := s.close(ctx, user, orderNo, order.ReasonCancelled)
	if err != nil {
		return order.Order{}, err
	}
	switch {
	case o.UserID != user:
		return order.Order{}, order.ErrNotFound
	case o.Status == order.Closed:
		return o, nil
	}
	return order.Order{}, order.Errorf(order.ErrNotCancellable, "the order is %s", o.Status)
}

// pendingOrMissing returns ErrNotFound for an order the user does not own
// or that does not exist, notYet when it is still on its way (PENDING) or
// failed before reaching MySQL, and nil when MySQL has it.
func (s *Service) pendingOrMissing(ctx context.Context, user, orderNo string, notYet error) error {
	o, inMySQL, err := Find(ctx, s.DB, s.Stock, s.Numbers, user, orderNo)
	switch {
	case err != nil:
		return err
	case inMySQL:
		return nil
	case o.Status == order.Failed:
		return order.Errorf(notYet, "the order failed")
	}
	return order.Errorf(notYet, "the order is still being placed; retry shortly")
}

// Events is the outbox (*orderdb.Outbox): each transition's event is
// written in its unit.
type Events interface {
	Record(ctx context.Context, evs ...outbox.Event) error
}

// changed records the event t of a transition this call won, in ctx's
// unit, and passes the transition on.
func (s *Service) changed(ctx context.Context, t outbox.Type) func(order.Transition, error) (order.Transition, error) {
	return func(tr order.Transition, err error) (order.Transition, error) {
		if err != nil || !tr.Won {
			return tr, err
		}
		return tr, s.Events.Record(ctx, outbox.Of(t, tr.Order))
	}
}

// OrderReader reads an order's MySQL row.
type OrderReader interface {
	Order(ctx context.Context, orderNo string) (order.Order, error)
}

// Orders is MySQL as the transitions use it (*orderdb.Orders).
type Orders interface {
	OrderReader
	Pay(ctx context.Context, user, orderNo string) (order.Transition, error)
	CloseOrder(ctx context.Context, user, orderNo, reason string) (order.Transition, error)
	MarkReleased(ctx context.Context, orderNo string) error
	CancelledUnpaid(ctx context.Context, activity int64, limit int) ([]string, error)
	ExpiredUnpaid(ctx context.Context, now time.Time, limit int) ([]string, error)
	ReleasesDue(ctx context.Context, olderThan time.Time, limit int) ([]order.Order, error)
}

// Payments is MySQL as a payment is recorded (*orderdb.Payments).
type Payments interface {
	RecordPayment(ctx context.Context, p payment.Transaction) (payment.Recorded, error)
}

// ReservationReader reads a reservation in Redis (*stockredis.Store).
type ReservationReader interface {
	Reservation(ctx context.Context, orderNo string) (reservation.Info, error)
}

// Stock is Redis as the transitions use it (*stockredis.Store).
type Stock interface {
	ReservationReader
	Release(ctx context.Context, r reservation.Ref, o reservation.ReleaseOptions) (reservation.Released, error)
}

// Numbers tells an order number the api issued for a user from one it
// never issued (order.NumberGenerator).
type Numbers interface {
	Issued(orderNo, user string) bool
}

// Find returns the user's order: MySQL's row once the consumer wrote it
// (inMySQL), otherwise the reservation in Redis as a PENDING order, or a
// FAILED one when it was released before reaching MySQL. When neither has
// it, a number that numbers issued for this user within order.KeyMargin of
// now is still PENDING (Redis lost the reservation, and the consumer has
// yet to write the order): its time and item come from the number (for a
// sale of several items, the number names the sale's first item, not the
// one bought), its activity and quantity are unknown (zero). Any other order that does not
// exist, or that another user owns, is order.ErrNotFound.
func Find(ctx context.Context, orders OrderReader, stock ReservationReader, numbers Numbers, user, orderNo string) (o order.Order, inMySQL bool, err error) {
	tag := order.TagOf(orderNo)
	if tag == 0 {
		return order.Order{}, false, order.ErrNotFound
	}
	o, err = orders.Order(ctx, orderNo)
	if err == nil {
		if o.UserID != user {
			return order.Order{}, false, order.ErrNotFound
		}
		return o, true, nil
	}
	if !errors.Is(err, order.ErrNotFound) {
		return order.Order{}, false, err
	}
	info, err := stock.Reservation(ctx, orderNo)
	if errors.Is(err, order.ErrNotFound) {
		return issued(numbers, user, orderNo, tag)
	}
	if err != nil {
		return order.Order{}, false, err
	}
	if info.UserID != user {
		return order.Order{}, false, order.ErrNotFound
	}
	o = order.Order{
		OrderNo: orderNo, UserID: user, ItemID: info.ItemID, ActivityID: info.ActivityID,
		Quantity: info.Quantity, Status: order.Pending, IdempotencyKey: info.IdempotencyKey,
		CreatedAt: info.ReservedAt, UpdatedAt: info.ReservedAt,
	}
	if info.State == reservation.StateReleased {
		o.Status, o.FailureReason = order.Failed, info.Reason
	}
	return o, false, nil
}

// issued answers for an order neither store has: PENDING when numbers
// issued orderNo for user lately, else order.ErrNotFound.
func issued(numbers Numbers, user, orderNo string, item int64) (order.Order, bool, error) {
	at, _ := order.NumberTime(orderNo)
	if numbers == nil || !order.Recent(orderNo, time.Now()) || !numbers.Issued(orderNo, user) {
		return order.Order{}, false, order.ErrNotFound
	}
	return order.Order{OrderNo: orderNo, UserID: user, ItemID: item, Status: order.Pending, CreatedAt: at, UpdatedAt: at}, false, nil
}

// close runs the MySQL compare-and-set and, when it won, the Redis release.
// It returns the order and whether this call closed it.
func (s *Service) close(ctx context.Context, user, orderNo, reason string) (order.Order, bool, error) {
	tr, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (order.Transition, error) {
		return s.changed(ctx, outbox.OrderClosed)(s.DB.CloseOrder(ctx, user, orderNo, reason))
	})
	if err != nil {
		return order.Order{}, false, err
	}
	if !tr.Won {
		return tr.Order, false, nil
	}
	s.Log.Info("order closed", "order_no", orderNo, "request_id", logs.RequestID(ctx), "user_id", tr.Order.UserID,
		"item_id", tr.Order.ItemID, "reason", reason, "status", order.Closed)
	failpoint.Inject("close-after-commit")
	// The release needs to happen even if the caller goes away now.
	if err := s.release(context.WithoutCancel(ctx), tr.Order, reason); err != nil {
		// MySQL already closed it: the closer's ReleasesDue pass finishes.
		s.Log.Warn("release after close failed; the closer will finish it", "order_no", orderNo,
			"request_id", logs.RequestID(ctx), "err", err)
	}
	return tr.Order, true, nil
}

// release gives the closed order's Redis stock and quota back (at most
// once, by the reservation state machine) and records it in MySQL.
func (s *Service) release(ctx context.Context, o order.Order, reason string) error {
	ref := reservation.OrderRef(o)
	// MySQL closed the order, so its reservation goes from whichever live
	// state it is in: CONFIRMED normally, or RESERVED or CLAIMED when Redis
	// came back from an older state.
	rel, err := s.Stock.Release(ctx, ref, reservation.ReleaseOptions{Reason: reason,
		From: []reservation.State{reservation.StateReserved, reservation.StateClaimed, reservation.StateConfirmed}})
	if err != nil {
		return err
	}
	if !rel.Gone() {
		return fmt.Errorf("release closed order %s: reservation is %s", o.OrderNo, rel.State)
	}
	return s.DB.MarkReleased(ctx, o.OrderNo)
}

// Stats counts what one closer pass did.
type Stats struct {
	Closed, Finished int
}

// Backoff keeps the records a pass failed on out of it for a while
// (consumer/internal/backoff.Records): a pass skips an order that is not
// Due, reports each failure, and goes on with the others.
type Backoff interface {
	Due(key string) bool
	Failed(key string, err error, attrs ...any)
	Succeeded(key string, attrs ...any)
}

// CloseCancelled closes up to limit CREATED orders of the cancelled sale
// activity (0: of every cancelled sale), each as a buyer's cancel would,
// and returns how many this call closed. An order that fails does not stop
// the others: the failures are returned together.
func (s *Service) CloseCancelled(ctx context.Context, activity int64, limit int) (int, error) {
	return s.closeCancelled(ctx, activity, limit, nil)
}

func (s *Service) closeCancelled(ctx context.Context, activity int64, limit int, b Backoff) (int, error) {
	nos, err := s.DB.CancelledUnpaid(ctx, activity, limit)
	if err != nil {
		return 0, err
	}
	return s.closeAll(ctx, nos, order.ReasonSaleCancelled, b)
}

// eachOrder runs f on each order of nos that b has due, in order. A
// failure is given to b (with b nil, it is returned with the others) and
// the rest go on; the context ending stops it.
func eachOrder(ctx context.Context, nos []string, b Backoff, f func(no string) error) error {
	var errs []error
	for _, no := range nos {
		if b != nil && !b.Due(no) {
			continue
		}
		err := f(no)
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
		switch {
		case err == nil && b != nil:
			b.Succeeded(no, "order_no", no)
		case err != nil && b != nil:
			b.Failed(no, err, "order_no", no)
		case err != nil:
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeAll closes the orders nos and counts the closes this call made.
func (s *Service) closeAll(ctx context.Context, nos []string, reason string, b Backoff) (int, error) {
	n := 0
	err := eachOrder(ctx, nos, b, func(no string) error {
		_, won, err := s.close(ctx, "", no, reason)
		if won { // not a close that a cancel or another closer made
			n++
		}
		return err
	})
	return n, err
}

// CloseExpired closes up to limit unpaid orders past their deadline and up
// to limit CREATED orders of cancelled sales (orders that reached MySQL
// after the cancel closed the others), then finishes the Redis release of
// closed orders whose release was not recorded (the process died between
// the two steps). An order that fails is given to b and skipped while b
// says it is not due, and the pass goes on with the others (b nil: the
// failures are returned together, after the rest); only a failed list, or
// ctx ending, stops it.
func (s *Service) CloseExpired(ctx context.Context, now time.Time, limit int, b Backoff) (Stats, error) {
	var st Stats
	nos, err := s.DB.ExpiredUnpaid(ctx, now, limit)
	if err != nil {
		return st, err
	}
	n, errExpired := s.closeAll(ctx, nos, order.ReasonPaymentTimeout, b)
	st.Closed += n
	if ctx.Err() != nil {
		return st, errExpired
	}
	n, err = s.closeCancelled(ctx, 0, limit, b)
	st.Closed += n
	if ctx.Err() != nil {
		return st, errors.Join(errExpired, err)
	}
	errExpired = errors.Join(errExpired, err)
	due, err := s.DB.ReleasesDue(ctx, now.Add(-2*time.Second), limit)
	if err != nil {
		return st, errors.Join(errExpired, err)
	}
	byNo := make(map[string]order.Order, len(due))
	nos = make([]string, 0, len(due))
	for _, o := range due {
		byNo[o.OrderNo] = o
		nos = append(nos, o.OrderNo)
	}
	err = eachOrder(ctx, nos, b, func(no string) error {
		o := byNo[no]
		if err := s.release(ctx, o, o.FailureReason); err != nil {
			return err
		}
		st.Finished++
		s.Log.Info("release after close finished", "order_no", o.OrderNo, "item_id", o.ItemID)
		return nil
	})
	return st, errors.Join(errExpired, err)
}
