package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/seckill/seckill/bench/internal/apiview"
	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/stats"
	"github.com/seckill/seckill/bench/internal/verify"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// The draw scenario: a draw sale ("mode": "draw") under a crowd of
// entrants. Every buyer enters once, naming a size, as fast as the
// connections allow; at entries_close_at the consumer's drawer draws and
// gives each winner an order through the reserve script, Kafka and the
// consumer. It measures the entries (against the one-item loads of the
// same run), the time from the close to the draw and to the last winner's
// order, and checks the published record (draw.Verify), that each size's
// stock won and that every winner has one order.

const (
	// drawLead is from the sale's making to the start of its entries'
	// window: the time to warm it up.
	drawLead = time.Second
	// drawReEnterEvery: one buyer in this many who entered enters again
	// once the winners have their orders (each must get its entry back).
	drawReEnterEvery = 100
	// drawPollEvery is how often MySQL is read for the draw's state and
	// the winners' orders.
	drawPollEvery = 20 * time.Millisecond
	// drawWait bounds the wait from the close to DRAWN, and from DRAWN
	// to every winner's order.
	drawWait = 2 * time.Minute
	// drawRatePhase is how long the entries are first offered at a fixed
	// rate (--entry-rate), inside the window.
	drawRatePhase = 10 * time.Second
)

// wonWanted is how many of a size's entries must win: as many as its
// stock holds, every entry asking quantity units (the draw's first fit
// gives the stock to the first entries in rank order until one no longer
// fits, and with equal quantities none after it fits either).
func wonWanted(stock, entries int64, quantity int) int64 {
	return max(min(entries, stock/int64(max(quantity, 1))), 0)
}

// drawFields are the activity fields of a draw whose entries close at
// closes.
func drawFields(closes time.Time) map[string]any {
	return map[string]any{"mode": activity.ModeDraw, "entries_close_at": closes}
}

// dWorker is one connection's counts (only its worker touches them).
type dWorker struct {
	late           int64 // entries refused after the close
	reSent, reSame int64 // entries sent again; answered 200 with the first entry
}

// drawRun is the state of one draw scenario.
type drawRun struct {
	b       *buyers
	urls    []string // each API's entries endpoint of the sale
	bodies  [][]byte // one entry body per size
	base    int64    // buyer i is user base+i
	demand  chooser
	rngs    []*rand.Rand
	ids     []string // buyer i's entry id, from its 201 ("" if none)
	picks   []int    // buyer i's size
	workers []dWorker
}

var (
	stateEntered = []byte(`"state":"ENTERED"`)
	notActive    = []byte(`"ACTIVITY_NOT_ACTIVE"`)
)

// use points the entries at the sale of sizes.
func (d *drawRun) use(apis []string, sizes []sale, quantity int) {
	d.urls = make([]string, len(apis))
	for i, base := range apis {
		d.urls[i] = fmt.Sprintf("%s/api/v1/activities/%d/entries", base, sizes[0].activity)
	}
	d.bodies = make([][]byte, len(sizes))
	for i, s := range sizes {
		d.bodies[i] = []byte(fmt.Sprintf(`{"item_id":%d,"quantity":%d}`, s.item, quantity))
	}
}

func (d *drawRun) send(ctx context.Context, w int, i int64, pick int) (load.Outcome, int, []byte) {
	st, body := d.b.do(ctx, w, d.urls, load.Call{Method: http.MethodPost, Token: d.b.tokens.For(d.base + i), Body: d.bodies[pick]})
	return load.Classify(st, body), st, body
}

// enter is buyer seq's entry, for a size picked by the demand.
func (d *drawRun) enter(ctx context.Context, w int, seq int64) load.Outcome {
	pick := d.demand.pick(d.rngs[w].Float64())
	o, st, body := d.send(ctx, w, seq, pick)
	switch {
	case st == http.StatusCreated && bytes.Contains(body, stateEntered):
		d.ids[seq], d.picks[seq] = jsonString(body, "entry_id"), pick
	case st == http.StatusConflict && bytes.Contains(body, notActive):
		d.workers[w].late++
		o = load.ClientError
	case o == load.Accepted:
		o = load.ClientError // a 2xx that is not a new entry
	}
	return o
}

