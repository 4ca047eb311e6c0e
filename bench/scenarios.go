package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/stats"
	"github.com/seckill/seckill/bench/internal/verify"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// buyers sends order requests as many buyers and keeps their answers.
// With several APIs, the load's workers are dealt out over them
// round-robin (spread): each worker, and so each connection, stays with
// one API.
type buyers struct {
	urls  []string    // each API's order endpoint
	doers []load.Doer // one client per API
	body  []byte
	// bodies, for a load over the items of sales of several items, holds
	// one body per item (placeItem's pick).
	bodies [][]byte
	tokens *tokens
	t0     time.Time
	// all keeps every answer, not only the 202s (for replay checks).
	all     bool
	bufs    []bytes.Buffer
	answers [][]answer
	sent    []int64 // requests sent by each worker

	errOnce  sync.Once
	firstErr error
}

// spread says which of n APIs worker w talks to, and which of that API's
// connections it uses: worker w always talks to API w mod n, so each
// connection sticks to one API and the APIs' connection counts differ by
// at most one.
func spread(w, n int) (api, slot int) { return w % n, w / n }

// share is how many of conns workers spread talks to API i of n.
func share(i, n, conns int) int { return (conns - i + n - 1) / n }

// newBuyers makes the clients of a load of conns workers against the APIs
// at bases, spread over them.
func (e *env) newBuyers(bases []string, conns int, activity int64, quantity int, tk *tokens) (*buyers, error) {
	body, _ := json.Marshal(map[string]int64{"activity_id": activity, "quantity": int64(quantity)})
	b := &buyers{
		urls: make([]string, 0, len(bases)), doers: make([]load.Doer, 0, len(bases)), body: body, tokens: tk,
		bufs: make([]bytes.Buffer, conns), answers: make([][]answer, conns), sent: make([]int64, conns),
	}
	for i, base := range bases {
		k := share(i, len(bases), conns)
		var doer load.Doer = load.NetHTTP{Client: load.NewClient(k, 30*time.Second)}
		if e.opts.client == "raw" {
			raw, err := load.NewRaw(base, k, 30*time.Second)
			if err != nil {
				b.close()
				return nil, err
			}
			doer = raw
		}
		b.urls = append(b.urls, base+"/api/v1/orders")
		b.doers = append(b.doers, doer)
	}
	return b, nil
}

// place sends one order request for user with key from worker w.
func (b *buyers) place(ctx context.Context, w int, user int64, key string) load.Outcome {
	return b.send(ctx, w, user, key, b.body, -1, "")
}

// placeAdmitted sends one order request for user with key and the
// admission a sale's waiting room gave (X-Admission).
func (b *buyers) placeAdmitted(ctx context.Context, w int, user int64, key, admission string) load.Outcome {
	return b.send(ctx, w, user, key, b.body, -1, admission)
}

// placeItem sends one order request for the item bodies[pick] names.
func (b *buyers) placeItem(ctx context.Context, w int, user int64, key string, pick int) load.Outcome {
	return b.send(ctx, w, user, key, b.bodies[pick], pick, "")
}

func (b *buyers) send(ctx context.Context, w int, user int64, key string, body []byte, pick int, admission string) load.Outcome {
	sent := time.Since(b.t0)
	st, _ := b.do(ctx, w, b.urls, load.Call{Method: http.MethodPost, Token: b.tokens.For(user),
		IdempotencyKey: key, Admission: admission, Body: body})
	o := load.Classify(st, b.bufs[w].Bytes())
	if o == load.Accepted || b.all {
		a := answer{user: user, key: key, sent: sent, done: time.Since(b.t0), outcome: o, pick: pick}
		if o == load.Accepted {
			var v struct {
				OrderNo string `json:"order_no"`
			}
			_ = json.Unmarshal(b.bufs[w].Bytes(), &v)
			a.orderNo = v.OrderNo
		}
		b.answers[w] = append(b.answers[w], a)
	}
	return o
}

// do sends c from worker w to its API (spread), at that API's URL in urls,
// and returns the status and the body (worker w's buffer: read it before
// w's next request). The first transport error is kept.
func (b *buyers) do(ctx context.Context, w int, urls []string, c load.Call) (int, []byte) {
	api, slot := spread(w, len(b.doers))
	b.sent[w]++
	c.URL = urls[api]
	st, err := b.doers[api].Do(ctx, slot, c, &b.bufs[w])
	if err != nil {
		b.errOnce.Do(func() { b.firstErr = err })
	}
	return st, b.bufs[w].Bytes()
}

