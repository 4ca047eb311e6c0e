package report

import (
	"fmt"
	"strings"

	"github.com/seckill/seckill/bench/internal/stats"
)

// Draw is a draw sale under a crowd of entrants: the entries before the
// close, the draw after it, the winners' orders, and what the published
// record and MySQL said of them.
type Draw struct {
	Entrants int64 `json:"entrants"`
	Sizes    int   `json:"sizes"`
	Units    int64 `json:"units"`
	// WindowSeconds is from the start of the entries to
	// entries_close_at; CloseMargin from the last entry's answer to the
	// close (about 0 or below when the window, not the crowd, ended the
	// entries).
	WindowSeconds float64 `json:"window_s"`
	CloseMargin   float64 `json:"close_margin_s"`
	// EntriesPerSecond is the new entries (201) over the entry phase;
	// EntryLatency every entry request's latency. Late counts entries
	// refused because the list had closed (in flight at the close),
	// EntryErrors any other answer than a 201 ENTERED.
	EntrySeconds     float64       `json:"entry_s"`
	EntriesAccepted  int64         `json:"entries_accepted"`
	EntriesPerSecond float64       `json:"entries_per_s"`
	EntryLatency     stats.Summary `json:"entry_latency"`
	Late             int64         `json:"entries_after_close"`
	EntryErrors      int64         `json:"entry_errors"`
	// The fixed-rate phase, before the entries above: RateTarget entries/s
	// offered (open model) for RateSeconds; RateSent were sent, RateDropped
	// due but never sent in time; RateLatency every one's latency, from
	// when it was due. Zero RateTarget: no such phase.
	RateTarget  float64       `json:"rate_target_per_s,omitempty"`
	RateSeconds float64       `json:"rate_s,omitempty"`
	RateSent    int64         `json:"rate_sent,omitempty"`
	RateDropped int64         `json:"rate_dropped,omitempty"`
	RateLatency stats.Summary `json:"rate_latency,omitzero"`
	// RateAPIView is the api's own view of the phase: its 201s, and the
	// Redis step (Reserve) and Kafka's acknowledgement (Publish) each
	// entry waited for (nil: the apis were not started by the bench).
	RateAPIView *APIView `json:"rate_api_view,omitempty"`
	// ReEntries were sent once more, after the winners' orders, by buyers
	// who had entered; ReEntrySame of them were answered 200 with the
	// buyer's entry.
	ReEntries   int64 `json:"re_entries"`
	ReEntrySame int64 `json:"re_entries_same_entry"`
	// From entries_close_at: the drawer pass that ran the draw began
	// (drawn_at), the bench first read the draw DRAWN in MySQL (polled
	// every PollMs), the first winner's order was reserved and the last
	// one CREATED (orders.reserved_at, orders.created_at). -1: not
	// within the run.
	PollMs             int     `json:"poll_ms"`
	PassAfter          float64 `json:"draw_pass_after_close_s"`
	DrawnAfter         float64 `json:"drawn_after_close_s"`
	FirstReservedAfter float64 `json:"first_winner_reserved_after_close_s"`
	AllCreatedAfter    float64 `json:"all_winners_created_after_close_s"`
	// Winners is the record's WON entries, WinnerOrders those whose order
	// is CREATED (or PAID) in MySQL; WinnerOrdersPerSecond is Winners
	// over DRAWN (read, or the first reservation if earlier) → last
	// CREATED.
	Winners               int64   `json:"winners"`
	WinnerOrders          int64   `json:"winners_with_orders"`
	WinnerOrdersPerSecond float64 `json:"winners_orders_per_s"`
	// The published record: its size and how long the first GET took,
	// its entries, and draw.Verify's verdict ("" when it holds) and time.
	RecordBytes   int64   `json:"record_bytes"`
	RecordSeconds float64 `json:"record_get_s"`
	RecordEntries int64   `json:"record_entries"`
	VerifySeconds float64 `json:"verify_s"`
	VerifyError   string  `json:"verify_error,omitempty"`
	// PerSize is each size's stock, entries, winners and orders.
	PerSize []DrawSize `json:"sizes_detail"`
}

// DrawSize is one size of a draw sale.
type DrawSize struct {
	Label   string `json:"label"`
	ItemID  int64  `json:"item_id"`
	Stock   int64  `json:"stock"`
	Entries int64  `json:"entries"`
	Won     int64  `json:"won"`
	Orders  int64  `json:"orders_created"`
}

// peer is the run named other whose labels after the name (a topology's
// or tracing's) are run's, whose name starts with own; nil if none.
func (r *Report) peer(run *Run, own, other string) *Run {
	rest, ok := strings.CutPrefix(run.Name, own)
	if !ok {
		return nil
	}
	for _, x := range r.Runs {
		if x.Name == other+rest {
			return x
		}
	}
	return nil
}