// reEnter sends the entry of the seq-th buyer in drawReEnterEvery who
// entered again: it must be answered 200 with the first entry.
func (d *drawRun) reEnter(ctx context.Context, w int, seq int64) load.Outcome {
	i := seq * drawReEnterEvery
	for i < int64(len(d.ids)) && d.ids[i] == "" && i < (seq+1)*drawReEnterEvery-1 {
		i++
	}
	if i >= int64(len(d.ids)) || d.ids[i] == "" {
		return load.Accepted // none of these buyers entered: nothing to send
	}
	o, st, body := d.send(ctx, w, i, d.picks[i])
	d.workers[w].reSent++
	if st == http.StatusOK && jsonString(body, "entry_id") == d.ids[i] {
		d.workers[w].reSame++
	}
	return o
}

// drawScenario runs the draw scenario: the entries' run ("draw-entries")
// and the draw's ("draw", with the figures and the invariants).
func (e *env) drawScenario(ctx context.Context, sh shape) ([]*report.Run, error) {
	const name = "draw"
	n, sizes, q := sh.users, e.opts.sizesOf(name), e.opts.quantity
	base := userBase()
	tk, err := e.mintTokens(name, base, n)
	if err != nil {
		return nil, err
	}
	b, err := e.newBuyers(e.apis, sh.connections, 0, q, tk)
	if err != nil {
		return nil, err
	}
	defer b.close()
	d := &drawRun{b: b, base: base, demand: newChooser(sizeDemand(sizes, e.opts.skew)), ids: make([]string, n), picks: make([]int, n),
		rngs: make([]*rand.Rand, sh.connections), workers: make([]dWorker, sh.connections)}
	for w := range d.rngs {
		d.rngs[w] = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}

	// The window: entries close sh.duration after the sale is warmed up;
	// the buyers enter until then, or until every one of them did.
	closes := time.Now().UTC().Add(drawLead + sh.duration).Truncate(time.Millisecond)
	all, err := e.newDrop(ctx, name, sh.stock, q, 1, sizes, drawFields(closes))
	if err != nil {
		return nil, err
	}
	d.use(e.apis, all, q)
	whole := sale{item: all[0].item, activity: all[0].activity, stock: sh.stock, quantity: q}
	dr := &report.Draw{Entrants: n, Sizes: sizes, Units: sh.stock, WindowSeconds: time.Until(closes).Seconds(), PollMs: int(drawPollEvery / time.Millisecond)}

	// Entries sell nothing: the stock shown for them is the sale's as the
	// window opens (the drawer starts on it at the close).
	var stocks report.Run
	if err := e.readStocks(ctx, &stocks, all); err != nil {
		return nil, err
	}
	// First the entries at a fixed rate (open model: each is timed from
	// when it was due, so a queue in the pipeline shows in the latency),
	// then the rest of the crowd as fast as the connections go.
	var offset int64
	if rate := e.opts.entryRate; rate > 0 {
		offset = min(int64(rate*drawRatePhase.Seconds()), n/2)
		dr.RateTarget = rate
		upd, fin := e.meter.track(name+"-entries-rate", time.Duration(float64(offset)/rate*float64(time.Second)), 0)
		// The api's own view of the phase: where an entry's time went.
		before, viewErr := apiview.Entries.Take(ctx, e.apiAdmins)
		fixed := load.Run(ctx, load.Config{Workers: sh.connections, Ops: offset, Rate: rate,
			Duration: time.Duration(float64(offset) / rate * float64(time.Second)), Progress: upd}, d.enter)
		fin()
		fr := runResult(name+"-entries-rate", shape{connections: sh.connections, rate: rate}, whole, fixed)
		dr.RateSeconds, dr.RateSent, dr.RateDropped, dr.RateLatency = fixed.Elapsed.Seconds(), int64(len(fixed.Samples)), fixed.Dropped, fr.Latency
		if viewErr == nil && len(e.apiAdmins) > 0 {
			if after, err := apiview.Entries.Take(ctx, e.apiAdmins); err == nil {
				dr.RateAPIView = apiLatencies(after.Since(before), "201", "409")
			}
		}
		for _, w := range d.workers {
			dr.Late += w.late
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	update, done := e.meter.track(name+"-entries", time.Until(closes), 0)
	// With --pprof, a profile of the entries' first 15 s (or the window
	// left, if shorter).
	prof := e.startProfiles(ctx, name+"-entries", min(15*time.Second, time.Until(closes)))
	b.t0 = time.Now()
	stopCPU := e.measureCPU()
	entries := load.Run(ctx, load.Config{Workers: sh.connections, Ops: n - offset, Duration: time.Until(closes), Progress: update},
		func(ctx context.Context, w int, seq int64) load.Outcome { return d.enter(ctx, w, seq+offset) })
	done()
	dr.CloseMargin = time.Until(closes).Seconds()
	er := runResult(name+"-entries", shape{connections: sh.connections, duration: sh.duration, stock: sh.stock}, whole, entries)
	er.CPU, er.Buyers = stopCPU(), n
	er.Profiles = prof()
	er.Violations = []verify.Violation{} // it places no order
	er.DBStock, er.RedisStock = stocks.DBStock, stocks.RedisStock
	runs := []*report.Run{er}
	// A 2xx other than 201 ENTERED counts in the run as a client error:
	// accepted here means a new entry.
	dr.EntrySeconds, dr.EntriesAccepted, dr.EntryLatency = entries.Elapsed.Seconds(), er.Outcomes["accepted"], er.Latency
	dr.EntriesPerSecond = stats.Rate(dr.EntriesAccepted, entries.Elapsed)
	late := int64(0)
	for _, w := range d.workers {
		late += w.late
	}
	dr.EntryErrors = int64(len(entries.Samples)) - dr.EntriesAccepted - (late - dr.Late)
	dr.Late = late
	if ctx.Err() != nil {
		return runs, ctx.Err()
	}

	// The close, the draw and the winners' orders.
	e.meter.say("%s: %d entries in %.1f s (%.0f/s), %d refused at the close; waiting %.1f s for it", name, dr.EntriesAccepted, dr.EntrySeconds,
		dr.EntriesPerSecond, dr.Late, max(dr.CloseMargin, 0))
	select {
	case <-ctx.Done():
		return runs, ctx.Err()
	case <-time.After(time.Until(closes)):
	}
	ctx = context.WithoutCancel(ctx) // an interrupt from here on still checks what the draw did
	stopCPU = e.measureCPU()
	err = e.awaitDraw(ctx, whole.activity, closes, dr)
	drawCPU := stopCPU()
	if err != nil {
		return runs, err
	}
	// Buyers who entered come back once the winners have their orders:
	// each must get the entry it made.
	reEntries := (dr.EntriesAccepted + drawReEnterEvery - 1) / drawReEnterEvery
	again := load.Run(ctx, load.Config{Workers: sh.connections, Ops: reEntries}, d.reEnter)
	for _, w := range d.workers {
		dr.ReEntries, dr.ReEntrySame = dr.ReEntries+w.reSent, dr.ReEntrySame+w.reSame
	}
	r := runResult(name, shape{connections: sh.connections, stock: sh.stock}, whole, again)
	r.Buyers, r.Draw, r.CPU = n, dr, drawCPU
	runs = append(runs, r)
	if dr.DrawnAfter < 0 {
		r.Violations = []verify.Violation{{Invariant: invDrawRan, By: 1,
			Detail: fmt.Sprintf("the draw was not DRAWN within %s of entries_close_at", drawWait)}}
		return runs, nil
	}
	extra, err := e.checkDraw(ctx, r, d, all, errorCount(entries))
	r.Violations = append(r.Violations, extra...)
	e.chart(r)
	return runs, err
}

// readStocks puts the MySQL and Redis stock of the sale of sizes in r.
func (e *env) readStocks(ctx context.Context, r *report.Run, sizes []sale) error {
	var err error
	if r.DBStock, err = e.stockLeft(ctx, sizes); err != nil {
		return err
	}
	r.RedisStock = 0
	for _, s := range sizes {
		snap, err := e.store.Stock.Stock(ctx, s.stockItem())
		if err != nil {
			return err
		}
		r.RedisStock += snap.Stock
	}
	return nil
}

// pollUntil calls f every drawPollEvery until it reports done, for at
// most timeout, and says whether it did.
func (e *env) pollUntil(ctx context.Context, timeout time.Duration, f func(context.Context) (bool, error)) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := f(ctx)
		if ok || err != nil {
			return ok, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := e.checkPrograms(); err != nil {
			return false, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(drawPollEvery):
		}
	}
}

// sinceClose is t − closes in seconds (-1 for no t).
func sinceClose(t *time.Time, closes time.Time) float64 {
	if t == nil || t.IsZero() {
		return -1
	}
	return t.Sub(closes).Seconds()
}

// awaitDraw waits, from the close, for the draw to be DRAWN and then for
// every winner's order to be CREATED in MySQL, and fills in dr's times.
func (e *env) awaitDraw(ctx context.Context, activity int64, closes time.Time, dr *report.Draw) error {
	g := e.db.Gorm().WithContext(ctx)
	dr.PassAfter, dr.DrawnAfter, dr.FirstReservedAfter, dr.AllCreatedAfter = -1, -1, -1, -1
	var drawn time.Time
	var drawnAt *time.Time
	ok, err := e.pollUntil(ctx, drawWait, func(context.Context) (bool, error) {
		var row struct {
			State   string
			DrawnAt *time.Time
		}
		if err := g.Raw("SELECT state, drawn_at FROM activity_draws WHERE activity_id = ?", activity).Scan(&row).Error; err != nil {
			return false, fmt.Errorf("read the draw: %w", err)
		}
		drawn, drawnAt = time.Now(), row.DrawnAt
		return row.State == draw.StateDrawn, nil
	})
	if err != nil || !ok {
		return err
	}
	dr.DrawnAfter, dr.PassAfter = drawn.Sub(closes).Seconds(), sinceClose(drawnAt, closes)
	if err := g.Raw("SELECT COUNT(*) FROM draw_results WHERE activity_id = ? AND outcome = ?", activity, draw.Won).Scan(&dr.Winners).Error; err != nil {
		return fmt.Errorf("count the winners: %w", err)
	}
	e.meter.say("draw: DRAWN %.2f s after the close, %d winners; waiting for their orders", dr.DrawnAfter, dr.Winners)
	if _, err := e.pollUntil(ctx, drawWait, func(context.Context) (bool, error) {
		var live int64
		err := g.Raw("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status IN ('CREATED', 'PAID')", activity).Scan(&live).Error
		return live >= dr.Winners, err
	}); err != nil {
		return fmt.Errorf("count the winners' orders: %w", err)
	}
	var t struct {
		First, Last *time.Time
		N           int64
	}
	if err := g.Raw(`SELECT MIN(reserved_at) AS first, MAX(created_at) AS last, COUNT(*) AS n FROM orders
		WHERE activity_id = ? AND status IN ('CREATED', 'PAID')`, activity).Scan(&t).Error; err != nil {
		return fmt.Errorf("read the winners' order times: %w", err)
	}
	dr.FirstReservedAfter = sinceClose(t.First, closes)
	// The draw committed before its first winner was reserved: on a busy
	// MySQL the bench may read DRAWN later than that.
	from := drawn
	if t.First != nil && t.First.Before(from) {
		from = *t.First
	}
	if t.N >= dr.Winners && t.Last != nil {
		dr.AllCreatedAfter = sinceClose(t.Last, closes)
		dr.WinnerOrdersPerSecond = stats.Rate(dr.Winners, t.Last.Sub(from))
	}
	return nil
}

// The scenario's own invariants.
const (
	invDrawRan          = "draw-ran"
	invRecordVerifies   = "draw-record-verifies"
	invListed           = "draw-lists-the-accepted-entries"
	invSizeWonStock     = "each-size-won-its-stock"
	invWinnerOneOrder   = "every-winner-one-order"
	invOnlyWinners      = "only-winners-ordered"
	invReEntrySame      = "entering-again-returns-the-first-entry"
	invSalePageShowDraw = "sale-page-shows-the-draw"
)

// checkDraw drains the winners' orders, reads the record, MySQL and Redis
// back, fills in the figures of r and judges the draw.
func (e *env) checkDraw(ctx context.Context, r *report.Run, d *drawRun, sizes []sale, faults int64) ([]verify.Violation, error) {
	dr := r.Draw
	items := make([]reservation.Item, len(sizes))
	for i, s := range sizes {
		items[i] = s.stockItem()
	}
	took, drained, err := e.drain(ctx, items, e.opts.drainTimeout)
	if err != nil {
		return nil, err
	}
	r.DrainSeconds = took.Seconds()
	activity := sizes[0].activity

	// The record, as anyone reads it, and its verdict; MySQL's ranking
	// stands in for the other checks when it could not be read.
	var out []verify.Violation
	rec, size, took, err := e.fetchRecord(ctx, activity)
	dr.RecordBytes, dr.RecordSeconds, dr.RecordEntries = size, took.Seconds(), int64(len(rec.Entries))
	ranking, atDraw := rec.Entries, rec.Sizes
	if err != nil {
		dr.VerifyError = "not read: " + err.Error()
		out = append(out, verify.Violation{Invariant: invRecordVerifies, By: 1, Detail: "the record could not be read: " + err.Error()})
		if ranking, err = e.ranking(ctx, activity); err != nil {
			return out, err
		}
		atDraw = nil
	} else {
		start := time.Now()
		if verr := draw.Verify(rec); verr != nil {
			dr.VerifyError = verr.Error()
			out = append(out, verify.Violation{Invariant: invRecordVerifies, By: 1, Detail: verr.Error()})
		}
		dr.VerifySeconds = time.Since(start).Seconds()
	}
	entered := map[string]int64{}
	perSize := make([]int64, len(sizes))
	for i, id := range d.ids {
		if id != "" {
			entered[id] = sizes[d.picks[i]].item
			perSize[d.picks[i]]++
		}
	}
	stock := map[int64]int64{}
	for _, s := range sizes {
		stock[s.item] = s.stock
	}
	out = append(out, checkListed(ranking, entered, faults)...)
	out = append(out, checkSizes(ranking, atDraw, stock, r.Quantity)...)
	won, _ := wonBySize(ranking)

	// Every winner's order, and no other, in MySQL.
	var rows []winnerRow
	if err := e.db.Gorm().WithContext(ctx).Raw(`SELECT r.entry_id, r.item_id, r.user_id, r.outcome, COALESCE(r.order_no, '') AS order_no,
		COALESCE(o.status, '') AS status, COALESCE(o.user_id, '') AS order_user, COALESCE(o.item_id, 0) AS order_item
		FROM draw_results r LEFT JOIN orders o ON o.order_no = r.order_no
		WHERE r.activity_id = ? AND (r.outcome = ? OR r.order_no IS NOT NULL)`, activity, draw.Won).Scan(&rows).Error; err != nil {
		return out, fmt.Errorf("read the winners' orders: %w", err)
	}
	// Each size as any sale's item: its stock in both stores, its live
	// orders against the ones the drawer issued (the winners' 202s).
	issued := make([][]answer, len(sizes))
	at := map[int64]int{}
	for i, s := range sizes {
		at[s.item] = i
	}
	for i, w := range rows {
		if k, ok := at[w.ItemID]; ok && w.OrderNo != "" {
			issued[k] = append(issued[k], answer{user: int64(i), key: w.OrderNo, outcome: load.Accepted, orderNo: w.OrderNo, pick: k})
		}
	}
	obs := make([]verify.Observation, len(sizes))
	labels := make([]string, len(sizes))
	var live int64
	r.Accepted, r.Created, r.Failed, r.UnitsSold, r.DBStock, r.RedisStock, r.ExtraLive = 0, 0, 0, 0, 0, 0, 0
	for i, s := range sizes {
		t, err := e.observe(ctx, s, issued[i], 0, perSize[i]*int64(r.Quantity), drained)
		if err != nil {
			return out, err
		}
		obs[i], labels[i] = t.obs, fmt.Sprintf("item %d (%s)", s.item, s.label)
		live += t.created
		addItem(r, t, i == 0)
		dr.PerSize = append(dr.PerSize, report.DrawSize{Label: s.label, ItemID: s.item, Stock: s.stock, Entries: perSize[i], Won: won[s.item], Orders: t.created})
	}
	out = append(out, verify.CheckItems(labels, obs)...)
	out = append(out, checkWinners(rows, live)...)
	for _, w := range rows {
		if w.Outcome == draw.Won && order.Status(w.Status).Live() {
			dr.WinnerOrders++
		}
	}
	if dr.ReEntries > dr.ReEntrySame {
		out = append(out, verify.Violation{Invariant: invReEntrySame, By: dr.ReEntries - dr.ReEntrySame,
			Detail: fmt.Sprintf("%d of %d buyers who entered again were not answered 200 with their first entry", dr.ReEntries-dr.ReEntrySame, dr.ReEntries)})
	}
	if v := e.checkSalePage(ctx, activity, rec.Commitment, int64(len(entered))); v != nil {
		out = append(out, *v)
	}
	return out, nil
}

// ranking reads the sale's ranking from MySQL (draw_results), in rank
// order: what the record would list.
func (e *env) ranking(ctx context.Context, activity int64) ([]draw.Ranked, error) {
	var rows []struct {
		EntryID  string
		ItemID   int64
		Quantity int
		Outcome  string
	}
	if err := e.db.Gorm().WithContext(ctx).Raw("SELECT entry_id, item_id, quantity, outcome FROM draw_results WHERE activity_id = ? ORDER BY draw_rank",
		activity).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read the ranking: %w", err)
	}
	out := make([]draw.Ranked, len(rows))
	for i, r := range rows {
		out[i] = draw.Ranked{Entry: draw.Entry{ID: r.EntryID, ItemID: r.ItemID, Quantity: r.Quantity}, Outcome: r.Outcome}
	}
	return out, nil
}

