package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Passes measures the records the consumer's periodic passes (the
// scheduled warm-up, the closer, the sweep) failed on and skip for a while
// (consumer/internal/backoff), by pass:
//
//	seckill_pass_record_failures_total{pass}
//	seckill_pass_records_skipped{pass}
type Passes struct {
	failures *prometheus.CounterVec
	skipped  *prometheus.GaugeVec

	mu     sync.Mutex
	byPass map[string]passSeries
}

type passSeries struct {
	failures prometheus.Counter
	skipped  prometheus.Gauge
}

// The passes, the values of the pass label.
const (
	PassWarmup = "warmup"
	PassCloser = "closer"
	PassSweep  = "sweep"
	PassDraw   = "draw"
)

// NewPasses registers the pass metrics on reg, with a zero series for each
// pass (so a rate over them starts at 0, not at the first failure).
func NewPasses(reg prometheus.Registerer) *Passes {
	m := &Passes{
		failures: counterVec(reg, "pass", "record_failures_total",
			"Records (a sale to warm up, an order to close, a reservation to sweep, a draw's pick to order) a periodic pass failed on; each is skipped for its backoff (5 s doubling to 5 min) while the pass goes on with the others.",
			"pass"),
		skipped: gaugeVec(reg, "pass", "records_skipped",
			"Records a periodic pass is skipping now, until their backoff after a failure ends (set at the end of each pass).",
			"pass"),
		byPass: map[string]passSeries{},
	}
	for _, p := range []string{PassWarmup, PassCloser, PassSweep, PassDraw} {
		m.series(p)
	}
	return m
}

func (m *Passes) series(pass string) passSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byPass[pass]
	if !ok {
		s = passSeries{failures: m.failures.WithLabelValues(pass), skipped: m.skipped.WithLabelValues(pass)}
		m.byPass[pass] = s
	}
	return s
}

// RecordFailed counts a record that pass failed on.
func (m *Passes) RecordFailed(pass string) {
	if m != nil {
		m.series(pass).failures.Inc()
	}
}

// RecordsWaiting sets how many records pass is skipping now.
func (m *Passes) RecordsWaiting(pass string, n int) {
	if m != nil {
		m.series(pass).skipped.Set(float64(n))
	}
}
