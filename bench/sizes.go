package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/stats"
	"github.com/seckill/seckill/bench/internal/verify"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// The sizes and drops scenarios sell sales of several items (a drop in
// sizes, issue 30), each twice: as flash does (stock that sells out, a new
// buyer per request) and as sustained does (stock that lasts), so their
// figures read as ratios to the one-item flash and sustained loads of the
// same run.

// bellStock splits total units over n sizes in a bell shape: the middle
// sizes hold the most, the ends the least, every size at least one unit
// (so total must be at least n). The parts add up to total.
func bellStock(total int64, n int) []int64 {
	w := make([]float64, n)
	var sum float64
	mid, spread := float64(n-1)/2, float64(n)/4
	for i := range w {
		z := (float64(i) - mid) / spread
		w[i] = math.Exp(-z * z / 2)
		sum += w[i]
	}
	out := make([]int64, n)
	left := total - int64(n) // one unit each first
	var given int64
	for i := range out {
		out[i] = 1 + int64(float64(left)*w[i]/sum)
		given += out[i]
	}
	// What rounding left over goes to the middle sizes, one unit each.
	for i := 0; given < total; i++ {
		out[popularity(n)[i%n]]++
		given++
	}
	return out
}

// popularity orders n sizes from the most wanted to the least: the middle
// size first, then outwards, the larger side of each pair first (as the
// common shoe sizes sit just above the middle of a run).
func popularity(n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	mid := float64(n-1) / 2
	sort.SliceStable(order, func(a, b int) bool {
		da, db := math.Abs(float64(order[a])-mid), math.Abs(float64(order[b])-mid)
		if da != db {
			return da < db
		}
		return order[a] > order[b]
	})
	return order
}

// sizeDemand is the share of buyers who pick each of n sizes: Zipf-like,
// the size of popularity rank r (from 1) wanted in proportion to 1/r^skew
// (skew 0: every size alike). The shares add up to 1.
func sizeDemand(n int, skew float64) []float64 {
	out := make([]float64, n)
	var sum float64
	for r, i := range popularity(n) {
		out[i] = 1 / math.Pow(float64(r+1), skew)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// chooser picks an index with the given shares from a uniform number in
// [0, 1).
type chooser struct{ cdf []float64 }

func newChooser(shares []float64) chooser {
	c := chooser{cdf: make([]float64, len(shares))}
	var acc float64
	for i, s := range shares {
		acc += s
		c.cdf[i] = acc
	}
	return c
}

func (c chooser) pick(u float64) int {
	x := u * c.cdf[len(c.cdf)-1]
	return min(sort.Search(len(c.cdf), func(i int) bool { return c.cdf[i] > x }), len(c.cdf)-1)
}

// sizeLabel names size i of a drop as a shoe size.
func sizeLabel(i int) string { return "EU " + strconv.Itoa(36+i) }

// newDrop creates sizes items holding stock in a bell shape over them, one
// activity selling them all running now (per-user limit quantity, stock
// split over buckets in every item, and the fields of extra over those),
// and warms it up. Each returned sale is one size, with the drop's
// activity and first item.
func (e *env) newDrop(ctx context.Context, name string, stock int64, quantity, buckets, sizes int, extra map[string]any) ([]sale, error) {
	out := make([]sale, sizes)
	items := make([]map[string]any, sizes)
	for i, units := range bellStock(stock, sizes) {
		var item struct {
			ItemID int64 `json:"item_id"`
		}
		if err := e.adminCall(ctx, http.MethodPost, "/admin/v1/items", map[string]any{
			"name": fmt.Sprintf("bench %s %s %s", name, sizeLabel(i), e.runID), "stock": units,
		}, &item, http.StatusCreated); err != nil {
			return nil, err
		}
		e.items = append(e.items, item.ItemID)
		out[i] = sale{item: item.ItemID, stock: units, quantity: quantity, label: sizeLabel(i)}
		items[i] = map[string]any{"item_id": item.ItemID, "label": sizeLabel(i)}
	}
	now := time.Now().UTC()
	var act struct {
		ActivityID int64 `json:"activity_id"`
	}
	body := map[string]any{
		"items": items, "starts_at": now.Add(-time.Minute), "ends_at": now.Add(3 * time.Hour), "per_user_limit": quantity,
		"stock_buckets": buckets,
	}
	for k, v := range extra {
		body[k] = v
	}
	if err := e.adminCall(ctx, http.MethodPost, "/admin/v1/activities", body, &act, http.StatusCreated); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].activity, out[i].tag = act.ActivityID, out[0].item
	}
	if err := e.adminCall(ctx, http.MethodPost, fmt.Sprintf("/admin/v1/activities/%d/warmup", act.ActivityID), nil, nil, http.StatusOK); err != nil {
		return nil, err
	}
	return out, nil
}

