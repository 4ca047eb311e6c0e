package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/seckill/seckill/bench/internal/apiview"
	"github.com/seckill/seckill/bench/internal/cpu"
	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/stats"
)

// firstSale restarts the APIs, as a deploy before a drop would, and then
// runs two sales one after the other at a fixed arrival rate driven by
// vegeta's attacker (an outside load tool, not the bench's own client):
// the first sale after the start, then the same sale again. The two runs'
// latencies show whether the first buyers of a fresh api wait for
// anything the later ones do not (connections, metadata, caches).
func (e *env) firstSale(ctx context.Context, sh shape) ([]*report.Run, error) {
	e.meter.say("first-sale: restarting the api")
	if err := e.restartAPIs(ctx); err != nil {
		return nil, fmt.Errorf("restart: %w", err)
	}
	var runs []*report.Run
	for _, name := range []string{"first-sale", "second-sale"} {
		r, err := e.vegetaSale(ctx, name, sh)
		if r != nil {
			runs = append(runs, r)
		}
		if err != nil {
			return runs, err
		}
	}
	return runs, nil
}

// vegetaSale is one sale of sh.users buyers arriving at sh.rate per second,
// each with their own token and Idempotency-Key.
func (e *env) vegetaSale(ctx context.Context, name string, sh shape) (*report.Run, error) {
	s, err := e.newSale(ctx, name, sh.stock, e.opts.quantity, e.opts.buckets)
	if err != nil {
		return nil, err
	}
	base := userBase()
	tk, err := e.mintTokens(name, base, sh.users)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]int64{"activity_id": s.activity, "quantity": int64(s.quantity)})
	url := e.apis[0] + "/api/v1/orders"
	var next atomic.Int64
	targeter := func(t *vegeta.Target) error {
		i := next.Add(1) - 1
		if i >= sh.users {
			return vegeta.ErrNoTargets
		}
		t.Method, t.URL, t.Body = http.MethodPost, url, body
		t.Header = http.Header{
			"Authorization":   {"Bearer " + tk.For(base+i)},
			"Idempotency-Key": {"v" + strconv.FormatInt(i, 36)},
			"Content-Type":    {"application/json"},
		}
		return nil
	}
	// Enough workers that none of the sale's requests waits for a free
	// one (open model): vegeta grows to MaxWorkers when answers are slow.
	atk := vegeta.NewAttacker(vegeta.Workers(uint64(sh.connections)), vegeta.MaxWorkers(uint64(4*sh.connections)),
		vegeta.Connections(sh.connections), vegeta.KeepAlive(true), vegeta.Timeout(30*time.Second))
	rate := vegeta.Rate{Freq: int(sh.rate), Per: time.Second}
	span := time.Duration(float64(sh.users) / sh.rate * float64(time.Second))
	e.meter.say("%s: %d buyers at %.0f/s (vegeta), stock %d", name, sh.users, sh.rate, sh.stock)

	before, viewErr := apiview.Take(ctx, e.apiAdmins)
	prof := e.startProfiles(ctx, name, span+time.Second)
	stopCPU := e.measureCPU()
	start := time.Now()
	var res load.Result
	var answers []answer
	for v := range atk.Attack(vegeta.Targeter(targeter), rate, span+time.Second, name) {
		if ctx.Err() != nil {
			atk.Stop()
		}
		if v.Method == "" { // the targeter ran out of buyers: nothing was sent
			continue
		}
		o := load.TransportError
		if v.Error == "" || v.Code != 0 {
			o = load.Classify(int(v.Code), v.Body)
		}
		due := v.Timestamp.Sub(start)
		res.Samples = append(res.Samples, load.Sample{Due: due, Latency: v.Latency, Outcome: o})
		res.Counts[o]++
		// vegeta's results do not carry the request's headers; every key
		// was sent once, so a unique label per answer is all the replay
		// check needs (it has nothing to compare here).
		a := answer{key: "seq" + strconv.FormatUint(v.Seq, 10), sent: due, done: due + v.Latency, outcome: o}
		if o == load.Accepted {
			var got struct {
				OrderNo string `json:"order_no"`
			}
			_ = json.Unmarshal(v.Body, &got)
			a.orderNo = got.OrderNo
		}
		answers = append(answers, a)
	}
	res.Elapsed = time.Since(start)
	sh.duration = span
	r := runResult(name, sh, s, res)
	r.Model = "open (vegeta)"
	r.CPU = stopCPU()
	r.Profiles = prof()
	if viewErr == nil && len(e.apiAdmins) > 0 {
		if after, err := apiview.Take(ctx, e.apiAdmins); err == nil {
			r.APIView = apiLatencies(after.Since(before), "202", "409")
		}
	}
	r.Buyers = sh.users
	b := &buyers{answers: [][]answer{answers}}
	if _, err := e.finish(ctx, r, s, b, res, sh.users*int64(s.quantity)); err != nil {
		return r, err
	}
	r.SoldOutLatency = soldOutLatency(res)
	return r, nil
}

