package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of one send of a webhook delivery.
const (
	WebhookDelivered = "delivered" // the endpoint answered 2xx
	WebhookRetry     = "retry"     // it failed; tried again later
	WebhookGaveUp    = "gave_up"   // it failed the last try of the schedule
)

// Webhooks measures the consumer's webhook dispatcher (pkg/service/webhooks):
//
//	seckill_webhook_sends_total{result}
//	seckill_webhook_delivery_lag_seconds
//	seckill_webhook_endpoints{state}
//	seckill_webhook_endpoints_disabled_total
//
// delivery_lag_seconds is the time from the commit of an event to its
// delivery (a 2xx) to an endpoint. endpoints counts them by state:
// enabled, disabled (by an operator) and failing (turned off after failing
// for a day; the alert SeckillWebhookEndpointDisabled).
type Webhooks struct {
	sends     *prometheus.CounterVec
	lag       prometheus.Histogram
	endpoints *prometheus.GaugeVec
	disabled  prometheus.Counter
}

// The states seckill_webhook_endpoints counts.
const (
	EndpointEnabled  = "enabled"
	EndpointDisabled = "disabled"
	EndpointFailing  = "failing"
)

// NewWebhooks registers the dispatcher's metrics on reg.
func NewWebhooks(reg prometheus.Registerer) *Webhooks {
	m := &Webhooks{
		sends: counterVec(reg, "webhook", "sends_total",
			"Sends of webhook deliveries, by result (delivered, retry, gave_up).", "result"),
		lag: histogram(reg, "webhook", "delivery_lag_seconds",
			"Time from the commit of an event to its delivery (a 2xx) to a webhook endpoint.",
			[]float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600}),
		endpoints: gaugeVec(reg, "webhook", "endpoints",
			"Webhook endpoints by state (enabled; disabled by an operator; failing: turned off after failing for a day).", "state"),
		disabled: counter(reg, "webhook", "endpoints_disabled_total",
			"Webhook endpoints the dispatcher turned off because every delivery failed for a day."),
	}
	for _, r := range []string{WebhookDelivered, WebhookRetry, WebhookGaveUp} {
		m.sends.WithLabelValues(r)
	}
	for _, s := range []string{EndpointEnabled, EndpointDisabled, EndpointFailing} {
		m.endpoints.WithLabelValues(s)
	}
	return m
}

// Sent records one send's result; lag is the event's age when delivered.
func (m *Webhooks) Sent(result string, lag time.Duration) {
	if m == nil {
		return
	}
	m.sends.WithLabelValues(result).Inc()
	if result == WebhookDelivered {
		m.lag.Observe(lag.Seconds())
	}
}

// Endpoints sets the count of endpoints in each state.
func (m *Webhooks) Endpoints(enabled, disabled, failing int) {
	if m == nil {
		return
	}
	m.endpoints.WithLabelValues(EndpointEnabled).Set(float64(enabled))
	m.endpoints.WithLabelValues(EndpointDisabled).Set(float64(disabled))
	m.endpoints.WithLabelValues(EndpointFailing).Set(float64(failing))
}

// Disabled records an endpoint turned off for failing.
func (m *Webhooks) Disabled() {
	if m != nil {
		m.disabled.Inc()
	}
}