// sized runs one load over drops sales of sizes items each: every buyer
// (a new one per request) picks a drop at random and a size by
// sizeDemand. lasting says the stock is meant to last (sustained's
// shape: the run gets the pipeline's end-to-end figures); else it sells
// out, as flash. Every drop's stock is sh.stock, in a bell shape over its
// sizes.
func (e *env) sized(ctx context.Context, name string, sh shape, drops, sizes int, lasting bool) (*report.Run, error) {
	var all []sale // every size of every drop, drop by drop
	for d := range drops {
		s, err := e.newDrop(ctx, fmt.Sprintf("%s-%d", name, d), sh.stock, e.opts.quantity, e.opts.buckets, sizes, nil)
		if err != nil {
			return nil, err
		}
		all = append(all, s...)
	}
	var total int64
	items := make([]reservation.Item, len(all))
	bodies := make([][]byte, len(all))
	for i, s := range all {
		total += s.stock
		items[i] = s.stockItem()
		bodies[i], _ = json.Marshal(map[string]int64{"activity_id": s.activity, "item_id": s.item, "quantity": int64(s.quantity)})
	}
	expect := int64(sh.duration.Seconds() * 25000)
	if lasting {
		expect = min(int64(sh.duration.Seconds()*15000), total/int64(e.opts.quantity))
	}
	if sh.rate > 0 {
		expect = int64(sh.duration.Seconds()*sh.rate) + 1
	}
	base := userBase()
	tk, err := e.mintTokens(name, base, expect)
	if err != nil {
		return nil, err
	}
	b, err := e.newBuyers(e.apis, sh.connections, all[0].activity, e.opts.quantity, tk)
	if err != nil {
		return nil, err
	}
	b.bodies = bodies
	defer b.close()
	demand := newChooser(sizeDemand(sizes, e.opts.skew))
	rngs := make([]*rand.Rand, sh.connections)
	asked := make([][]int64, sh.connections) // requests per worker and item
	for w := range rngs {
		rngs[w] = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		asked[w] = make([]int64, len(all))
	}
	start := time.Now()
	var lag *lagSampler
	if lasting {
		lag = e.sampleLag(ctx, all, start)
	}
	prof := e.startProfiles(ctx, name, sh.duration)
	update, done := e.meter.track(name, sh.duration, 0)
	b.t0 = start
	stopCPU := e.measureCPU()
	res := load.Run(ctx, load.Config{Workers: sh.connections, Duration: sh.duration, Rate: sh.rate, Progress: update},
		func(ctx context.Context, w int, seq int64) load.Outcome {
			pick := rngs[w].IntN(drops)*sizes + demand.pick(rngs[w].Float64())
			asked[w][pick]++
			return b.placeItem(ctx, w, base+seq, "z"+strconv.FormatInt(seq, 36), pick)
		})
	done()
	loadEnd := time.Now()
	r := runResult(name, sh, sale{item: all[0].item, activity: all[0].activity, stock: total, quantity: e.opts.quantity}, res)
	r.CPU = stopCPU()
	r.Buyers = r.Requests
	r.Profiles = prof()
	var dbAtEnd int64
	if lasting {
		if dbAtEnd, err = e.stockLeft(context.WithoutCancel(ctx), all); err != nil {
			return r, err
		}
		e.meter.say("%s: load done, waiting for the pipeline to drain", name)
	}

	// Drain, read every size back and check it, and the sale's
	// one-live-order-per-buyer once per drop.
	ctx = context.WithoutCancel(ctx)
	took, drained, err := e.drain(ctx, items, e.opts.drainTimeout)
	var pl *report.Pipeline
	if lag != nil {
		pl = lag.stop()
	}
	if err != nil {
		return r, err
	}
	r.DrainSeconds = took.Seconds()
	if len(b.doers) > 1 {
		r.APIRequests = b.perAPI()
	}
	byItem := make([][]answer, len(all))
	for _, a := range b.collected() {
		if a.pick >= 0 {
			byItem[a.pick] = append(byItem[a.pick], a)
		}
	}
	r.Violations = []verify.Violation{}
	for d := range drops {
		obs := make([]verify.Observation, sizes)
		labels := make([]string, sizes)
		for k := range sizes {
			i := d*sizes + k
			var demand int64
			for w := range asked {
				demand += asked[w][i]
			}
			t, err := e.observe(ctx, all[i], byItem[i], errorCount(res), demand*int64(e.opts.quantity), drained)
			if err != nil {
				return r, err
			}
			obs[k] = t.obs
			labels[k] = fmt.Sprintf("drop %d item %d (%s)", d+1, all[i].item, all[i].label)
			addItem(r, t, k == 0)
		}
		r.Violations = append(r.Violations, verify.CheckItems(labels, obs)...)
	}
	if b.firstErr != nil && errorCount(res) > 0 {
		e.meter.say("%s: first transport error: %v", r.Name, b.firstErr)
	}
	if lasting {
		endToEnd := loadEnd.Sub(start) + took
		pl.OrdersPerSecond = stats.Rate(r.Created, endToEnd)
		pl.DuringLoad = stats.Rate(total-dbAtEnd, loadEnd.Sub(start))
		ids := make([]int64, len(all))
		for i, s := range all {
			ids[i] = s.item
		}
		if pl.PendingToCreated, pl.PendingToCreatedSeries, err = e.pendingToCreated(ctx, ids, start); err != nil {
			return r, err
		}
		r.Pipeline = pl
	}
	e.chart(r)
	return r, nil
}

