package main

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/stats"
	"github.com/seckill/seckill/bench/internal/verify"
)

// The queue scenario: a sale with a waiting room under a crowd. Buyers
// join in a burst before the start, then poll the queue; those it admits
// order with their admission. It measures the joins, the polls (against
// the sale page's pages/s of the same run), the time from the start to
// sold out and the units the outstanding admissions hold against the units
// left, and checks that no order went through without its buyer's
// admission.

const (
	// queueAdmitRate sells the default 1,000 units out within a second
	// of the start: the room's pace is not what the scenario measures.
	queueAdmitRate = 2000
	// queueAdmissionTTL outlives the run, so no admission expires in it.
	queueAdmissionTTL = 120
	// queueSampleEvery is how often the room's held units and the stock
	// are read.
	queueSampleEvery = 50 * time.Millisecond
	// queueStartMargin is the room between the joins' expected end and
	// the start; the expected length is the calibration's times 1.25.
	queueStartMargin = 3 * time.Second
	// queueCalibration is how many joins, on a scratch sale, measure the
	// join rate the start is set by.
	queueCalibration = 5000
	// queueProbeEvery: every this many admitted buyers (by their place in
	// the load) also send orders without their valid admission.
	queueProbeEvery = 50
	// queueStrangers are buyers who never join: their tokens carry other
	// buyers' admissions.
	queueStrangers = 64
)

// The probes' kinds, in the report's order.
const (
	probeMissing = iota
	probeForged
	probeOthers
	probeWaiting
	probeReused
	probeKinds
)

var probeInfo = [probeKinds]struct{ kind, want string }{
	{"by an admitted buyer, without X-Admission", "403 NOT_ADMITTED"},
	{"by an admitted buyer, its admission's signature altered", "403 NOT_ADMITTED"},
	{"by a buyer who never joined, with an admitted buyer's admission", "403 NOT_ADMITTED"},
	{"by a buyer still waiting after the start, without X-Admission", "403 NOT_ADMITTED"},
	{"by a buyer whose order was accepted, its admission again with a new key", "not 202"},
}

// qBuyer is one buyer's state in the poll phase (only its worker touches
// it).
type qBuyer struct {
	admission string        // from the ADMITTED poll (kept: the reuse probe sends it again)
	ordered   bool          // an order was answered 202
	admitted  bool          // a poll answered ADMITTED once
	probed    bool          // its probes were sent (once, whatever they got)
	tries     int           // orders sent
	toldSold  time.Duration // since the start, when first told SOLD_OUT (0: not yet)
}

// queueOrderTries bounds the orders one admitted buyer sends: one refused
// that often (it should not be) stops polling.
const queueOrderTries = 5

// qDue is a buyer due to poll at due (since the poll phase's start).
type qDue struct {
	due   time.Duration
	buyer int
}

// dueHeap orders a worker's buyers by when they are due to poll.
type dueHeap []qDue

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(qDue)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// qAction is a request a worker owes before its next poll: an order, or a
// probe of one kind.
type qAction struct {
	buyer int
	probe int // -1: the buyer's order
}

// qWorker is one connection's share of the crowd: buyer i polls on worker
// i mod connections.
type qWorker struct {
	due      dueHeap
	todo     []qAction
	polls    int64
	before   int64 // polls sent before the start
	pollErrs int64
	pollLat  []time.Duration
	orders   []int64 // by load.Outcome
	probes   [probeKinds]map[string]int64
	probed   bool // sent its waiting buyer's probe
}

// queueRun is the state of one queue scenario.
type queueRun struct {
	e        *env
	b        *buyers
	urls     []string // each API's queue endpoint of the sale
	base     int64    // buyer i is user base+i
	n        int
	buyers   []qBuyer
	workers  []qWorker
	startsAt time.Time
	t0       time.Time // the poll phase's start
	// settled counts the buyers done waiting: ordered, or told SOLD_OUT.
	settled atomic.Int64
}

// queueOvertime is how long past sh.duration after the start the polls
// go on while some buyer is not settled (admitted and not yet ordered, or
// never told SOLD_OUT).
const queueOvertime = 60 * time.Second