// fetchRecord reads the sale's published draw from the first API: the
// record, its size and how long the GET took.
func (e *env) fetchRecord(ctx context.Context, activity int64) (draw.Record, int64, time.Duration, error) {
	var buf bytes.Buffer
	hc := &http.Client{Timeout: 2 * time.Minute}
	start := time.Now()
	st, err := load.Do(ctx, hc, load.Call{Method: http.MethodGet, URL: fmt.Sprintf("%s/api/v1/activities/%d/draw", e.apis[0], activity)}, &buf)
	took := time.Since(start)
	if err != nil {
		return draw.Record{}, 0, took, fmt.Errorf("read the draw record: %w", err)
	}
	if st != http.StatusOK {
		return draw.Record{}, 0, took, fmt.Errorf("read the draw record: status %d: %.200s", st, buf.Bytes())
	}
	var rec draw.Record
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		return rec, 0, took, fmt.Errorf("decode the draw record: %w", err)
	}
	return rec, int64(buf.Len()), took, nil
}

// checkSalePage reads the sale page until it shows the draw DRAWN with
// entries entries and the record's commitment ("": the record was not
// read, so any), for a few seconds (the page is cached for a second or
// so).
func (e *env) checkSalePage(ctx context.Context, activityID int64, commitment string, entries int64) *verify.Violation {
	var page struct {
		Mode string `json:"mode"`
		Draw *struct {
			State      string `json:"state"`
			Entries    int64  `json:"entries"`
			Commitment string `json:"commitment"`
		} `json:"draw"`
	}
	var last string
	hc := &http.Client{Timeout: 10 * time.Second}
	ok, err := e.pollUntil(ctx, 5*time.Second, func(ctx context.Context) (bool, error) {
		var buf bytes.Buffer
		st, err := load.Do(ctx, hc, load.Call{Method: http.MethodGet, URL: fmt.Sprintf("%s/api/v1/activities/%d", e.apis[0], activityID)}, &buf)
		last = fmt.Sprintf("status %d: %.300s", st, bytes.TrimSpace(buf.Bytes()))
		if err != nil || st != http.StatusOK || json.Unmarshal(buf.Bytes(), &page) != nil {
			return false, nil
		}
		return page.Mode == activity.ModeDraw && page.Draw != nil && page.Draw.State == draw.StateDrawn &&
			page.Draw.Entries == entries && (commitment == "" || page.Draw.Commitment == commitment), nil
	})
	if ok && err == nil {
		return nil
	}
	return &verify.Violation{Invariant: invSalePageShowDraw, By: 1,
		Detail: fmt.Sprintf("want mode draw, state DRAWN, %d entries and the record's commitment; last page %s", entries, last)}
}

