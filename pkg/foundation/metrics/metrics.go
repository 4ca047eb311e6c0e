// Package metrics defines the programs' Prometheus metrics: one registry per
// process, built by NewRegistry, and one constructor per component (HTTP,
// intake, consumer, sweep, closer, locks, reconciler) that registers that
// component's metrics on it. Nothing is registered at init and there are no
// globals.
//
// Every method is safe on a nil receiver and then does nothing, so a
// component whose Metrics field is nil runs without metrics (the tests build
// them so).
//
// Names follow the Prometheus conventions: the seckill_ prefix, _total for
// counters, base units (_seconds). Label values are always from a small
// fixed set (a route template, a status code, an outcome, a partition, a lock
// name) and never a user id or an order number. The one label that grows
// with the data is the reconciler's item label: items are bounded by the
// sales being checked, and each report replaces the previous one's series.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace starts every name this package defines.
const Namespace = "seckill"

// NewRegistry returns a process's registry with the Go runtime and process
// collectors (go_*, process_*) already on it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves what g gathers in the Prometheus exposition format.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError,
		// Exemplars (trace ids on the latency histograms) need OpenMetrics.
		EnableOpenMetrics: true})
}

// Latency buckets, in seconds.
var (
	// fastBuckets fit work that usually takes well under a millisecond
	// (an HTTP answer, one Redis script).
	fastBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
	// slowBuckets fit work of milliseconds to seconds (a Kafka publish
	// with acks=all, a batch with a MySQL transaction).
	slowBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

func counter(reg prometheus.Registerer, subsystem, name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help})
	reg.MustRegister(c)
	return c
}

func counterVec(reg prometheus.Registerer, subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
	reg.MustRegister(c)
	return c
}

func histogram(reg prometheus.Registerer, subsystem, name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: buckets})
	reg.MustRegister(h)
	return h
}

func gauge(reg prometheus.Registerer, subsystem, name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help})
	reg.MustRegister(g)
	return g
}

func gaugeVec(reg prometheus.Registerer, subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
	reg.MustRegister(g)
	return g
}