// queueScenario runs the queue scenario: the join phase's run
// ("queue-join") and the poll phase's ("queue", with the figures).
func (e *env) queueScenario(ctx context.Context, sh shape) ([]*report.Run, error) {
	const name = "queue"
	n := int(sh.users)
	base := userBase()
	tk, err := e.mintTokens(name, base, int64(n)+queueStrangers)
	if err != nil {
		return nil, err
	}
	b, err := e.newBuyers(e.apis, sh.connections, 0, e.opts.quantity, tk)
	if err != nil {
		return nil, err
	}
	defer b.close()

	// The join rate on this machine, now, on a sale that starts much
	// later: the real sale's start is set by it.
	now := time.Now().UTC()
	scratch, err := e.makeSale(ctx, name+"-calibration", 1, e.opts.quantity, roomSale(now.Add(time.Hour), now))
	if err != nil {
		return nil, err
	}
	k := min(n, queueCalibration)
	q := &queueRun{e: e, b: b, base: base, n: n}
	q.urls = queueURLs(e.apis, scratch.activity)
	cal := load.Run(ctx, load.Config{Workers: sh.connections, Ops: int64(k)},
		func(ctx context.Context, w int, seq int64) load.Outcome { o, _ := q.join(ctx, w, base+seq); return o })
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rate := stats.Rate(int64(len(cal.Samples)), cal.Elapsed)
	if rate <= 0 {
		return nil, errors.New("calibration: no join answered")
	}
	expect := time.Duration(float64(n) / rate * 1.25 * float64(time.Second))
	now = time.Now().UTC()
	q.startsAt = now.Add(expect + queueStartMargin).Truncate(time.Millisecond)
	e.meter.say("%s: %d calibration joins at %.0f/s; the sale starts in %.1f s", name, k, rate, q.startsAt.Sub(now).Seconds())
	s, err := e.makeSale(ctx, name, sh.stock, e.opts.quantity, roomSale(q.startsAt, now))
	if err != nil {
		return nil, err
	}
	q.urls = queueURLs(e.apis, s.activity)
	b.body = orderBody(s.activity, s.quantity)

	// The join phase: every buyer joins once.
	joinsBefore, err := e.commandCalls(ctx, "evalsha", "eval")
	if err != nil {
		return nil, err
	}
	late, joinErrs := make([]int64, sh.connections), make([]int64, sh.connections)
	update, done := e.meter.track(name+"-join", 0, int64(n))
	// With --pprof, a profile of the joins as long as the calibration
	// says they take.
	prof := e.startProfiles(ctx, name+"-join", time.Duration(float64(n)/rate*float64(time.Second)))
	stopCPU := e.measureCPU()
	joins := load.Run(ctx, load.Config{Workers: sh.connections, Ops: int64(n), Progress: update},
		func(ctx context.Context, w int, seq int64) load.Outcome {
			o, early := q.join(ctx, w, base+seq)
			switch {
			case o != load.Accepted:
				joinErrs[w]++
			case !early:
				late[w]++
			}
			return o
		})
	done()
	joinCPU := stopCPU()
	joinsEnd := time.Now()
	joinsAfter, err := e.commandCalls(ctx, "evalsha", "eval")
	if err != nil {
		return nil, err
	}
	jr := runResult(name+"-join", shape{connections: sh.connections, stock: sh.stock}, s, joins)
	jr.CPU, jr.Buyers = joinCPU, int64(n)
	jr.Profiles = prof()
	jr.Violations = []verify.Violation{} // it places no order
	if err := e.readStock(ctx, jr, s); err != nil {
		return nil, err
	}
	runs := []*report.Run{jr}
	qs := &report.Queue{Buyers: int64(n), AdmitPerSecond: queueAdmitRate, JoinSeconds: joins.Elapsed.Seconds(),
		JoinsPerSecond: jr.Throughput, StartMargin: q.startsAt.Sub(joinsEnd).Seconds(), SampleMs: int(queueSampleEvery / time.Millisecond)}
	for w := range late {
		qs.Late += late[w]
		qs.JoinErrors += joinErrs[w]
	}
	if len(joins.Samples) > 0 {
		qs.ScriptsPerJoin = float64(joinsAfter-joinsBefore) / float64(len(joins.Samples))
	}
	if ctx.Err() != nil {
		return runs, ctx.Err()
	}

	// The poll phase, until sh.duration after the start.
	q.buyers = make([]qBuyer, n)
	q.workers = make([]qWorker, sh.connections)
	for i := range n {
		w := &q.workers[i%sh.connections]
		w.due = append(w.due, qDue{buyer: i}) // all due at once, in order: a heap already
	}
	for w := range q.workers {
		q.workers[w].orders = make([]int64, len(load.Outcomes))
		for k := range q.workers[w].probes {
			q.workers[w].probes[k] = map[string]int64{}
		}
	}
	// The polls run until sh.duration after the start, and on while a
	// buyer is not settled, up to queueOvertime more.
	pollFor := time.Until(q.startsAt.Add(sh.duration)).Round(100 * time.Millisecond)
	minEnd := time.Now().Add(pollFor)
	settledAll := func() bool { return q.settled.Load() >= int64(n) && time.Now().After(minEnd) }
	sampler := e.sampleRoom(ctx, s, q.startsAt)
	// The scripts Redis ran by the start: the polls before it should
	// cost none but the room's advance, once a second per API.
	atStart := make(chan int64, 1)
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(q.startsAt)):
		}
		n, _ := e.commandCalls(context.WithoutCancel(ctx), "evalsha", "eval")
		atStart <- n
	}()
	update, done = e.meter.track(name, pollFor, 0)
	q.t0 = time.Now()
	b.t0 = q.t0
	stopCPU = e.measureCPU()
	res := load.Run(ctx, load.Config{Workers: sh.connections, Duration: pollFor + queueOvertime, Until: settledAll, Progress: update}, q.step)
	done()
	pollCPU := stopCPU()
	pollEnd := time.Now()
	room := sampler.stop()
	pollAfter, err := e.commandCalls(context.WithoutCancel(ctx), "evalsha", "eval")
	if err != nil {
		return runs, err
	}
	startScripts := <-atStart
	qs.ScriptsBeforeStart, qs.ScriptsFromStart = startScripts-joinsAfter, pollAfter-startScripts
	qs.Samples, qs.MaxHeldOverLeft, qs.MaxHeld, qs.SoldOutAfter = room.samples, room.maxOver, room.maxHeld, room.soldOutAfter

	r := runResult(name, shape{connections: sh.connections, duration: pollEnd.Sub(q.t0).Round(100 * time.Millisecond), stock: sh.stock}, s, res)
	r.CPU, r.Buyers, r.Queue = pollCPU, int64(n), qs
	q.tally(qs, r, pollEnd)
	e.meter.say("%s: load done, waiting for the pipeline to drain", name)
	if _, err := e.finish(ctx, r, s, b, res, int64(n)*int64(s.quantity)); err != nil {
		return append(runs, r), err
	}
	extra, err := q.check(context.WithoutCancel(ctx), s, qs)
	r.Violations = append(r.Violations, extra...)
	e.chart(r)
	return append(runs, r), err
}