// perAPI is how many requests went to each API; call it after the load.
func (b *buyers) perAPI() []int64 {
	out := make([]int64, len(b.doers))
	for w, n := range b.sent {
		api, _ := spread(w, len(b.doers))
		out[api] += n
	}
	return out
}

func (b *buyers) collected() []answer {
	var out []answer
	for _, a := range b.answers {
		out = append(out, a...)
	}
	return out
}

func (b *buyers) close() {
	for _, d := range b.doers {
		d.Close()
	}
}

// runResult fills the load-side figures of a report.Run.
func runResult(name string, sh shape, s sale, res load.Result) *report.Run {
	r := &report.Run{
		Name: name, Model: "closed", Connections: sh.connections, Rate: sh.rate, Duration: sh.duration.Seconds(),
		Stock: s.stock, Quantity: s.quantity, ItemID: s.item, ActivityID: s.activity,
		Requests: int64(len(res.Samples)), Dropped: res.Dropped, Elapsed: res.Elapsed.Seconds(),
		Throughput: stats.Rate(int64(len(res.Samples)), res.Elapsed), Outcomes: map[string]int64{},
	}
	if sh.rate > 0 {
		r.Model = "open"
	}
	for _, o := range load.Outcomes {
		if n := res.Count(o); n > 0 {
			r.Outcomes[o.String()] = n
		}
	}
	all, acc := stats.NewHistogram(), stats.NewHistogram()
	events := make([]stats.Event, len(res.Samples))
	for i, x := range res.Samples {
		stats.Record(all, x.Latency)
		if x.Outcome == load.Accepted {
			stats.Record(acc, x.Latency)
		}
		events[i] = stats.Event{At: x.Due + x.Latency, Latency: x.Latency}
	}
	r.Latency, r.AcceptedLatency = stats.Summarize(all), stats.Summarize(acc)
	r.Series = stats.Series(events, time.Second)
	return r
}

func errorCount(res load.Result) int64 {
	return res.Count(load.Unavailable) + res.Count(load.ServerError) + res.Count(load.TransportError)
}

// finish drains the pipeline, reads the sale back, checks the invariants
// and completes r.
func (e *env) finish(ctx context.Context, r *report.Run, s sale, b *buyers, res load.Result, demand int64) (tally, error) {
	// An interrupt stops the load, not the checking of what it did.
	ctx = context.WithoutCancel(ctx)
	took, drained, err := e.drain(ctx, []reservation.Item{s.stockItem()}, e.opts.drainTimeout)
	if err != nil {
		return tally{}, err
	}
	r.DrainSeconds = took.Seconds()
	if len(b.doers) > 1 {
		r.APIRequests = b.perAPI()
	}
	t, err := e.observe(ctx, s, b.collected(), errorCount(res), demand, drained)
	if err != nil {
		return t, err
	}
	r.Accepted, r.Created, r.Failed = t.obs.Accepted, t.created, t.failed
	r.UnitsSold, r.DBStock, r.RedisStock, r.ExtraLive = t.obs.LiveUnits, t.obs.DBStock, t.obs.RedisStock, t.obs.ExtraLiveOrders
	r.ReplayedKeys = t.obs.ReplayChecked
	r.Violations = verify.Check(t.obs)
	if r.Violations == nil {
		r.Violations = []verify.Violation{}
	}
	if b.firstErr != nil && errorCount(res) > 0 {
		e.meter.say("%s: first transport error: %v", r.Name, b.firstErr)
	}
	return t, nil
}

// chart draws r's PNG next to the JSON.
func (e *env) chart(r *report.Run) {
	name := labelled(r.Name, e.opts.topology)
	if e.opts.tracing != "" {
		name += " tracing " + e.opts.tracing
	}
	file := chartFile(name)
	if err := report.RunChart(filepath.Join(e.dir, file), r); err != nil {
		e.meter.say("%s: chart: %v", r.Name, err)
		return
	}
	r.Chart = file
}

// userBase picks a random starting user id for a scenario's buyers, so
// every run uses buyers nobody used before.
func userBase() int64 { return 1_000_000 + rand.Int64N(1<<40) }

// flash: every request a new buyer, closed model (or open with a rate).
func (e *env) flash(ctx context.Context, name string, sh shape, buckets int) (*report.Run, error) {
	s, err := e.newSale(ctx, name, sh.stock, e.opts.quantity, buckets)
	if err != nil {
		return nil, err
	}
	return e.flashAt(ctx, name, sh, s, nil)
}

