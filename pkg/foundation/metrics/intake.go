package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ReserveOutcome is what one run of the reserve script answered.
type ReserveOutcome int

// The reserve script's outcomes; the label values are in reserveOutcomes.
const (
	ReserveAccepted ReserveOutcome = iota
	ReserveSoldOut
	ReserveAlreadyPurchased
	ReserveDuplicateKey
	ReserveNotWarmed
	ReserveError
	// ReserveCodeRefused: the order's presale code was invalid or had no
	// use left (a buyer's answer, not a fault).
	ReserveCodeRefused
	reserveOutcomeCount
)

var reserveOutcomes = [reserveOutcomeCount]string{
	ReserveAccepted:         "accepted",
	ReserveSoldOut:          "sold_out",
	ReserveAlreadyPurchased: "already_purchased",
	ReserveDuplicateKey:     "duplicate_key",
	ReserveNotWarmed:        "not_warmed",
	ReserveError:            "error",
	ReserveCodeRefused:      "code_refused",
}

// String returns the outcome's label value.
func (o ReserveOutcome) String() string {
	if o < 0 || o >= reserveOutcomeCount {
		return reserveOutcomes[ReserveError]
	}
	return reserveOutcomes[o]
}

// Unpublished outcomes: what became of a reservation the API could not
// confirm (its publish failed, or the reserve script's answer was lost).
const (
	UnpublishedReleased = "released" // recorded FAILED in MySQL and given back in Redis; the buyer got 503
	// UnpublishedUnrecorded: given back in Redis, but MySQL could not
	// record it FAILED; the buyer got 503, and a Redis loss before its
	// event (if Kafka took it) is read makes the order after all.
	UnpublishedUnrecorded = "released_unrecorded"
	UnpublishedClaimed    = "claimed"   // a consumer had claimed it: Kafka took the event after all; the buyer got 202
	UnpublishedAbandoned  = "abandoned" // Redis could not be told: recorded FAILED in MySQL, the sweep gives it back; the buyer got 503
	UnpublishedKept       = "kept"      // neither Redis nor MySQL could be told (two faults); the sweep re-publishes it
)

// Intake measures order placement in the API:
//
//	seckill_reserve_total{outcome}
//	seckill_reserve_duration_seconds
//	seckill_reserve_skipped_sold_out_total
//	seckill_publish_total{result}
//	seckill_publish_duration_seconds
//	seckill_unpublished_reservations_total{outcome}
type Intake struct {
	reserve         [reserveOutcomeCount]prometheus.Counter
	reserveDuration prometheus.Histogram
	skippedSoldOut  prometheus.Counter
	publishOK       prometheus.Counter
	publishFailed   prometheus.Counter
	publishDuration prometheus.Histogram
	unpublished     *prometheus.CounterVec
}

// NewIntake registers the intake metrics on reg.
func NewIntake(reg prometheus.Registerer) *Intake {
	m := &Intake{
		reserveDuration: histogram(reg, "reserve", "duration_seconds",
			"Round trip of one reserve script run (Redis), whatever it answered.", fastBuckets),
		skippedSoldOut: counter(reg, "reserve", "skipped_sold_out_total",
			"Order attempts refused from the in-process sold-out flag without running the reserve script (SOLD_OUT, or ALREADY_PURCHASED for a buyer holding an order)."),
		publishDuration: histogram(reg, "publish", "duration_seconds",
			"Time to publish one create-order event until every in-sync replica acknowledged (or the publish failed).", slowBuckets),
		unpublished: counterVec(reg, "", "unpublished_reservations_total",
			"Reservations the API could not confirm (the publish failed, or the reserve script's answer was lost), by what became of them: released, released_unrecorded (given back in Redis only: MySQL could not record it FAILED), claimed (Kafka took the event after all), abandoned (recorded FAILED in MySQL; the sweep gives it back) or kept (Redis and MySQL both failed; the sweep re-publishes it).",
			"outcome"),
	}
	outcomes := counterVec(reg, "reserve", "total",
		"Reserve script runs by outcome: accepted, sold_out, already_purchased, duplicate_key (idempotent replay), not_warmed, error (Redis unreachable or an unexpected reply).",
		"outcome")
	for o := range reserveOutcomeCount {
		m.reserve[o] = outcomes.WithLabelValues(o.String())
	}
	published := counterVec(reg, "publish", "total", "Create-order events published by the API, by result (ok, error).", "result")
	m.publishOK, m.publishFailed = published.WithLabelValues("ok"), published.WithLabelValues("error")
	for _, o := range []string{UnpublishedReleased, UnpublishedUnrecorded, UnpublishedClaimed, UnpublishedAbandoned, UnpublishedKept} {
		m.unpublished.WithLabelValues(o)
	}
	return m
}

// Reserved records one reserve script run that took d.
func (m *Intake) Reserved(o ReserveOutcome, d time.Duration) {
	if m == nil {
		return
	}
	if o < 0 || o >= reserveOutcomeCount {
		o = ReserveError
	}
	m.reserve[o].Inc()
	m.reserveDuration.Observe(d.Seconds())
}

// SkippedSoldOut records an attempt refused by the sold-out flag.
func (m *Intake) SkippedSoldOut() {
	if m != nil {
		m.skippedSoldOut.Inc()
	}
}

// Published records one publish that took d; err is its result.
func (m *Intake) Published(err error, d time.Duration) {
	if m == nil {
		return
	}
	if err != nil {
		m.publishFailed.Inc()
	} else {
		m.publishOK.Inc()
	}
	m.publishDuration.Observe(d.Seconds())
}

// Unpublished records what became of a reservation the API could not
// confirm (one of the Unpublished outcomes).
func (m *Intake) Unpublished(outcome string) {
	if m != nil {
		m.unpublished.WithLabelValues(outcome).Inc()
	}
}