// roomSale is the activity fields of a sale with a waiting room starting
// at starts (the admissions' pace and lifetime the scenario's).
func roomSale(starts, now time.Time) map[string]any {
	return map[string]any{"starts_at": starts, "ends_at": now.Add(3 * time.Hour),
		"waiting_room": map[string]any{"admit_per_second": queueAdmitRate, "admission_ttl_seconds": queueAdmissionTTL}}
}

func queueURLs(apis []string, activity int64) []string {
	urls := make([]string, len(apis))
	for i, base := range apis {
		urls[i] = fmt.Sprintf("%s/api/v1/activities/%d/queue", base, activity)
	}
	return urls
}

func orderBody(activity int64, quantity int) []byte {
	return []byte(fmt.Sprintf(`{"activity_id":%d,"quantity":%d}`, activity, quantity))
}

var (
	stateWaiting  = []byte(`"state":"WAITING"`)
	stateAdmitted = []byte(`"state":"ADMITTED"`)
	stateSoldOut  = []byte(`"state":"SOLD_OUT"`)
	noPosition    = []byte(`"position":null`)
)

// join sends user's join; early says it was answered WAITING with no
// position yet (its place is drawn at the start).
func (q *queueRun) join(ctx context.Context, w int, user int64) (o load.Outcome, early bool) {
	st, body := q.b.do(ctx, w, q.urls, load.Call{Method: http.MethodPost, Token: q.b.tokens.For(user)})
	o = load.Classify(st, body)
	if o == load.Accepted && !bytes.Contains(body, stateWaiting) {
		return load.ClientError, false
	}
	return o, bytes.Contains(body, noPosition)
}