// apiLatencies summarizes the api's own histograms of a run's accepted and
// refused answers (202 and 409 for orders), and of the reserve and publish
// round trips.
func apiLatencies(s apiview.Snapshot, accepted, refused string) *report.APIView {
	one := func(code string) report.APILatency {
		h := s[code]
		if h == nil {
			return report.APILatency{}
		}
		return report.APILatency{Count: int64(h.Count()), P99Ms: h.Quantile(0.99),
			Within5: h.Within(5 * time.Millisecond), Within25: h.Within(25 * time.Millisecond)}
	}
	return &report.APIView{Accepted: one(accepted), SoldOut: one(refused), Reserve: one("reserve"), Publish: one("publish")}
}

// soldOutLatency summarizes the latency of the sold-out answers alone.
func soldOutLatency(res load.Result) stats.Summary {
	h := stats.NewHistogram()
	for _, x := range res.Samples {
		if x.Outcome == load.SoldOut {
			stats.Record(h, x.Latency)
		}
	}
	return stats.Summarize(h)
}

// idle lets the programs settle, then measures the CPU every watched
// process uses over sh.duration while nothing is bought: the cost of
// Kafka's fetches, the consumer's sweeps and the api's keep-alives.
func (e *env) idle(ctx context.Context, sh shape) (*cpu.Usage, error) {
	e.meter.say("idle: %s with no load%s", sh.duration, report.IdleOn(e.opts.history))
	var before map[int]time.Duration
	var start time.Time
	u, err := quiet(ctx, sh.duration, func() func() *cpu.Usage {
		before, start = e.sessionCPU(ctx), time.Now()
		return e.measureCPU()
	})
	if u != nil {
		e.idleSessions = sessionPct(before, e.sessionCPU(ctx), time.Since(start))
		e.meter.say("idle: %s", u.Summary())
		if e.idleSessions >= 0 {
			e.meter.say("idle: MySQL's threads serving the programs' connections: %.1f%%", e.idleSessions)
		}
	}
	return u, err
}

// idleServices measures the CPU the services use on their own over d
// (before the programs start, so nothing of ours talks to them).
func (e *env) idleServices(ctx context.Context, d time.Duration) (*cpu.Usage, error) {
	e.meter.say("idle: the services alone for %s, before the programs start", d)
	u, err := quiet(ctx, d, func() func() *cpu.Usage { return measure(cpu.FindServices()) })
	if u != nil {
		e.meter.say("idle, services alone: %s", u.Summary())
	}
	return u, err
}

// quiet waits 2 s for whatever just started to settle, then measures with
// start over d.
func quiet(ctx context.Context, d time.Duration, start func() func() *cpu.Usage) (*cpu.Usage, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(2 * time.Second):
	}
	stop := start()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	return stop(), nil
}