// flashAt fires flash's load at sale s. body, when not nil, is the body of
// request seq (else every request sends the sale's one).
func (e *env) flashAt(ctx context.Context, name string, sh shape, s sale, body func(seq int64) []byte) (*report.Run, error) {
	// Enough tokens for the expected requests; more are minted on demand.
	expect := int64(sh.duration.Seconds() * 25000)
	if sh.rate > 0 {
		expect = int64(sh.duration.Seconds()*sh.rate) + 1
	}
	base := userBase()
	tk, err := e.mintTokens(name, base, expect)
	if err != nil {
		return nil, err
	}
	b, err := e.newBuyers(e.apis, sh.connections, s.activity, s.quantity, tk)
	if err != nil {
		return nil, err
	}
	defer b.close()
	prof := e.startProfiles(ctx, name, sh.duration)
	update, done := e.meter.track(name, sh.duration, 0)
	b.t0 = time.Now()
	stopCPU := e.measureCPU()
	res := load.Run(ctx, load.Config{Workers: sh.connections, Duration: sh.duration, Rate: sh.rate, Progress: update},
		func(ctx context.Context, w int, seq int64) load.Outcome {
			if body != nil {
				return b.send(ctx, w, base+seq, "f"+strconv.FormatInt(seq, 36), body(seq), -1, "")
			}
			return b.place(ctx, w, base+seq, "f"+strconv.FormatInt(seq, 36))
		})
	done()
	r := runResult(name, sh, s, res)
	r.CPU = stopCPU()
	r.Buyers = r.Requests
	r.Profiles = prof()
	if _, err := e.finish(ctx, r, s, b, res, r.Requests*int64(s.quantity)); err != nil {
		return r, err
	}
	e.chart(r)
	return r, nil
}

// clickers: a fixed crowd, each buyer clicking many times with a fresh key
// per click, some clicks retried with the same key.
func (e *env) clickers(ctx context.Context, sh shape) (*report.Run, error) {
	const name = "clickers"
	s, err := e.newSale(ctx, name, sh.stock, e.opts.quantity, e.opts.buckets)
	if err != nil {
		return nil, err
	}
	base := userBase()
	tk, err := mintTokens(e.secret, base, sh.users, e.subject())
	if err != nil {
		return nil, err
	}
	type click struct {
		user int64
		key  string
	}
	var jobs []click
	for u := range sh.users {
		for c := range e.opts.clicks {
			k := click{base + u, fmt.Sprintf("c%d-%d", u, c)}
			jobs = append(jobs, k)
			if rand.Float64() < e.opts.retries {
				jobs = append(jobs, k) // a retry: the same key again
			}
		}
	}
	rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	b, err := e.newBuyers(e.apis, sh.connections, s.activity, s.quantity, tk)
	if err != nil {
		return nil, err
	}
	b.all = true
	defer b.close()
	update, done := e.meter.track(name, 0, int64(len(jobs)))
	b.t0 = time.Now()
	stopCPU := e.measureCPU()
	res := load.Run(ctx, load.Config{Workers: sh.connections, Ops: int64(len(jobs)), Progress: update},
		func(ctx context.Context, w int, seq int64) load.Outcome {
			j := jobs[seq]
			return b.place(ctx, w, j.user, j.key)
		})
	done()
	r := runResult(name, sh, s, res)
	r.CPU = stopCPU()
	r.Buyers = sh.users
	if _, err := e.finish(ctx, r, s, b, res, sh.users*int64(s.quantity)); err != nil {
		return r, err
	}
	e.chart(r)
	return r, nil
}

// sustained: stock that never runs out; measures the whole pipeline.
func (e *env) sustained(ctx context.Context, sh shape) (*report.Run, error) {
	r, _, _, err := e.sustainedAs(ctx, "sustained", sh)
	return r, err
}

