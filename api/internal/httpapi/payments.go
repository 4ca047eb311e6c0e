package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/payment"
	"github.com/seckill/seckill/pkg/foundation/metrics"
)

// WithPayments takes payment notifications signed with secret (none when
// empty: the route answers 503) and counts them in m.
func WithPayments(secret []byte, m *metrics.Payments) Option {
	return func(s *Server) { s.paymentSecret, s.paymentMetrics = secret, m }
}

// WithBuyerPay turns the buyer-facing POST /api/v1/orders/{order_no}/pay on
// or off (off: 403; payments then arrive only as provider notifications).
func WithBuyerPay(on bool) Option {
	return func(s *Server) { s.buyerPayOff = !on }
}

// paymentView is the body of a payment notification's 200 answer.
type paymentView struct {
	TransactionID string       `json:"transaction_id"`
	OrderNo       string       `json:"order_no"`
	Outcome       string       `json:"outcome"`
	OrderStatus   order.Status `json:"order_status"`
	Duplicate     bool         `json:"duplicate"`
}

var txIDChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.:"

// paymentNotification takes the provider's signed server-to-server
// notification that money moved for an order.
func (s *Server) paymentNotification(c *gin.Context) {
	outcome := metrics.PaymentRefused
	defer func() { s.paymentMetrics.Notified(outcome) }()
	if len(s.paymentSecret) == 0 {
		outcome = metrics.PaymentError
		writeError(c, http.StatusServiceUnavailable, "UNAVAILABLE", "payment notifications are not configured on this server (SECKILL_PAYMENT_SECRET)")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(c, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", fmt.Sprintf("the body must be at most %d bytes", MaxBody))
			return
		}
		writeError(c, http.StatusBadRequest, "INVALID_ARGUMENT", "cannot read body")
		return
	}
	// The signature covers the raw bytes: verify before parsing anything.
	if err := payment.Verify(s.paymentSecret, body, c.GetHeader(payment.Header), time.Now()); err != nil {
		outcome = metrics.PaymentUnauthenticated
		writeError(c, http.StatusUnauthorized, "SIGNATURE_INVALID", err.Error())
		return
	}
	var n payment.Notification
	if err := DecodeJSON(body, &n); err != nil {
		s.fail(c, err)
		return
	}
	amount, err := validateNotification(n)
	if err != nil {
		s.fail(c, err)
		return
	}
	rec, err := s.lifecycle.RecordPayment(s.logContext(c), n.TransactionID, n.OrderNo, amount)
	if err != nil {
		if errors.Is(err, order.ErrUnavailable) || !isClientError(err) {
			outcome = metrics.PaymentError
		}
		s.fail(c, err)
		return
	}
	switch {
	case rec.Duplicate:
		outcome = metrics.PaymentDuplicate
	case rec.Payment.Outcome == "REFUND":
		outcome = metrics.PaymentRefund
	default:
		outcome = metrics.PaymentPaid
	}
	c.JSON(http.StatusOK, paymentView{TransactionID: rec.Payment.TransactionID, OrderNo: rec.Payment.OrderNo,
		Outcome: rec.Payment.Outcome, OrderStatus: rec.Order.Status, Duplicate: rec.Duplicate})
}

// isClientError reports whether err is one of the domain errors answered
// with a 4xx.
func isClientError(err error) bool {
	for _, e := range []error{order.ErrInvalidArgument, order.ErrNotFound, order.ErrNotPayable, order.ErrPaymentRefused} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// validate checks the fields of a notification.
func validateNotification(n payment.Notification) (order.Money, error) {
	if n.TransactionID == "" || len(n.TransactionID) > 128 || strings.Trim(n.TransactionID, txIDChars) != "" {
		return order.Money{}, order.Errorf(order.ErrInvalidArgument, "transaction_id must be 1-128 characters of A-Z a-z 0-9 _ - . :")
	}
	if !order.ValidOrderNo(n.OrderNo) {
		return order.Money{}, order.Errorf(order.ErrInvalidArgument, "order_no is not an order number")
	}
	if n.Amount == nil {
		return order.Money{}, order.Errorf(order.ErrInvalidArgument, "amount is required: an integer of minor units")
	}
	if *n.Amount < 0 {
		return order.Money{}, order.Errorf(order.ErrInvalidArgument, "amount must not be negative")
	}
	if !order.ValidCurrency(n.Currency) {
		return order.Money{}, order.Errorf(order.ErrInvalidArgument, "currency must be an ISO 4217 code of three capital letters, such as EUR")
	}
	return order.Money{Amount: *n.Amount, Currency: n.Currency}, nil
}
