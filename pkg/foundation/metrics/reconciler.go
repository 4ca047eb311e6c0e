package metrics

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Run verdicts of the reconciler, one per run (they follow its exit codes).
const (
	RunAgree  = "agree"  // every item agrees, or was repaired
	RunDrift  = "drift"  // drift found and not all of it repaired, or items unchecked
	RunFailed = "failed" // the run could not finish (a store down, the lock lost)
	RunBusy   = "busy"   // another reconciler held the lock; nothing checked
)

// Reconciler measures the reconciler when it runs on a schedule (a single
// run exits before anything could scrape it):
//
//	seckill_reconciler_runs_total{verdict}
//	seckill_reconciler_run_duration_seconds
//	seckill_reconciler_last_run_timestamp_seconds
//	seckill_reconciler_items_total{verdict}
//	seckill_reconciler_drift_units{item}
//	seckill_reconciler_unchecked_items
//
// The drift gauge has one series per item of the last report: items are
// bounded by the sales being checked, and each report replaces the previous
// one's series, so items whose sale is over disappear.
type Reconciler struct {
	runs      *prometheus.CounterVec
	duration  prometheus.Histogram
	lastRun   prometheus.Gauge
	items     *prometheus.CounterVec
	drift     *prometheus.GaugeVec
	unchecked prometheus.Gauge
}

// NewReconciler registers the reconciler metrics on reg.
func NewReconciler(reg prometheus.Registerer) *Reconciler {
	m := &Reconciler{
		runs: counterVec(reg, "reconciler", "runs_total",
			"Reconciler runs by verdict: agree, drift (not all repaired), failed (could not run), busy (another reconciler held the lock).",
			"verdict"),
		duration: histogram(reg, "reconciler", "run_duration_seconds", "Time one reconciler run took.",
			[]float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}),
		lastRun: gauge(reg, "reconciler", "last_run_timestamp_seconds",
			"Unix time at which the last reconciler run ended, whatever its verdict."),
		items: counterVec(reg, "reconciler", "items_total",
			"Items checked, by the item's verdict (ok, not_started, drift, not_warmed, unsettled, repaired, retry, unchecked).", "verdict"),
		drift: gaugeVec(reg, "reconciler", "drift_units",
			"Per item of the last report: Redis stock + in flight - MySQL stock (0 when the stores agree; positive means Redis could oversell).",
			"item"),
		unchecked: gauge(reg, "reconciler", "unchecked_items",
			"Items the last reconciler run could not check or repair (the report and the log name each with its error); the run went on with the others."),
	}
	for _, v := range []string{RunAgree, RunDrift, RunFailed, RunBusy} {
		m.runs.WithLabelValues(v)
	}
	return m
}

// Run records a run that ended at end after took, with its verdict (RunAgree,
// RunDrift, RunFailed or RunBusy).
func (m *Reconciler) Run(verdict string, took time.Duration, end time.Time) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(verdict).Inc()
	m.duration.Observe(took.Seconds())
	m.lastRun.Set(float64(end.UnixNano()) / 1e9)
}

// Items records how many items a run gave each verdict; verdicts are
// written in snake case ("not started" becomes not_started).
func (m *Reconciler) Items(counts map[string]int) {
	if m == nil {
		return
	}
	for v, n := range counts {
		m.items.WithLabelValues(strings.ReplaceAll(v, " ", "_")).Add(float64(n))
	}
}

// Drift replaces the drift gauge with the last report's drift per item.
func (m *Reconciler) Drift(byItem map[int64]int64) {
	if m == nil {
		return
	}
	m.drift.Reset()
	for item, d := range byItem {
		m.drift.WithLabelValues(strconv.FormatInt(item, 10)).Set(float64(d))
	}
}

// Unchecked sets how many items the last run could not check or repair.
func (m *Reconciler) Unchecked(n int) {
	if m != nil {
		m.unchecked.Set(float64(n))
	}
}
