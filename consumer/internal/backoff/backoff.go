// Package backoff keeps the records a periodic pass of the consumer failed
// on (a sale the warm-up could not load, an order the closer could not
// close, a reservation the sweep could not finish) out of that pass for a
// while, so one bad record never blocks the rest: the pass reports the
// record (one log line, with its id and the error, and a count in
// seckill_pass_record_failures_total), skips it until its backoff ends
// (doubling from Min to Max at each failure in a row), and goes on with the
// others. Memory is bounded: at most Limit records are remembered.
//
// A record's failure is not the pass's: a pass stops only when it cannot
// list its records, or its context ends (the lock was lost, the consumer
// stops). Known limit: a pass lists a bounded batch (the closer 500 orders
// per query, the sweep 500 reservations per item), and records in backoff
// keep their place in it, so a batch made only of failing records holds
// back the records after it until their backoffs end.
package backoff

import (
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/pkg/foundation/metrics"
)

// Defaults of Records.
const (
	DefaultMin   = 5 * time.Second
	DefaultMax   = 5 * time.Minute
	DefaultLimit = 10_000
)

// Records is the backoff of one pass's records, by key (an order number,
// an activity id). Safe for concurrent use.
type Records struct {
	// Pass names the pass in logs and in the metric's pass label
	// (warmup, closer, sweep).
	Pass string
	Log  *slog.Logger
	// Metrics counts failures; nil counts nothing.
	Metrics *metrics.Passes
	// Min and Max bound a record's backoff (default DefaultMin, DefaultMax);
	// Limit bounds the records remembered (default DefaultLimit).
	Min, Max time.Duration
	Limit    int
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	delay time.Duration // the backoff this failure started
	until time.Time     // skipped until then
}

// New returns the backoff of pass with the defaults.
func New(pass string, log *slog.Logger, m *metrics.Passes) *Records {
	return &Records{Pass: pass, Log: log, Metrics: m}
}

func (r *Records) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Records) bounds() (lo, hi time.Duration, limit int) {
	lo, hi, limit = r.Min, r.Max, r.Limit
	if lo <= 0 {
		lo = DefaultMin
	}
	if hi < lo {
		hi = max(DefaultMax, lo)
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	return lo, hi, limit
}

// Due reports whether the pass should try key now: it has not failed, or
// its backoff ended. A nil Records has every key due.
func (r *Records) Due(key string) bool {
	if r == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key]
	return !ok || !r.now().Before(e.until)
}

// Failed reports key's failure (err; attrs name the record in the log, for
// example "order_no", no) and keeps it out of the pass for its backoff:
// Min after its first failure, twice the last one after each failure in a
// row, at most Max. It is logged once per backoff, since the pass does not
// try it again before.
func (r *Records) Failed(key string, err error, attrs ...any) {
	if r == nil {
		return
	}
	lo, hi, limit := r.bounds()
	now := r.now()
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]*entry{}
	}
	e, ok := r.m[key]
	switch {
	case !ok:
		if len(r.m) >= limit {
			r.evict(now, hi, limit)
		}
		e = &entry{delay: lo}
		r.m[key] = e
	case e.until.Add(hi).Before(now):
		// It went through meanwhile or was not tried for long: start over.
		e.delay = lo
	default:
		e.delay = min(2*e.delay, hi)
	}
	e.until = now.Add(e.delay)
	delay := e.delay
	r.mu.Unlock()
	r.Metrics.RecordFailed(r.Pass)
	if r.Log != nil {
		r.Log.Warn("a record failed in a periodic pass; the pass goes on and tries it again after its backoff",
			append(append([]any{"pass", r.Pass}, attrs...), "err", err, "retry_in", delay.String())...)
	}
}

// Succeeded forgets key's failures: it went through.
func (r *Records) Succeeded(key string, attrs ...any) {
	if r == nil {
		return
	}
	r.mu.Lock()
	_, ok := r.m[key]
	delete(r.m, key)
	r.mu.Unlock()
	if ok && r.Log != nil {
		r.Log.Info("a record that failed in a periodic pass went through", append([]any{"pass", r.Pass}, attrs...)...)
	}
}

// Waiting is how many records are being skipped now; it forgets those whose
// backoff ended longer than Max ago (they went away or went through).
func (r *Records) Waiting() int {
	if r == nil {
		return 0
	}
	_, hi, _ := r.bounds()
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, e := range r.m {
		switch {
		case e.until.Add(hi).Before(now):
			delete(r.m, k)
		case now.Before(e.until):
			n++
		}
	}
	return n
}

// evict makes room for one more record: it forgets the stale ones, else
// the one whose backoff ends first (it would be tried soonest anyway; it
// starts again from Min if it fails again). r.mu is held.
func (r *Records) evict(now time.Time, hi time.Duration, limit int) {
	var first string
	var firstUntil time.Time
	for k, e := range r.m {
		if e.until.Add(hi).Before(now) {
			delete(r.m, k)
			continue
		}
		if first == "" || e.until.Before(firstUntil) {
			first, firstUntil = k, e.until
		}
	}
	if len(r.m) >= limit && first != "" {
		delete(r.m, first)
	}
}

// Report sets the metric of the records being skipped now (call it at the
// end of a pass).
func (r *Records) Report() {
	if r != nil {
		r.Metrics.RecordsWaiting(r.Pass, r.Waiting())
	}
}

// Idle sets the metric of the records being skipped to 0 while another
// process holds the pass's lock: this one is not running the pass, and its
// records are reported by whichever process runs it.
func (r *Records) Idle() {
	if r != nil {
		r.Metrics.RecordsWaiting(r.Pass, 0)
	}
}
