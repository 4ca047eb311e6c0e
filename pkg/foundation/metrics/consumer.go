package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Consumer measures the fulfilment loop:
//
//	seckill_consumer_batch_messages
//	seckill_consumer_batch_duration_seconds
//	seckill_consumer_events_total{outcome}
//	seckill_consumer_fulfil_delay_seconds
//	seckill_consumer_batch_retries_total
//	seckill_consumer_commit_failures_total
//	seckill_consumer_fetch_errors_total
//	seckill_consumer_dead_letters_total
//	seckill_consumer_lag_messages{partition}
type Consumer struct {
	batchMessages  prometheus.Histogram
	batchDuration  prometheus.Histogram
	events         *prometheus.CounterVec
	fulfilDelay    prometheus.Histogram
	retries        prometheus.Counter
	commitFailures prometheus.Counter
	fetchErrors    prometheus.Counter
	deadLetters    prometheus.Counter
	lag            *prometheus.GaugeVec

	mu         sync.Mutex
	partitions map[int]prometheus.Gauge
}

// NewConsumer registers the consumer metrics on reg.
func NewConsumer(reg prometheus.Registerer) *Consumer {
	m := &Consumer{
		batchMessages: histogram(reg, "consumer", "batch_messages",
			"Messages in each batch the consumer made final and committed.",
			[]float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}),
		batchDuration: histogram(reg, "consumer", "batch_duration_seconds",
			"Time to make one batch final (claim, MySQL, confirm or release; retries included) and commit its offsets.", slowBuckets),
		fulfilDelay: histogram(reg, "consumer", "fulfil_delay_seconds",
			"Time from the reservation in the API to the order's row in MySQL (how long an order stays PENDING).",
			[]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}),
		retries: counter(reg, "consumer", "batch_retries_total",
			"Failed attempts at a batch; the batch is retried with backoff until it is final."),
		commitFailures: counter(reg, "consumer", "commit_failures_total",
			"Failed offset commits of batches that were already final."),
		fetchErrors: counter(reg, "consumer", "fetch_errors_total", "Failed fetches from Kafka."),
		deadLetters: counter(reg, "consumer", "dead_letters_total",
			"Poison messages written to the dead-letter topic."),
		lag: gaugeVec(reg, "consumer", "lag_messages",
			"Messages behind the partition's end after the last committed batch of that partition in this process (stale once the partition moved to another consumer: use max by partition).",
			"partition"),
		partitions: map[int]prometheus.Gauge{},
	}
	m.events = counterVec(reg, "consumer", "events_total",
		"Create-order events made final, by outcome: created (new order), failed (MySQL refused it: out of stock, already purchased), existing (already in MySQL: a redelivery), skipped (the API had released its reservation).",
		"outcome")
	// Every outcome's series exists from the start, at 0, so a rate over it
	// has a value before the first such event.
	for _, outcome := range []string{"created", "failed", "existing", "skipped"} {
		m.events.WithLabelValues(outcome)
	}
	return m
}

// Batch records a batch of n messages made final and committed in d.
func (m *Consumer) Batch(n int, d time.Duration) {
	if m == nil {
		return
	}
	m.batchMessages.Observe(float64(n))
	m.batchDuration.Observe(d.Seconds())
}

// Events records the outcomes of a final batch's events: how many had
// each outcome label.
func (m *Consumer) Events(byOutcome map[string]int) {
	if m == nil {
		return
	}
	for outcome, n := range byOutcome {
		m.events.WithLabelValues(outcome).Add(float64(n))
	}
}

// FulfilDelay records how long a new order was PENDING.
func (m *Consumer) FulfilDelay(d time.Duration) {
	if m != nil {
		m.fulfilDelay.Observe(d.Seconds())
	}
}

// FulfilDelayTrace is FulfilDelay with the id of the order's sampled trace
// as the exemplar ("" is FulfilDelay): a slow order on the dashboard links
// to its trace.
func (m *Consumer) FulfilDelayTrace(d time.Duration, traceID string) {
	if m == nil {
		return
	}
	if eo, ok := m.fulfilDelay.(prometheus.ExemplarObserver); ok && traceID != "" {
		eo.ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": traceID})
		return
	}
	m.fulfilDelay.Observe(d.Seconds())
}

// Retry records a failed attempt at a batch.
func (m *Consumer) Retry() {
	if m != nil {
		m.retries.Inc()
	}
}

// CommitFailed records a failed offset commit.
func (m *Consumer) CommitFailed() {
	if m != nil {
		m.commitFailures.Inc()
	}
}

// FetchFailed records a failed fetch.
func (m *Consumer) FetchFailed() {
	if m != nil {
		m.fetchErrors.Inc()
	}
}

// DeadLettered records a message written to the dead-letter topic.
func (m *Consumer) DeadLettered() {
	if m != nil {
		m.deadLetters.Inc()
	}
}

// Lag sets how many messages partition holds past the last one committed.
func (m *Consumer) Lag(partition int, messages int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	g, ok := m.partitions[partition]
	if !ok {
		g = m.lag.WithLabelValues(strconv.Itoa(partition))
		m.partitions[partition] = g
	}
	m.mu.Unlock()
	g.Set(float64(max(messages, 0)))
}

// Sweep measures the stranded-reservation sweep:
//
//	seckill_sweep_reservations_total{action}
//	seckill_sweep_errors_total
type Sweep struct {
	confirmed, released, republished prometheus.Counter
	errors                           prometheus.Counter
}

// NewSweep registers the sweep metrics on reg.
func NewSweep(reg prometheus.Registerer) *Sweep {
	v := counterVec(reg, "sweep", "reservations_total",
		"Stranded reservations the sweep finished, by action: confirmed or released (MySQL had decided), republished (the event went to Kafka again).",
		"action")
	return &Sweep{
		confirmed: v.WithLabelValues("confirmed"), released: v.WithLabelValues("released"),
		republished: v.WithLabelValues("republished"),
		errors:      counter(reg, "sweep", "errors_total", "Sweep passes that failed part-way (retried next pass)."),
	}
}

// Swept records what one sweep pass did.
func (m *Sweep) Swept(confirmed, released, republished int) {
	if m == nil {
		return
	}
	m.confirmed.Add(float64(confirmed))
	m.released.Add(float64(released))
	m.republished.Add(float64(republished))
}

// Failed records a sweep pass that failed.
func (m *Sweep) Failed() {
	if m != nil {
		m.errors.Inc()
	}
}

// Closer measures the payment-timeout closer:
//
//	seckill_closer_orders_closed_total
//	seckill_closer_releases_finished_total
//	seckill_closer_errors_total
type Closer struct {
	closed, finished, errors prometheus.Counter
}

// NewCloser registers the closer metrics on reg.
func NewCloser(reg prometheus.Registerer) *Closer {
	return &Closer{
		closed: counter(reg, "closer", "orders_closed_total",
			"Unpaid orders closed because their payment window ended (stock and quota given back)."),
		finished: counter(reg, "closer", "releases_finished_total",
			"Redis releases of closed orders that a crash had interrupted, finished by the closer."),
		errors: counter(reg, "closer", "errors_total", "Closer passes that failed part-way (retried next pass)."),
	}
}

// Closed records what one closer pass did.
func (m *Closer) Closed(closed, finished int) {
	if m == nil {
		return
	}
	m.closed.Add(float64(closed))
	m.finished.Add(float64(finished))
}

// Failed records a closer pass that failed.
func (m *Closer) Failed() {
	if m != nil {
		m.errors.Inc()
	}
}