// step is worker w's next request: what it owes first (an order, a
// probe), else the poll of its buyer due first. It polls as fast as the
// connection allows, ahead of poll_after_ms, but in the order the
// answers' poll_after_ms put its buyers.
func (q *queueRun) step(ctx context.Context, w int, _ int64) load.Outcome {
	qw := &q.workers[w]
	if len(qw.todo) > 0 {
		a := qw.todo[0]
		qw.todo = qw.todo[1:]
		if a.probe >= 0 {
			return q.probe(ctx, w, a.buyer, a.probe)
		}
		return q.order(ctx, w, a.buyer)
	}
	if len(qw.due) == 0 {
		// Every buyer of this worker ordered: nothing to poll.
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
		return load.Accepted
	}
	next := heap.Pop(&qw.due).(qDue)
	i := next.buyer
	began := time.Now()
	st, body := q.b.do(ctx, w, q.urls, load.Call{Method: http.MethodGet, Token: q.b.tokens.For(q.base + int64(i))})
	qw.polls++
	if began.Before(q.startsAt) {
		qw.before++
	}
	qw.pollLat = append(qw.pollLat, time.Since(began))
	o := load.Classify(st, body)
	after := time.Duration(jsonInt(body, "poll_after_ms")) * time.Millisecond
	bu := &q.buyers[i]
	switch {
	case o != load.Accepted:
		qw.pollErrs++
		after = time.Second
	case bytes.Contains(body, stateAdmitted):
		bu.admitted = true
		bu.admission = jsonString(body, "admission")
		if i%queueProbeEvery == 0 && !bu.probed {
			bu.probed = true
			qw.todo = append(qw.todo, qAction{i, probeMissing}, qAction{i, probeForged}, qAction{i, probeOthers})
		}
		qw.todo = append(qw.todo, qAction{i, -1})
		return o // polled again only if the order is not accepted
	case bytes.Contains(body, stateSoldOut):
		if bu.toldSold == 0 {
			bu.toldSold = max(time.Since(q.startsAt), time.Nanosecond)
			q.settled.Add(1)
		}
	case bytes.Contains(body, stateWaiting):
		if !qw.probed && w%10 == 0 && time.Now().After(q.startsAt) && !bytes.Contains(body, noPosition) {
			qw.probed = true
			qw.todo = append(qw.todo, qAction{i, probeWaiting})
		}
	default: // EXPIRED or ENDED: nothing more to wait for
		if bu.toldSold == 0 {
			q.settled.Add(1)
		}
		return o
	}
	heap.Push(&qw.due, qDue{due: time.Since(q.t0) + after, buyer: i})
	return o
}

// order places buyer i's order with its admission; one not accepted is
// polled again (a 503 gives the admission back).
func (q *queueRun) order(ctx context.Context, w, i int) load.Outcome {
	qw, bu := &q.workers[w], &q.buyers[i]
	o := q.b.placeAdmitted(ctx, w, q.base+int64(i), "q"+strconv.Itoa(i), bu.admission)
	qw.orders[o]++
	bu.tries++
	if o == load.Accepted {
		bu.ordered = true
		if bu.toldSold == 0 {
			q.settled.Add(1)
		}
		if i%queueProbeEvery == 0 {
			qw.todo = append(qw.todo, qAction{i, probeReused})
		}
		return o
	}
	if o == load.Already || bu.tries >= queueOrderTries {
		q.settled.Add(1) // it will not order: the report's outcomes show why
		return o
	}
	heap.Push(&qw.due, qDue{due: time.Since(q.t0) + 100*time.Millisecond, buyer: i})
	return o
}

// probe sends an order of kind k for buyer i without i's valid admission
// (an accepted one is in the buyers' answers, so the invariants count it).
func (q *queueRun) probe(ctx context.Context, w, i, k int) load.Outcome {
	user, adm := q.base+int64(i), q.buyers[i].admission
	switch k {
	case probeMissing, probeWaiting:
		adm = ""
	case probeForged:
		adm = forge(adm)
	case probeOthers:
		user = q.base + int64(q.n) + int64(i/queueProbeEvery)%queueStrangers
	}
	o := q.b.placeAdmitted(ctx, w, user, fmt.Sprintf("qp%d-%d", k, i), adm)
	st := o.String()
	if o != load.Accepted {
		if code := jsonString(q.b.bufs[w].Bytes(), "code"); code != "" {
			st = code
		}
	}
	q.workers[w].probes[k][st]++
	return o
}

