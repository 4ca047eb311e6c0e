package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Unmatched is the route label of requests that matched no route (404 and
// 405 answers), so a client probing random paths adds no series.
const Unmatched = "unmatched"

// HTTP measures the API's requests by route template, method and status
// code:
//
//	seckill_http_requests_total{route,method,code}
//	seckill_http_request_duration_seconds{route,method,code}
//	seckill_http_requests_in_flight
type HTTP struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

// NewHTTP registers the HTTP metrics on reg.
func NewHTTP(reg prometheus.Registerer) *HTTP {
	h := &HTTP{
		requests: counterVec(reg, "http", "requests_total",
			"HTTP requests answered, by route template (never the raw path), method and status code.",
			"route", "method", "code"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Time from the request reaching the router to the answer, by route template, method and status code.",
			Buckets: fastBuckets,
		}, []string{"route", "method", "code"}),
		inFlight: gauge(reg, "http", "requests_in_flight", "HTTP requests being served now."),
	}
	reg.MustRegister(h.duration)
	return h
}

// Route returns the handle of one route: resolve it once per route when the
// router is built, then call Observe per request. method and route must come
// from the router's table (Gin's FullPath), never from the request.
func (h *HTTP) Route(method, route string) *Route {
	if h == nil {
		return nil
	}
	return &Route{h: h, method: method, route: route}
}

// Start counts a request in flight; call Route.Observe when it ends.
func (h *HTTP) Start() {
	if h != nil {
		h.inFlight.Inc()
	}
}

// Route is one route's metrics. Its series are resolved at the first
// request with each status code and kept, so Observe does no map lookup and
// no allocation.
type Route struct {
	h             *HTTP
	method, route string
	codes         [600]atomic.Pointer[routeCode]
}

type routeCode struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// Observe records a request that took d and was answered with code, and
// ends the in-flight count Start began.
func (r *Route) Observe(code int, d time.Duration) {
	if r == nil {
		return
	}
	r.h.inFlight.Dec()
	rc := r.series(code)
	rc.requests.Inc()
	rc.duration.Observe(d.Seconds())
}

// ObserveTrace is Observe with the id of the request's sampled trace as the
// exemplar of its latency observation ("" is Observe), so a slow request on
// the dashboard links to its trace. Exemplars are exposed in the
// OpenMetrics format, which the /metrics handler offers.
func (r *Route) ObserveTrace(code int, d time.Duration, traceID string) {
	if r == nil {
		return
	}
	eo, ok := r.series(code).duration.(prometheus.ExemplarObserver)
	if traceID == "" || !ok {
		r.Observe(code, d)
		return
	}
	r.h.inFlight.Dec()
	rc := r.series(code)
	rc.requests.Inc()
	eo.ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": traceID})
}

// series returns the route's series for code, made at its first use.
func (r *Route) series(code int) *routeCode {
	if code < 0 || code >= len(r.codes) {
		code = 0
	}
	rc := r.codes[code].Load()
	if rc == nil {
		label := strconv.Itoa(code)
		rc = &routeCode{
			requests: r.h.requests.WithLabelValues(r.route, r.method, label),
			duration: r.h.duration.WithLabelValues(r.route, r.method, label),
		}
		r.codes[code].Store(rc)
	}
	return rc
}
