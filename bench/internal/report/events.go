package report

import (
	"fmt"

	"github.com/seckill/seckill/bench/internal/stats"
)

// Events is the events scenario: the sustained load run with the order
// events off (SECKILL_OUTBOX=off), then with them on and one webhook
// endpoint registered (a receiver in the bench), and what that endpoint
// received of the second run's sale.
type Events struct {
	// Sustained is the sustained run of the same session (the outbox on,
	// no endpoint of the bench's), when there was one; Off and On are the
	// scenario's two runs. The names are for the JSON.
	Sustained    *Run   `json:"-"`
	Off          *Run   `json:"-"`
	On           *Run   `json:"-"`
	SustainedRun string `json:"sustained_run,omitempty"`
	OffRun       string `json:"off_run"`
	OnRun        string `json:"on_run"`
	// OffEvents is the events the outbox holds for the sale of the run
	// with the outbox off (0 when SECKILL_OUTBOX=off took); Committed the
	// events it holds for the sale of the run with it on, each of which
	// the endpoint should get.
	OffEvents int64 `json:"outbox_events_off"`
	Committed int64 `json:"outbox_events_on"`
	// Delivered is the distinct event ids of the sale the endpoint took,
	// Deliveries every delivery of them (Duplicates: one more time than
	// the first). Invalid counts deliveries whose signature did not
	// verify with the registration's secret (answered 400), Unreadable
	// those that verified but whose body was not an event; OtherSales the
	// deliveries of other sales' events (the endpoint hears every event
	// of the installation).
	Delivered  int64 `json:"delivered"`
	Deliveries int64 `json:"deliveries"`
	Duplicates int64 `json:"duplicates"`
	Invalid    int64 `json:"invalid_signatures"`
	Unreadable int64 `json:"unreadable"`
	OtherSales int64 `json:"deliveries_of_other_sales"`
	// CommitToDelivery is, per delivered event, its first delivery's
	// arrival at the receiver minus its timestamp (MySQL's clock at the
	// commit), over every delivered event of the sale.
	CommitToDelivery stats.Summary `json:"commit_to_delivery"`
	// LastAfterLoad is from the end of the load to the last first
	// delivery (-1: none); WaitLimit is how long the bench would wait
	// after the pipeline drained, and Waited how long it did.
	LastAfterLoad float64 `json:"last_delivery_after_load_s"`
	WaitLimit     float64 `json:"wait_limit_s"`
	Waited        float64 `json:"waited_s"`
	// EarlierBacklog is the events of the bench's earlier sales the relay
	// had not published when the scenario began (it waited for them);
	// OtherEndpoints the enabled endpoints besides the bench's registered
	// in the database when its run began (each also hears the sale's
	// events, so the run paid for more than one endpoint).
	EarlierBacklog int64 `json:"earlier_backlog"`
	OtherEndpoints int   `json:"other_endpoints"`
	// Pending is the deliveries of the sale's events to the endpoint
	// MySQL still had pending when the wait ended (webhook_deliveries).
	Pending int64 `json:"pending_in_mysql"`
}

// OrdersChange is the change of the end-to-end orders/s with the outbox
// on and one endpoint against the outbox off, in percent (ok false
// without both figures).
func (ev *Events) OrdersChange() (pct float64, ok bool) {
	if ev.Off == nil || ev.On == nil || ev.Off.Pipeline == nil || ev.On.Pipeline == nil || ev.Off.Pipeline.OrdersPerSecond == 0 {
		return 0, false
	}
	a, b := ev.Off.Pipeline.OrdersPerSecond, ev.On.Pipeline.OrdersPerSecond
	return (b - a) / a * 100, true
}

// Complete says every event the outbox holds for the sale reached the
// endpoint, with none invalid.
func (ev *Events) Complete() bool {
	return ev.Committed > 0 && ev.Delivered == ev.Committed && ev.Invalid == 0 && ev.Unreadable == 0
}

