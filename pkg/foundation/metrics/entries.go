package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Entries measures the two round trips a draw entry waits for on its way
// in (ADR 7), as Intake does an order's:
//
//	seckill_entry_take_duration_seconds
//	seckill_entry_publish_duration_seconds
//	seckill_entry_publish_total{result}
//
// the Redis step that takes the entry (whatever it answered), and the
// publish until every in-sync replica acknowledged it (or it failed).
type Entries struct {
	take      prometheus.Histogram
	publish   prometheus.Histogram
	published [2]prometheus.Counter // ok, error
}

// NewEntries registers the entries' metrics on reg.
func NewEntries(reg prometheus.Registerer) *Entries {
	m := &Entries{
		take: histogram(reg, "entry", "take_duration_seconds",
			"Round trip of one entry-taking script run (Redis), whatever it answered.", fastBuckets),
		publish: histogram(reg, "entry", "publish_duration_seconds",
			"Time to publish one draw entry until every in-sync replica acknowledged it (or the publish failed).", slowBuckets),
	}
	results := counterVec(reg, "entry", "publish_total", "Draw entries published by the API, by result (ok, error).", "result")
	m.published[0], m.published[1] = results.WithLabelValues("ok"), results.WithLabelValues("error")
	return m
}

// Taken records one entry-taking script run that took d.
func (m *Entries) Taken(d time.Duration) {
	if m != nil {
		m.take.Observe(d.Seconds())
	}
}

// Published records one entry's publish that took d; err is its result.
func (m *Entries) Published(err error, d time.Duration) {
	if m == nil {
		return
	}
	i := 0
	if err != nil {
		i = 1
	}
	m.published[i].Inc()
	m.publish.Observe(d.Seconds())
}
