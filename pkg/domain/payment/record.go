package payment

import (
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// The outcomes of a recorded transaction.
const (
	// Paid: the payment moved its order from CREATED to PAID.
	Paid = "PAID"
	// Refund: the money arrived for an order that could not be paid any
	// more; it is owed back to the buyer.
	Refund = "REFUND"
)

// Transaction is one provider transaction as recorded.
type Transaction struct {
	TransactionID string
	OrderNo       string
	Amount        order.Money
	Outcome       string
	// RefundReason is the order's status when a REFUND payment arrived.
	RefundReason string
	ReceivedAt   time.Time
}

// Recorded is what recording a transaction did.
type Recorded struct {
	Payment Transaction
	// Order is the order after the payment.
	Order order.Order
	// Duplicate is true when the transaction was recorded before: nothing
	// changed now.
	Duplicate bool
	// Closed is true when the recording found the order CREATED past its
	// payment window or in a cancelled sale and closed it (its units went
	// back to the stock in the same transaction; Order.FailureReason says
	// why): the caller releases the Redis reservation next, as after any
	// close.
	Closed bool
}