// eventsTables shows what the order events cost and how fast they arrived.
func eventsTables(p func(string, ...any), r *Report) {
	for _, ev := range r.Events {
		if ev.Off == nil || ev.On == nil {
			continue
		}
		p("### Cost of the order events (same run, same load)\n\n")
		p("Off: `SECKILL_OUTBOX=off`, no order events written. On: the outbox on (the relay to Kafka) and one webhook endpoint (`*`) registered before the sale: a receiver in the bench on loopback that verifies every signature.")
		if ev.Sustained != nil {
			p(" `%s` beside them: the outbox on, no endpoint of the bench's.", ev.SustainedRun)
		}
		p("\n\n| figure |")
		if ev.Sustained != nil {
			p(" %s |", ev.SustainedRun)
		}
		p(" %s | %s | change, on vs off |\n|---|", ev.OffRun, ev.OnRun)
		if ev.Sustained != nil {
			p("---:|")
		}
		p("---:|---:|---:|\n")
		row := func(figure string, get func(*Run) float64, format func(float64) string) {
			a, b := get(ev.Off), get(ev.On)
			change := "n/a"
			if a != 0 {
				change = fmt.Sprintf("%+.1f %%", (b-a)/a*100)
			}
			p("| %s |", figure)
			if ev.Sustained != nil {
				p(" %s |", format(get(ev.Sustained)))
			}
			p(" %s | %s | %s |\n", format(a), format(b), change)
		}
		pipe := func(f func(*Pipeline) float64) func(*Run) float64 {
			return func(r *Run) float64 {
				if r.Pipeline == nil {
					return 0
				}
				return f(r.Pipeline)
			}
		}
		row("orders/s end to end", pipe(func(pl *Pipeline) float64 { return pl.OrdersPerSecond }), num)
		row("orders/s during load", pipe(func(pl *Pipeline) float64 { return pl.DuringLoad }), num)
		row("req/s", func(r *Run) float64 { return r.Throughput }, num)
		row("202 P99 ms", func(r *Run) float64 { return r.AcceptedLatency.P99Ms }, ms)
		row("PENDING→CREATED P99 ms", pipe(func(pl *Pipeline) float64 { return pl.PendingToCreated.P99Ms }), ms)
		row("drain s", func(r *Run) float64 { return r.DrainSeconds }, func(v float64) string { return fmt.Sprintf("%.2f", v) })
		if pct, ok := ev.OrdersChange(); ok {
			p("\nOrders/s end to end with the events on: %+.1f %% on the run without them (goal: within 10 %%: %s).\n", pct, yesNo(pct >= -10))
		}
		p("\n### %s: deliveries to the endpoint\n\n", ev.OnRun)
		last := "–"
		if ev.LastAfterLoad >= 0 {
			last = fmt.Sprintf("%.2f", ev.LastAfterLoad)
		}
		c := ev.CommitToDelivery
		p("| events in the outbox (off / on) | delivered | duplicates | invalid signatures | commit→delivery P50 ms | P99 ms | max ms | load end → last delivery s | waited s (limit) | pending in MySQL | other sales' |\n")
		p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		p("| %d / %d | %d | %d | %d | %s | %s | %s | %s | %.1f (%.0f) | %d | %d |\n\n", ev.OffEvents, ev.Committed, ev.Delivered,
			ev.Duplicates, ev.Invalid, ms(c.P50Ms), ms(c.P99Ms), ms(c.MaxMs), last, ev.Waited, ev.WaitLimit, ev.Pending, ev.OtherSales)
		if ev.OtherEndpoints > 0 {
			p("%d other endpoint(s) were registered in the database and on: the run queued every event for them too.\n\n", ev.OtherEndpoints)
		}
		if ev.Unreadable > 0 {
			p("%d deliveries verified but did not read as an event.\n\n", ev.Unreadable)
		}
	}
}
