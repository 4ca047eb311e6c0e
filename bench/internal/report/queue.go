package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/seckill/seckill/bench/internal/stats"
)

// SalePageOf is the salepage run of the same session as the queue run q
// (the labels after the name, a topology's or tracing's, alike), or nil.
func (r *Report) SalePageOf(q *Run) *Run { return r.peer(q, "queue", "salepage") }

// PollsToPages is the queue run's polls/s as a ratio to the pages/s of
// the sale page in the same session (0 without one).
func (r *Report) PollsToPages(q *Run) (ratio, pages float64) {
	page := r.SalePageOf(q)
	if q.Queue == nil || page == nil {
		return 0, 0
	}
	return stats.Ratio(q.Queue.PollsPerSecond, page.Throughput), page.Throughput
}

// queueTables shows each queue run's figures: the crowd, the room, and
// the orders sent without an admission.
func queueTables(p func(string, ...any), r *Report) {
	for _, run := range r.Runs {
		q := run.Queue
		if q == nil {
			continue
		}
		p("### %s: a sale with a waiting room\n\n", run.Name)
		p("%d buyers, stock %d, %d admissions/s, per-user limit %d; %d connections.\n\n", q.Buyers, run.Stock, q.AdmitPerSecond,
			run.Quantity, run.Connections)
		p("| figure | result |\n|---|---|\n")
		late := ""
		if q.Late > 0 {
			late = fmt.Sprintf(", **%d joined after the start**", q.Late)
		}
		p("| joins | %s joins/s (%d in %.1f s, %d not WAITING%s); the sale started %.1f s after the last |\n",
			num(q.JoinsPerSecond), q.Buyers, q.JoinSeconds, q.JoinErrors, late, q.StartMargin)
		ratio, pages := r.PollsToPages(run)
		vs := "no salepage run to compare with"
		if pages > 0 {
			vs = fmt.Sprintf("%.2f× the sale page's %s pages/s of the same run", ratio, num(pages))
		}
		p("| polls | %s polls/s (%d in %.1f s, %d not 200), P50 %s ms, P99 %s ms; %s |\n",
			num(q.PollsPerSecond), q.Polls, q.PollSeconds, q.PollErrors, ms(q.PollLatency.P50Ms), ms(q.PollLatency.P99Ms), vs)
		if pages > 0 && q.PollsPerSecondFromStart > 0 {
			p("| polls before / from the start | %s / %s polls/s (%.2f× / %.2f× the pages/s); %d polls before the start |\n",
				num(q.PollsPerSecondBeforeStart), num(q.PollsPerSecondFromStart), stats.Ratio(q.PollsPerSecondBeforeStart, pages),
				stats.Ratio(q.PollsPerSecondFromStart, pages), q.PollsBeforeStart)
		}
		p("| admitted / ordered | %d told ADMITTED, %d orders accepted with their admission |\n", q.Admitted, q.Ordered)
		p("| starts_at → sold out | %s in Redis (stock 0); %s until every waiter was told SOLD_OUT (%d of %d) |\n",
			seconds(q.SoldOutAfter), seconds(q.AllToldAfter), q.ToldSoldOut, q.Waiters)
		p("| admissions outstanding vs units left | most held − left %+d (must be ≤ 0), most held %d, in %d samples %d ms apart |\n",
			q.MaxHeldOverLeft, q.MaxHeld, q.Samples, q.SampleMs)
		p("| Redis scripts (EVALSHA, an upper bound: anything else on this Redis counts too) | %.2f a join; polls before the start %d; from the start %d (%.2f a buyer) |\n\n",
			q.ScriptsPerJoin, q.ScriptsBeforeStart, q.ScriptsFromStart, float64(q.ScriptsFromStart)/float64(max(q.Buyers, 1)))
		if len(q.Probes) > 0 {
			p("| order sent | want | sent | answers | as wanted |\n|---|---|---:|---|---:|\n")
			for _, pr := range q.Probes {
				p("| %s | %s | %d | %s | %d |\n", pr.Kind, pr.Want, pr.Sent, Answers(pr.Got), pr.Correct)
			}
			p("\n")
		}
	}
}

func seconds(v float64) string {
	if v < 0 {
		return "not within the run"
	}
	return fmt.Sprintf("%.2f s", v)
}

// Answers lists answer counts, most first.
func Answers(got map[string]int64) string {
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return got[keys[i]] > got[keys[j]] || (got[keys[i]] == got[keys[j]] && keys[i] < keys[j])
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, got[k])
	}
	return strings.Join(parts, ", ")
}