// checkListed judges a draw's ranking (the record's, or MySQL's when the
// record could not be read) against what the bench saw: it lists exactly
// the entries answered 201 (entered: entry id → size; up to faults more
// may be there, entries whose answer was lost), each under the size it
// named.
func checkListed(ranking []draw.Ranked, entered map[string]int64, faults int64) []verify.Violation {
	listed := make(map[string]bool, len(ranking))
	var unknown, moved int64
	for _, x := range ranking {
		listed[x.ID] = true
		item, ok := entered[x.ID]
		switch {
		case !ok:
			unknown++
		case item != x.ItemID:
			moved++
		}
	}
	var missing int64
	example := ""
	for id := range entered {
		if !listed[id] {
			missing++
			example = id
		}
	}
	if missing == 0 && moved == 0 && unknown <= faults {
		return nil
	}
	return []verify.Violation{{Invariant: invListed, By: missing + moved + max(unknown-faults, 0),
		Detail: fmt.Sprintf("%d entries answered 201 are not in the draw (e.g. %q), %d are listed under another size, %d listed were never answered 201 (%d requests failed)",
			missing, example, moved, unknown, faults)}}
}

// checkSizes judges each size of a draw's ranking: its stock at the draw
// (atDraw, the record's; nil when unknown) is the sale's, and as many of
// its entries won as it holds (each asking quantity units).
func checkSizes(ranking []draw.Ranked, atDraw []draw.Size, stock map[int64]int64, quantity int) []verify.Violation {
	won, entries := wonBySize(ranking)
	var off int64
	var wrong []string
	if atDraw != nil {
		at := map[int64]int64{}
		for _, s := range atDraw {
			at[s.ItemID] = s.Stock
		}
		for item, units := range stock {
			if got, ok := at[item]; !ok || got != units {
				off++
				wrong = append(wrong, fmt.Sprintf("item %d: stock at the draw %d, want %d", item, got, units))
			}
		}
		if len(atDraw) != len(stock) {
			off++
			wrong = append(wrong, fmt.Sprintf("the record has %d sizes, the sale %d", len(atDraw), len(stock)))
		}
	}
	for item, units := range stock {
		if want := wonWanted(units, entries[item], quantity); won[item] != want {
			off += abs(won[item] - want)
			wrong = append(wrong, fmt.Sprintf("item %d: %d of %d entries won, want %d (stock %d)", item, won[item], entries[item], want, units))
		}
	}
	if off == 0 {
		return nil
	}
	return []verify.Violation{{Invariant: invSizeWonStock, By: off, Detail: fmt.Sprint(wrong)}}
}

