// Package load fires operations from many concurrent workers, in a closed
// model (each worker sends its next request when the previous one is
// answered) or an open model (requests are due at a fixed rate whether or
// not earlier ones were answered), and records one Sample per operation.
//
// In the open model a request's latency counts from the time it was due,
// not from when a worker got round to sending it, so a server that stalls
// cannot hide the queue that builds behind it (coordinated omission, as
// wrk2 and HdrHistogram describe it). Only when a worker was idle, holding
// the request before it fell due, does it count from the actual send: the
// few hundred microseconds a sleeping goroutine wakes late are the load
// generator's, not the server's.
package load

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome classifies one answer.
type Outcome uint8

// The outcomes. Keep String in step.
const (
	Accepted       Outcome = iota // 2xx
	SoldOut                       // 409 SOLD_OUT
	Already                       // 409 ALREADY_PURCHASED
	Unavailable                   // 503
	RateLimited                   // 429
	ClientError                   // any other 4xx
	ServerError                   // any other 5xx
	TransportError                // no HTTP answer
	numOutcomes
)

// Outcomes lists every outcome, in order.
var Outcomes = []Outcome{Accepted, SoldOut, Already, Unavailable, RateLimited, ClientError, ServerError, TransportError}

func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case SoldOut:
		return "sold_out"
	case Already:
		return "already_purchased"
	case Unavailable:
		return "unavailable"
	case RateLimited:
		return "rate_limited"
	case ClientError:
		return "client_error"
	case ServerError:
		return "server_error"
	case TransportError:
		return "transport_error"
	}
	return "unknown"
}

// Op performs operation number seq on worker w (0 <= w < Connections) and
// says how it ended. Ops of one worker never overlap.
type Op func(ctx context.Context, w int, seq int64) Outcome

// Config says how much load to make.
type Config struct {
	// Workers is the number of concurrent workers (one connection each).
	Workers int
	// Duration stops issuing new operations after this long (0: no limit;
	// then Ops must be set).
	Duration time.Duration
	// Ops stops after this many operations (0: no limit).
	Ops int64
	// Rate, when positive, is the fixed arrival rate in operations per
	// second (open model). Zero means the closed model.
	Rate float64
	// Grace is how long, after Duration, operations that were due before it
	// may still be started (open model). Those not started by then are
	// counted as Dropped. Default 5s.
	Grace time.Duration
	// Until, if set, is asked before each operation of the closed model:
	// true ends the run early, as the end of Duration does.
	Until func() bool
	// Progress, if set, is called about every 200ms with the operations
	// finished so far, and once more at the end.
	Progress func(elapsed time.Duration, done int64)
}

// Sample is one finished operation.
type Sample struct {
	// Due is when the operation's clock started, since the run's start:
	// when it was due (open model, a worker late to send it), when it was
	// actually sent (open model, an idle worker), or when it started
	// (closed model).
	Due time.Duration
	// Latency is from Due to the answer.
	Latency time.Duration
	Outcome Outcome
}

// Result is what a run measured.
type Result struct {
	// Elapsed runs from the start to the last answer.
	Elapsed time.Duration
	Samples []Sample
	// Dropped counts open-model operations that were due but never started
	// within the grace period.
	Dropped int64
	// Counts is the number of samples per outcome.
	Counts [numOutcomes]int64
}

// Count returns how many samples ended with o.
func (r Result) Count(o Outcome) int64 { return r.Counts[o] }

