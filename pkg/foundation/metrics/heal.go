package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons the consumer's watch gives for deciding that Redis lost data.
const (
	HealRestart   = "restart"    // a master's run_id changed: it restarted, from whatever its files held
	HealNewMaster = "new_master" // a master the watch had not seen (a failover promoted a replica)
	HealMarker    = "marker"     // the watch's generation marker key vanished or changed
)

// Heal measures the consumer's data-loss watch (consumer/internal/redisloss):
//
//	seckill_heal_detections_total{reason}
//	seckill_heal_repair_passes_total{outcome}
//	seckill_heal_repair_seconds
//	seckill_heal_last_repair_seconds
//	seckill_heal_items_failing
//
// repair_seconds is the time from the detection to the end of the first
// repair pass that ran cleanly (every item agrees or was repaired).
// items_failing is the number of items the last pass could not check or
// repair (the others were repaired all the same).
type Heal struct {
	detections *prometheus.CounterVec
	passes     *prometheus.CounterVec
	repair     prometheus.Histogram
	last       prometheus.Gauge
	failing    prometheus.Gauge
}

// Outcomes of one repair pass of the watch.
const (
	HealPassRepaired = "repaired" // ran cleanly and repaired something
	HealPassClean    = "clean"    // ran cleanly, nothing to repair
	HealPassFailed   = "failed"   // did not run cleanly (a store down, the lock busy or lost, drift left); retried
	HealPassPartial  = "partial"  // repaired some items and failed on others (see items_failing); retried
)

// NewHeal registers the watch's metrics on reg.
func NewHeal(reg prometheus.Registerer) *Heal {
	m := &Heal{
		detections: counterVec(reg, "heal", "detections_total",
			"Times the consumer's watch decided that Redis lost data, by reason (restart, new_master, marker).", "reason"),
		passes: counterVec(reg, "heal", "repair_passes_total",
			"Repair passes the watch ran after a detection, by outcome (repaired, clean, failed, partial: repaired some items, failed on others).", "outcome"),
		repair: histogram(reg, "heal", "repair_seconds",
			"Time from a detection of lost Redis data to the end of the first repair pass that ran cleanly.",
			[]float64{0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300}),
		last: gauge(reg, "heal", "last_repair_seconds",
			"repair_seconds of the last detection that was repaired."),
		failing: gauge(reg, "heal", "items_failing",
			"Items the watch's last repair pass could not check or repair (each logged with its item_id); it repaired the others and tries these again at every pass."),
	}
	for _, r := range []string{HealRestart, HealNewMaster, HealMarker} {
		m.detections.WithLabelValues(r)
	}
	for _, o := range []string{HealPassRepaired, HealPassClean, HealPassFailed, HealPassPartial} {
		m.passes.WithLabelValues(o)
	}
	return m
}

// Detected counts a detection for reason (HealRestart, HealNewMaster or
// HealMarker).
func (m *Heal) Detected(reason string) {
	if m != nil {
		m.detections.WithLabelValues(reason).Inc()
	}
}

// Pass counts a repair pass with its outcome.
func (m *Heal) Pass(outcome string) {
	if m != nil {
		m.passes.WithLabelValues(outcome).Inc()
	}
}

// Repaired records the time from a detection to its repair.
func (m *Heal) Repaired(took time.Duration) {
	if m != nil {
		m.repair.Observe(took.Seconds())
		m.last.Set(took.Seconds())
	}
}

// ItemsFailing sets how many items the last repair pass could not check or
// repair.
func (m *Heal) ItemsFailing(n int) {
	if m != nil {
		m.failing.Set(float64(n))
	}
}