// drawTables shows each draw run's figures: the entries against the
// one-item loads of the same run, the draw, the winners' orders, the
// record and each size.
func drawTables(p func(string, ...any), r *Report) {
	for _, run := range r.Runs {
		d := run.Draw
		if d == nil {
			continue
		}
		p("### %s: a draw sale\n\n", run.Name)
		p("Up to %d entrants over %d connections for a window of %.1f s; %d sizes holding %d units.\n\n",
			d.Entrants, run.Connections, d.WindowSeconds, d.Sizes, d.Units)
		p("| figure | result |\n|---|---|\n")
		var vs []string
		if f := r.peer(run, "draw", "flash"); f != nil && f.Throughput > 0 {
			vs = append(vs, fmt.Sprintf("%.2f× flash's %s req/s", stats.Ratio(d.EntriesPerSecond, f.Throughput), num(f.Throughput)))
		}
		if ref := r.Reference; ref != nil && ref.MySQLPerSecond > 0 {
			vs = append(vs, fmt.Sprintf("%.2f× the raw MySQL insert + hot-row update's %s tx/s", stats.Ratio(d.EntriesPerSecond, ref.MySQLPerSecond),
				num(ref.MySQLPerSecond)))
		}
		if s := r.peer(run, "draw", "salepage"); s != nil && s.Throughput > 0 {
			vs = append(vs, fmt.Sprintf("%.2f× the sale page's %s pages/s", stats.Ratio(d.EntriesPerSecond, s.Throughput), num(s.Throughput)))
		}
		against := "no one-item load in this run to compare with"
		if len(vs) > 0 {
			against = strings.Join(vs, "; ") + ", same run"
		}
		l := d.EntryLatency
		p("| entries | **%s entries/s** (%d accepted in %.1f s), P50 %s ms, P90 %s ms, P99 %s ms, P99.9 %s ms, max %s ms; %d refused at the close, %d other answers |\n",
			num(d.EntriesPerSecond), d.EntriesAccepted, d.EntrySeconds, ms(l.P50Ms), ms(l.P90Ms), ms(l.P99Ms), ms(l.P999Ms), ms(l.MaxMs), d.Late, d.EntryErrors)
		p("| entries vs one-item loads | %s |\n", against)
		if d.RateTarget > 0 {
			r := d.RateLatency
			p("| entries at a fixed %s/s | %d sent over %.1f s (%d due and not sent in time), P50 %s ms, P90 %s ms, **P99 %s ms**, P99.9 %s ms, max %s ms |\n",
				num(d.RateTarget), d.RateSent, d.RateSeconds, d.RateDropped, ms(r.P50Ms), ms(r.P90Ms), ms(r.P99Ms), ms(r.P999Ms), ms(r.MaxMs))
			if v := d.RateAPIView; v != nil && v.Accepted.Count > 0 {
				p("| the api's own view of them | %d answered 201, P99 ≈ %s ms (%.1f %% within 25 ms); the Redis step P99 ≈ %s ms; Kafka's acknowledgement P99 ≈ %s ms (%.1f %% within 5 ms, %.1f %% within 25 ms) |\n",
					v.Accepted.Count, ms(v.Accepted.P99Ms), 100*v.Accepted.Within25, ms(v.Reserve.P99Ms), ms(v.Publish.P99Ms), 100*v.Publish.Within5, 100*v.Publish.Within25)
			}
		}
		p("| entering again, after the draw | %d of %d answered 200 with the buyer's entry |\n", d.ReEntrySame, d.ReEntries)
		ended := "the window ended the entries"
		if d.CloseMargin > 0.05 {
			ended = fmt.Sprintf("every entrant was in %.1f s before the close", d.CloseMargin)
		}
		p("| entries_close_at | %s |\n", ended)
		p("| close → draw | the drawer's pass began %s after the close, the draw was DRAWN %s after it (read every %d ms) |\n",
			seconds(d.PassAfter), seconds(d.DrawnAfter), d.PollMs)
		p("| close → winners' orders | first reserved %s after the close, every one CREATED %s after it: %d of %d winners, **%s orders/s** from DRAWN |\n",
			seconds(d.FirstReservedAfter), seconds(d.AllCreatedAfter), d.WinnerOrders, d.Winners, num(d.WinnerOrdersPerSecond))
		verdict := "holds"
		if d.VerifyError != "" {
			verdict = "**does not hold**: " + d.VerifyError
		}
		p("| the record | %d entries, %.1f MB, first GET %.2f s; draw.Verify %s (%.2f s) |\n\n",
			d.RecordEntries, float64(d.RecordBytes)/1e6, d.RecordSeconds, verdict, d.VerifySeconds)
		if len(d.PerSize) > 0 {
			p("| size | item | stock | entries | won | orders created |\n|---|---:|---:|---:|---:|---:|\n")
			for _, s := range d.PerSize {
				p("| %s | %d | %d | %d | %d | %d |\n", s.Label, s.ItemID, s.Stock, s.Entries, s.Won, s.Orders)
			}
			p("\n")
		}
	}
}