// addItem adds one item's tally to the run of a sale of several items; the
// sale's extra live orders come with its first item (each item's tally
// carries the sale's count).
func addItem(r *report.Run, t tally, first bool) {
	r.Accepted += t.obs.Accepted
	r.Created += t.created
	r.Failed += t.failed
	r.UnitsSold += t.obs.LiveUnits
	r.DBStock += t.obs.DBStock
	r.RedisStock += t.obs.RedisStock
	if first {
		r.ExtraLive += t.obs.ExtraLiveOrders
	}
}

// stockLeft is the MySQL stock of every item of sales, summed.
func (e *env) stockLeft(ctx context.Context, sales []sale) (int64, error) {
	ids := make([]int64, len(sales))
	for i, s := range sales {
		ids[i] = s.item
	}
	var left int64
	if err := e.db.Gorm().WithContext(ctx).Raw("SELECT COALESCE(SUM(stock), 0) FROM item_stock WHERE item_id IN ?", ids).Scan(&left).Error; err != nil {
		return 0, fmt.Errorf("read stock left: %w", err)
	}
	return left, nil
}

// sizedPair runs a sized scenario as flash does and then as sustained
// does: name (a sell-out, shape name) and name+"-sustained" (stock that
// lasts, shape name+"-sustained").
func (e *env) sizedPair(ctx context.Context, name string, drops, sizes int) ([]*report.Run, error) {
	var runs []*report.Run
	r, err := e.sized(ctx, name, e.opts.shapeOf(name), drops, sizes, false)
	if r != nil {
		runs = append(runs, r)
	}
	if err != nil {
		return runs, err
	}
	r, err = e.sized(ctx, name+"-sustained", e.opts.shapeOf(name+"-sustained"), drops, sizes, true)
	if r != nil {
		runs = append(runs, r)
	}
	return runs, err
}