// sustainedAs runs the sustained load as the run name; it also returns
// the sale and when the load ended (the events scenario times the
// deliveries after it).
func (e *env) sustainedAs(ctx context.Context, name string, sh shape) (*report.Run, sale, time.Time, error) {
	s, err := e.newSale(ctx, name, sh.stock, e.opts.quantity, e.opts.buckets)
	if err != nil {
		return nil, s, time.Time{}, err
	}
	expect := int64(sh.duration.Seconds() * 15000)
	if sh.rate > 0 {
		expect = int64(sh.duration.Seconds()*sh.rate) + 1
	}
	expect = min(expect, sh.stock/int64(s.quantity))
	base := userBase()
	tk, err := e.mintTokens(name, base, expect)
	if err != nil {
		return nil, s, time.Time{}, err
	}
	b, err := e.newBuyers(e.apis, sh.connections, s.activity, s.quantity, tk)
	if err != nil {
		return nil, s, time.Time{}, err
	}
	defer b.close()

	start := time.Now()
	lag := e.sampleLag(ctx, []sale{s}, start)
	prof := e.startProfiles(ctx, name, sh.duration)
	update, done := e.meter.track(name, sh.duration, 0)
	b.t0 = start
	stopCPU := e.measureCPU()
	res := load.Run(ctx, load.Config{Workers: sh.connections, Duration: sh.duration, Rate: sh.rate, Progress: update},
		func(ctx context.Context, w int, seq int64) load.Outcome {
			return b.place(ctx, w, base+seq, "s"+strconv.FormatInt(seq, 36))
		})
	done()
	loadEnd := time.Now()
	dbAtEnd, _ := e.db.Activities.ItemStock(context.WithoutCancel(ctx), s.item)
	r := runResult(name, sh, s, res)
	r.CPU = stopCPU()
	r.Buyers = r.Requests
	r.Profiles = prof()
	e.meter.say("%s: load done, waiting for the pipeline to drain", name)
	t, err := e.finish(ctx, r, s, b, res, r.Requests*int64(s.quantity))
	pl := lag.stop()
	if err != nil {
		return r, s, loadEnd, err
	}
	endToEnd := loadEnd.Sub(start) + time.Duration(r.DrainSeconds*float64(time.Second))
	pl.OrdersPerSecond = stats.Rate(t.created, endToEnd)
	pl.DuringLoad = stats.Rate(s.stock-dbAtEnd, loadEnd.Sub(start))
	if pl.PendingToCreated, pl.PendingToCreatedSeries, err = e.pendingToCreated(context.WithoutCancel(ctx), []int64{s.item}, start); err != nil {
		return r, s, loadEnd, err
	}
	r.Pipeline = pl
	e.chart(r)
	return r, s, loadEnd, nil
}

// lagSampler samples a load's pipeline until stopped.
type lagSampler struct {
	cancel  context.CancelFunc
	sampled chan struct{}
	pl      report.Pipeline
}

// sampleLag samples the pipeline of sales every 250 ms from start: units
// in flight in Redis and units created in MySQL (stock sold), summed over
// the sales' items.
func (e *env) sampleLag(ctx context.Context, sales []sale, start time.Time) *lagSampler {
	ctx, cancel := context.WithCancel(ctx)
	ls := &lagSampler{cancel: cancel, sampled: make(chan struct{})}
	var stock int64
	for _, s := range sales {
		stock += s.stock
	}
	go func() {
		defer close(ls.sampled)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		lag := &ls.pl.Lag
		for {
			db, err := e.stockLeft(ctx, sales)
			var inflight int64
			for _, s := range sales {
				if err != nil {
					break
				}
				var snap reservation.Snapshot
				snap, err = e.store.Stock.Stock(ctx, s.stockItem())
				inflight += snap.Inflight
			}
			if err == nil {
				p := report.LagPoint{T: time.Since(start).Seconds(), Inflight: inflight, Created: stock - db}
				// The rate is over the last second of samples.
				for i := len(*lag) - 1; i >= 0; i-- {
					if p.T-(*lag)[i].T >= 1 || i == 0 {
						p.Rate = float64(p.Created-(*lag)[i].Created) / (p.T - (*lag)[i].T)
						break
					}
				}
				*lag = append(*lag, p)
				ls.pl.MaxInflight = max(ls.pl.MaxInflight, inflight)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ls
}

// stop ends the sampling and returns a Pipeline holding the lag samples
// and the most units in flight.
func (ls *lagSampler) stop() *report.Pipeline {
	ls.cancel()
	<-ls.sampled
	pl := ls.pl
	return &pl
}

// pendingToCreated reads created_at - reserved_at of every created order
// of items; the series buckets it by reservation time since start.
func (e *env) pendingToCreated(ctx context.Context, items []int64, start time.Time) (stats.Summary, []stats.Point, error) {
	rows, err := e.db.Gorm().WithContext(ctx).Raw(
		"SELECT reserved_at, created_at FROM orders WHERE item_id IN ? AND status IN ('CREATED', 'PAID')", items).Rows()
	if err != nil {
		return stats.Summary{}, nil, fmt.Errorf("read order times: %w", err)
	}
	defer rows.Close()
	h := stats.NewHistogram()
	var events []stats.Event
	for rows.Next() {
		var reserved, created time.Time
		if err := rows.Scan(&reserved, &created); err != nil {
			return stats.Summary{}, nil, err
		}
		d := max(created.Sub(reserved), 0)
		stats.Record(h, d)
		events = append(events, stats.Event{At: max(reserved.Sub(start), 0), Latency: d})
	}
	if err := rows.Err(); err != nil {
		return stats.Summary{}, nil, err
	}
	return stats.Summarize(h), stats.Series(events, time.Second), nil
}
