package metrics

import "github.com/prometheus/client_golang/prometheus"

// Payment notification outcomes, the label values of
// seckill_payment_notifications_total.
const (
	PaymentPaid            = "paid"            // it paid a CREATED order
	PaymentRefund          = "refund"          // recorded as a refund owed (the order was CLOSED, FAILED or paid already)
	PaymentDuplicate       = "duplicate"       // its transaction was recorded before: nothing changed
	PaymentRefused         = "refused"         // 4xx: bad body, amount mismatch, no such order, ...
	PaymentUnauthenticated = "unauthenticated" // bad or stale signature
	PaymentError           = "error"           // 5xx: the provider retries
)

// Payments measures payment notifications in the API:
//
//	seckill_payment_notifications_total{outcome}
//	seckill_payment_refunds_needed_total
type Payments struct {
	notifications *prometheus.CounterVec
	refunds       prometheus.Counter
}

// NewPayments registers the payment metrics on reg.
func NewPayments(reg prometheus.Registerer) *Payments {
	m := &Payments{
		notifications: counterVec(reg, "payment", "notifications_total",
			"Payment notifications by outcome: paid, refund, duplicate, refused (4xx), unauthenticated (bad or stale signature), error (5xx).",
			"outcome"),
		refunds: counter(reg, "payment", "refunds_needed_total",
			"Payments that arrived for an order that could not be paid any more (CLOSED, FAILED, or already paid) and are owed back: rows of payments with outcome REFUND. Alert on any increase."),
	}
	for _, o := range []string{PaymentPaid, PaymentRefund, PaymentDuplicate, PaymentRefused, PaymentUnauthenticated, PaymentError} {
		m.notifications.WithLabelValues(o)
	}
	return m
}

// Notified counts one notification's outcome; a refund also counts as a
// refund needed.
func (m *Payments) Notified(outcome string) {
	if m == nil {
		return
	}
	m.notifications.WithLabelValues(outcome).Inc()
	if outcome == PaymentRefund {
		m.refunds.Inc()
	}
}
