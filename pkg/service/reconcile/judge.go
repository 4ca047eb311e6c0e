package reconcile

import (
	"fmt"
	"slices"
	"time"
)

// settled reports whether the reads of an item need no further read: the
// last one agrees, or the last two agree on the same mismatch (stock) and
// there were at least two (quota: issues count when two reads show them).
func settled(t Target, rs []reading, now time.Time) bool {
	last := rs[len(rs)-1]
	if !last.mismatch(t, now) {
		return true
	}
	if len(rs) < 2 {
		return false
	}
	prev := rs[len(rs)-2]
	return !last.stockMismatch(t, now) || last.stockKey() == prev.stockKey()
}

// finish builds the report's items from the reads, and from the errors of
// the items that failed (Unchecked, with what their last read showed, if
// any).
func (c *Checker) finish(rep Report, targets []Target, reads [][]reading, failed []error) Report {
	now := c.now()
	rep.Items = rep.Items[:0]
	for i, t := range targets {
		var it ItemReport
		switch {
		case len(reads[i]) > 0:
			it = c.judge(t, reads[i], now)
		case failed[i] != nil:
			it = ItemReport{ItemID: t.ItemID, Activities: make([]ActivityReport, 0, len(t.Activities))}
			for _, a := range t.Activities {
				it.Activities = append(it.Activities, ActivityReport{ActivityID: a.ID})
			}
		default:
			continue
		}
		if failed[i] != nil {
			it.Verdict, it.Error, it.err = Unchecked, failed[i].Error(), failed[i]
		}
		rep.Items = append(rep.Items, it)
	}
	return rep
}

// judge turns an item's reads into its report line.
func (c *Checker) judge(t Target, rs []reading, now time.Time) ItemReport {
	last := rs[len(rs)-1]
	it := last.report(t)
	it.Reads = len(rs)
	var prev *reading
	if len(rs) >= 2 {
		prev = &rs[len(rs)-2]
	}

	// Quota issues count when the last two reads both show them.
	quotaDrift := false
	for j := range it.Activities {
		ar := &it.Activities[j]
		q, ok := last.quotas[ar.ActivityID]
		if !ok {
			continue
		}
		if prev == nil {
			ar.QuotaMissing, ar.QuotaStale = []QuotaIssue{}, []QuotaIssue{}
		} else {
			pq := prev.quotas[ar.ActivityID]
			ar.QuotaMissing = intersect(q.missing, pq.missing)
			ar.QuotaStale = intersect(q.stale, pq.stale)
			ar.QuotaMissingCount = seenTwice(len(ar.QuotaMissing), q.missingN, len(q.missing), pq.missingN, len(pq.missing))
			ar.QuotaStaleCount = seenTwice(len(ar.QuotaStale), q.staleN, len(q.stale), pq.staleN, len(pq.stale))
		}
		if n := ar.QuotaMissingCount; n > 0 {
			quotaDrift = true
			it.Problems = append(it.Problems, fmt.Sprintf("activity %d: %s with a live order but no quota key holding it",
				ar.ActivityID, plural(n, "user", "users")))
		}
		if n := ar.QuotaStaleCount; n > 0 {
			quotaDrift = true
			it.Problems = append(it.Problems, fmt.Sprintf("activity %d: %s holding an order that is neither live nor on its way",
				ar.ActivityID, plural(n, "stale quota key", "stale quota keys")))
		}
	}

	switch {
	case last.stock.view.BothLayouts:
		v := last.stock.view
		it.Verdict = Drift
		it.Problems = append(it.Problems, fmt.Sprintf("the item has both one stock key (holding %d) and %d stock buckets (holding %d) in Redis: its layout changed while the old keys lived; the check counts the buckets, as the marker says. Delete the keys of the layout its sale does not use, then repair",
			v.SingleStock, len(v.Buckets), v.Stock))
	case !last.stock.view.Warmed && !started(t, now):
		it.Verdict = NotStarted
	case !last.stockMismatch(t, now):
		it.Verdict = OK
	case prev == nil || prev.stockKey() != last.stockKey():
		it.Verdict = Unsettled
		it.Problems = append(it.Problems, fmt.Sprintf("stock drift %+d, but it changed between reads (%d reads)", it.Drift, len(rs)))
	case !last.stock.view.Warmed:
		it.Verdict = NotWarmed
		it.Problems = append(it.Problems, fmt.Sprintf("stock key missing in Redis; MySQL has %d, %d in flight", it.MySQLStock, it.InFlight))
	default:
		it.Verdict = Drift
		it.Problems = append(it.Problems, fmt.Sprintf("stock drift %+d: Redis %d + in flight %d != MySQL %d",
			it.Drift, last.stock.view.Stock, it.InFlight, it.MySQLStock))
	}
	if quotaDrift && (it.Verdict == OK || it.Verdict == NotStarted) {
		it.Verdict = Drift
	}
	return it
}

// seenTwice counts the issues of one kind that two reads showed: both
// listed, the listed ones they share (both exact); else at least those,
// and at most the smaller count.
func seenTwice(shared, n, listed, prevN, prevListed int) int {
	if n > listed && prevN > prevListed {
		return max(shared, min(n, prevN))
	}
	return shared
}

// intersect keeps the issues of a that b has too.
func intersect(a, b []QuotaIssue) []QuotaIssue {
	out := []QuotaIssue{}
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