// Run performs the load and returns when every started operation has
// finished. Cancelling ctx stops issuing new operations early.
func Run(ctx context.Context, cfg Config, op Op) Result {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 5 * time.Second
	}
	start := time.Now()
	var deadline time.Time
	if cfg.Duration > 0 {
		deadline = start.Add(cfg.Duration)
	}
	var done atomic.Int64
	stopProgress := make(chan struct{})
	var progressWG sync.WaitGroup
	if cfg.Progress != nil {
		progressWG.Add(1)
		go func() {
			defer progressWG.Done()
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stopProgress:
					return
				case <-t.C:
					cfg.Progress(time.Since(start), done.Load())
				}
			}
		}()
	}

	perWorker := make([][]Sample, cfg.Workers)
	var dropped atomic.Int64
	var wg sync.WaitGroup
	if cfg.Rate > 0 {
		due := make(chan int64, 1<<16)
		go dispatch(ctx, cfg, start, deadline, due)
		abandon := time.Time{}
		if !deadline.IsZero() {
			abandon = deadline.Add(cfg.Grace)
		}
		interval := float64(time.Second) / cfg.Rate
		for w := range cfg.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []Sample
				for seq := range due {
					dueAt := time.Duration(float64(seq) * interval)
					from := dueAt
					if wait := time.Until(start.Add(dueAt)); wait > 0 {
						// Idle and early: wait for the due time. Whatever the
						// timer adds past it is the generator's own slack,
						// not the server's, so count from the actual send.
						time.Sleep(wait)
						from = time.Since(start)
					}
					if !abandon.IsZero() && time.Now().After(abandon) {
						dropped.Add(1)
						continue
					}
					o := op(ctx, w, seq)
					local = append(local, Sample{Due: from, Latency: time.Since(start) - from, Outcome: o})
					done.Add(1)
				}
				perWorker[w] = local
			}()
		}
	} else {
		var next atomic.Int64
		for w := range cfg.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []Sample
				for ctx.Err() == nil && (cfg.Until == nil || !cfg.Until()) {
					seq := next.Add(1) - 1
					if cfg.Ops > 0 && seq >= cfg.Ops {
						break
					}
					began := time.Now()
					if !deadline.IsZero() && !began.Before(deadline) {
						break
					}
					o := op(ctx, w, seq)
					local = append(local, Sample{Due: began.Sub(start), Latency: time.Since(began), Outcome: o})
					done.Add(1)
				}
				perWorker[w] = local
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopProgress)
	progressWG.Wait()
	if cfg.Progress != nil {
		cfg.Progress(elapsed, done.Load())
	}

	res := Result{Dropped: dropped.Load()}
	n := 0
	for _, s := range perWorker {
		n += len(s)
	}
	res.Samples = make([]Sample, 0, n)
	var last time.Duration
	for _, s := range perWorker {
		for _, x := range s {
			res.Counts[x.Outcome]++
			last = max(last, x.Due+x.Latency)
		}
		res.Samples = append(res.Samples, s...)
	}
	res.Elapsed = last
	if last == 0 {
		res.Elapsed = elapsed
	}
	return res
}

// dispatch hands out operation numbers as they fall due: operation seq is
// due at start + seq/Rate. It stops at the deadline, after Ops operations,
// or when ctx ends, and closes due.
func dispatch(ctx context.Context, cfg Config, start, deadline time.Time, due chan<- int64) {
	defer close(due)
	total := int64(-1) // no limit
	if !deadline.IsZero() {
		total = int64(math.Ceil(cfg.Duration.Seconds() * cfg.Rate))
	}
	if cfg.Ops > 0 && (total < 0 || cfg.Ops < total) {
		total = cfg.Ops
	}
	var seq int64
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		// Everything due up to now, and 2ms ahead so that idle workers hold
		// their operation before it is due and the ticker's own lateness
		// does not delay it.
		upTo := dueBy(time.Since(start)+2*time.Millisecond, cfg.Rate, total)
		for ; seq < upTo; seq++ {
			select {
			case due <- seq:
			case <-ctx.Done():
				return
			}
		}
		if seq == total || (!deadline.IsZero() && !time.Now().Before(deadline)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// dueBy is how many operations of a run at rate per second are due by
// elapsed: operation n is due at n/rate, so operation 0 at once. total, if
// not negative, caps it.
func dueBy(elapsed time.Duration, rate float64, total int64) int64 {
	if elapsed < 0 {
		return 0
	}
	n := int64(math.Floor(elapsed.Seconds()*rate)) + 1
	if total >= 0 {
		n = min(n, total)
	}
	return n
}