// wonBySize counts a ranking's winners and entries by size.
func wonBySize(ranking []draw.Ranked) (won, entries map[int64]int64) {
	won, entries = map[int64]int64{}, map[int64]int64{}
	for _, x := range ranking {
		entries[x.ItemID]++
		if x.Outcome == draw.Won {
			won[x.ItemID]++
		}
	}
	return won, entries
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// winnerRow is a drawn entry that won or was given an order, with that
// order as MySQL has it ("" and 0 when there is none).
type winnerRow struct {
	EntryID   string
	ItemID    int64
	UserID    string
	Outcome   string
	OrderNo   string
	Status    string
	OrderUser string
	OrderItem int64
}

// checkWinners judges the drawn entries that won or hold an order, and
// the live orders of the sale (live): every winner has one live order,
// its own (its buyer, its size); no alternate has one (no units came back
// within the run); and the sale has no live order but the winners'.
func checkWinners(rows []winnerRow, live int64) []verify.Violation {
	var out []verify.Violation
	var bad, alternates, winners int64
	example := ""
	for _, w := range rows {
		if w.Outcome != draw.Won {
			if w.OrderNo != "" {
				alternates++
			}
			continue
		}
		switch {
		case w.OrderNo == "":
			example = fmt.Sprintf("entry %s has no order", w.EntryID)
		case !order.Status(w.Status).Live():
			example = fmt.Sprintf("entry %s: order %s is %q in MySQL", w.EntryID, w.OrderNo, w.Status)
		case w.OrderUser != w.UserID || w.OrderItem != w.ItemID:
			example = fmt.Sprintf("entry %s (buyer %s, item %d): order %s is buyer %s's, item %d", w.EntryID, w.UserID, w.ItemID, w.OrderNo, w.OrderUser, w.OrderItem)
		default:
			winners++
			continue
		}
		bad++
	}
	if bad > 0 {
		out = append(out, verify.Violation{Invariant: invWinnerOneOrder, By: bad, Detail: fmt.Sprintf("%d winners without their live order, e.g. %s", bad, example)})
	}
	if extra := live - winners; alternates > 0 || extra > 0 {
		out = append(out, verify.Violation{Invariant: invOnlyWinners, By: alternates + max(extra, 0),
			Detail: fmt.Sprintf("%d alternates hold an order; the sale has %d live orders for %d winners holding theirs", alternates, live, winners)})
	}
	return out
}