// forge alters the first character of an admission's mac (its fifth
// part, the one the api checks; an a2's sixth, the Ed25519 signature, is
// for the shop's own checkout): the api must refuse it. The first, not the
// last: a base64 decoder may ignore the last character's spare bits.
func forge(adm string) string {
	at := 0
	for range 4 {
		dot := strings.IndexByte(adm[at:], '.')
		if dot < 0 {
			return adm + "x"
		}
		at += dot + 1
	}
	if at >= len(adm) {
		return adm + "x"
	}
	c := byte('A')
	if adm[at] == 'A' {
		c = 'B'
	}
	return adm[:at] + string(c) + adm[at+1:]
}

// tally sums the workers' counts into qs and r once the poll phase ended
// at end.
func (q *queueRun) tally(qs *report.Queue, r *report.Run, end time.Time) {
	h := stats.NewHistogram()
	orders := make([]int64, len(load.Outcomes))
	probes := make([]report.Probe, probeKinds)
	for k := range probes {
		probes[k] = report.Probe{Kind: probeInfo[k].kind, Want: probeInfo[k].want, Got: map[string]int64{}}
	}
	for w := range q.workers {
		qw := &q.workers[w]
		qs.Polls += qw.polls
		qs.PollsBeforeStart += qw.before
		qs.PollErrors += qw.pollErrs
		for _, d := range qw.pollLat {
			stats.Record(h, d)
		}
		for o, c := range qw.orders {
			orders[o] += c
		}
		for k, got := range qw.probes {
			for st, c := range got {
				probes[k].Got[st] += c
				probes[k].Sent += c
				if st == "NOT_ADMITTED" || (k == probeReused && st != load.Accepted.String()) {
					probes[k].Correct += c
				}
			}
		}
	}
	qs.PollLatency = stats.Summarize(h)
	qs.PollSeconds = end.Sub(q.t0).Seconds()
	qs.PollsPerSecond = stats.Rate(qs.Polls, end.Sub(q.t0))
	if q.startsAt.After(q.t0) && end.After(q.startsAt) {
		qs.PollsPerSecondBeforeStart = stats.Rate(qs.PollsBeforeStart, q.startsAt.Sub(q.t0))
		qs.PollsPerSecondFromStart = stats.Rate(qs.Polls-qs.PollsBeforeStart, end.Sub(q.startsAt))
	}
	qs.Probes = probes
	var last time.Duration
	for i := range q.buyers {
		bu := &q.buyers[i]
		if bu.admitted {
			qs.Admitted++
		}
		if bu.ordered {
			qs.Ordered++
			continue
		}
		qs.Waiters++
		if bu.toldSold > 0 {
			qs.ToldSoldOut++
			last = max(last, bu.toldSold)
		}
	}
	qs.AllToldAfter = -1
	if qs.Waiters > 0 && qs.ToldSoldOut == qs.Waiters {
		qs.AllToldAfter = last.Seconds()
	}
	// The run's outcomes are its orders' (its probes' included): its
	// polls are in qs.
	r.Outcomes = map[string]int64{}
	for o, c := range orders {
		if c > 0 {
			r.Outcomes[load.Outcomes[o].String()] = c
		}
	}
	// A probe accepted is an order too (the refused ones are in the
	// probes' table, not among the errors).
	for k := range probes {
		r.Outcomes[load.Accepted.String()] += probes[k].Got[load.Accepted.String()]
	}
}

// The scenario's own invariants.
const (
	invAdmissionsWithinLeft = "admissions-held-within-units-left"
	invProbesRefused        = "orders-without-their-admission-refused"
	invOrdersAdmitted       = "every-order-had-its-buyers-admission"
)

