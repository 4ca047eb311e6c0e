package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DrawFreeze measures how long draws wait for their entries (ADR 7):
//
//	seckill_draw_freeze_wait_seconds
//	seckill_draw_entries_behind
//
// the time from a draw's entries_close_at to the moment every entry Kafka
// acknowledged by the grace after it was in MySQL and the draw could run;
// and the entries the draws waiting for that still wait for, in all, at
// the drawer's last pass (0 when none waits; the drawer logs each draw's).
type DrawFreeze struct {
	wait   prometheus.Histogram
	behind prometheus.Gauge
}

// NewDrawFreeze registers the freeze's metric on reg.
func NewDrawFreeze(reg prometheus.Registerer) *DrawFreeze {
	return &DrawFreeze{wait: histogram(reg, "draw", "freeze_wait_seconds",
		"Time from a draw's entries' close until every entry Kafka acknowledged by the grace after it was in MySQL (the watermark) and the draw could run.",
		[]float64{1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120, 300}),
		behind: gauge(reg, "draw", "entries_behind",
			"Entries the draws past their close still wait for at the drawer's last pass, in all: acknowledged by Kafka, not yet in MySQL.")}
}

// Observe records one draw's wait.
func (m *DrawFreeze) Observe(d time.Duration) { m.wait.Observe(d.Seconds()) }

// Behind records the entries the waiting draws still wait for, in all.
func (m *DrawFreeze) Behind(n int64) { m.behind.Set(float64(n)) }