// check judges what only this scenario can: the orders without a valid
// admission were refused, every live order's buyer was admitted and used
// their admission (the room's used hash, in Redis), and the admissions
// never held more units than were left.
func (q *queueRun) check(ctx context.Context, s sale, qs *report.Queue) ([]verify.Violation, error) {
	var out []verify.Violation
	if qs.MaxHeldOverLeft > 0 {
		out = append(out, verify.Violation{Invariant: invAdmissionsWithinLeft, By: qs.MaxHeldOverLeft,
			Detail: fmt.Sprintf("the unused admissions held %d units more than were left (most held %d)", qs.MaxHeldOverLeft, qs.MaxHeld)})
	}
	var wrong int64
	var kinds []string
	for _, p := range qs.Probes {
		if p.Sent > p.Correct {
			wrong += p.Sent - p.Correct
			kinds = append(kinds, fmt.Sprintf("%s: %s", p.Kind, report.Answers(p.Got)))
		}
	}
	if wrong > 0 {
		out = append(out, verify.Violation{Invariant: invProbesRefused, By: wrong, Detail: strings.Join(kinds, "; ")})
	}
	var users []string
	if err := q.e.db.Gorm().WithContext(ctx).Raw("SELECT user_id FROM orders WHERE activity_id = ? AND status IN ('CREATED', 'PAID')",
		s.activity).Scan(&users).Error; err != nil {
		return out, fmt.Errorf("read the sale's buyers: %w", err)
	}
	used, err := q.e.rdb.HGetAll(ctx, roomKey(q.e, s, "used")).Result()
	if err != nil {
		return out, fmt.Errorf("read the room's used admissions: %w", err)
	}
	admitted := map[string]bool{}
	subject := q.e.subject()
	for i := range q.buyers {
		if q.buyers[i].admitted {
			admitted[subject(q.base+int64(i))] = true
		}
	}
	var bad []string
	for _, u := range users {
		if _, ok := used[u]; !ok || !admitted[u] {
			bad = append(bad, fmt.Sprintf("%s (told ADMITTED %t, admission used in Redis %t)", u, admitted[u], ok))
		}
	}
	if len(bad) > 0 {
		out = append(out, verify.Violation{Invariant: invOrdersAdmitted, By: int64(len(bad)),
			Detail: fmt.Sprintf("%d of %d live orders' buyers, e.g. %s", len(bad), len(users), bad[0])})
	}
	return out, nil
}

// roomKey is one of the sale's room keys (stockredis's roomKeys:
// "<prefix>:{i<tag>}:room:<activity>:<part>", beside the stock key of its
// first item, "<prefix>:{i<tag>}:stock").
func roomKey(e *env, s sale, part string) string {
	stock := e.store.Keys(s.stockItem()).Stock()
	return strings.TrimSuffix(stock, "stock") + "room:" + strconv.FormatInt(s.activity, 10) + ":" + part
}

// roomSampler reads a room's held units and its item's stock until
// stopped.
type roomSampler struct {
	cancel  context.CancelFunc
	sampled chan struct{}
	samples int
	maxOver int64
	maxHeld int64
	// soldOutAfter is from the start to the first sample of stock 0 (-1:
	// none).
	soldOutAfter float64
}

// sampleRoom samples sale s's room every queueSampleEvery: held - left and
// held, with one MGET (the keys share the sale's hash tag), and when the
// stock first reads 0 after starts.
func (e *env) sampleRoom(ctx context.Context, s sale, starts time.Time) *roomSampler {
	ctx, cancel := context.WithCancel(ctx)
	rs := &roomSampler{cancel: cancel, sampled: make(chan struct{}), maxOver: -s.stock, soldOutAfter: -1}
	keys := []string{roomKey(e, s, "held"), e.store.Keys(s.stockItem()).Stock()}
	go func() {
		defer close(rs.sampled)
		t := time.NewTicker(queueSampleEvery)
		defer t.Stop()
		for {
			v, err := e.rdb.MGet(ctx, keys...).Result()
			if err == nil && len(v) == 2 && v[1] != nil {
				held, left := redisInt(v[0]), redisInt(v[1])
				rs.samples++
				rs.maxOver, rs.maxHeld = max(rs.maxOver, held-left), max(rs.maxHeld, held)
				if left == 0 && rs.soldOutAfter < 0 {
					rs.soldOutAfter = time.Since(starts).Seconds()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return rs
}

func (rs *roomSampler) stop() *roomSampler {
	rs.cancel()
	<-rs.sampled
	return rs
}

// redisInt is an MGET value as a number (a missing key: 0).
func redisInt(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// jsonInt is the number after "name": in a flat JSON body (0 if absent):
// cheaper than decoding every poll on a machine the bench shares.
func jsonInt(body []byte, name string) int64 {
	at := bytes.Index(body, []byte(`"`+name+`":`))
	if at < 0 {
		return 0
	}
	rest := body[at+len(name)+3:]
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	n, _ := strconv.ParseInt(string(rest[:end]), 10, 64)
	return n
}

// jsonString is the string after "name": in a JSON body whose strings
// need no unescaping ("" if absent).
func jsonString(body []byte, name string) string {
	at := bytes.Index(body, []byte(`"`+name+`":"`))
	if at < 0 {
		return ""
	}
	rest := body[at+len(name)+4:]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return ""
	}
	return string(rest[:end])
}
