package reconcile

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Verdict is the outcome for one item.
type Verdict string

// The verdicts. Problem tells which ones make the run exit 1.
const (
	// OK: the stores agree.
	OK Verdict = "ok"
	// NotStarted: the stock key is missing and no activity of the item has
	// started; warmup has not run yet.
	NotStarted Verdict = "not started"
	// Drift: two reads in a row showed the same disagreement.
	Drift Verdict = "drift"
	// NotWarmed: the stock key is missing although a sale started (Redis
	// lost its data, or nobody warmed the item).
	NotWarmed Verdict = "not warmed"
	// Unsettled: every read disagreed, but not twice in a row the same way.
	Unsettled Verdict = "unsettled"
	// Repaired: drift (or missing idempotency records) was found and every
	// part of it was repaired.
	Repaired Verdict = "repaired"
	// Retry: a repair did not apply (the keys changed concurrently, or a
	// later reconciler's fence refused it); run again.
	Retry Verdict = "retry"
	// Unchecked: the item's check or repair failed (ItemReport.Error says
	// where and why); the run went on with the other items, and the next
	// run tries it again. Its figures are those of its last read, if any.
	Unchecked Verdict = "unchecked"
)

// Problem reports whether the verdict leaves the stores disagreeing.
func (v Verdict) Problem() bool {
	switch v {
	case Drift, NotWarmed, Unsettled, Retry, Unchecked:
		return true
	}
	return false
}

// Report is the outcome of one run.
type Report struct {
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Repair is true when repairs were asked for.
	Repair bool `json:"repair"`
	// Fence is the fencing token of the run's lock.
	Fence int64        `json:"fence,omitempty"`
	Items []ItemReport `json:"items"`
}

// ItemReport is one item's line.
type ItemReport struct {
	ItemID     int64            `json:"item_id"`
	Activities []ActivityReport `json:"activities"`
	MySQLStock int64            `json:"mysql_stock"`
	// RedisStock is null when the stock key is missing.
	RedisStock *int64 `json:"redis_stock"`
	// InFlight is the units out of Redis stock that MySQL still counts as
	// its own; Detail breaks it down.
	InFlight int64          `json:"in_flight"`
	Detail   InFlightDetail `json:"in_flight_detail"`
	// Drift = Redis stock + InFlight - MySQL stock.
	Drift int64 `json:"drift"`
	// Reads is how many times the item was read in this run.
	Reads    int      `json:"reads"`
	Verdict  Verdict  `json:"verdict"`
	Problems []string `json:"problems,omitempty"`
	Repairs  []string `json:"repairs,omitempty"`
	// Error is why the item is Unchecked: the step that failed and the
	// store's error.
	Error string `json:"error,omitempty"`
	err   error  // Error's error
	// IdemRestored is how many idempotency records of orders MySQL holds
	// the repair wrote back (Redis had lost them).
	IdemRestored int `json:"idempotency_restored,omitempty"`
	// ReservationsRestored is how many reservation hashes of CREATED
	// orders MySQL holds the repair wrote back (Redis had lost them).
	ReservationsRestored int `json:"reservations_restored,omitempty"`
}

// InFlightDetail is how InFlight was computed:
// in_flight = inflight_counter - committed + closing + restocking + moving
// = undecided + releasing + closing + restocking + moving.
type InFlightDetail struct {
	// Inflight is Redis's counter: RESERVED and CLAIMED quantities.
	Inflight int64 `json:"inflight_counter"`
	// Undecided: reservations MySQL has no order for yet.
	Undecided int64 `json:"undecided"`
	// Committed: pending reservations whose order MySQL committed live
	// (not in flight: MySQL already took the units).
	Committed int64 `json:"committed"`
	// Releasing: pending reservations whose order MySQL refused or closed;
	// their release gives the units back to Redis stock.
	Releasing int64 `json:"releasing"`
	// Closing: confirmed reservations of orders MySQL closed, not yet
	// released in Redis.
	Closing int64 `json:"closing"`
	// Restocking: units of restocks MySQL has and Redis stock not yet
	// (the restock's Redis step follows, or the repair finishes it).
	Restocking int64 `json:"restocking"`
	// Moving: units of a bucketed item between a bucket and the in-flight
	// counter (a take not yet reserved, a release not yet given back).
	Moving int64 `json:"moving"`
	// Pending is the number of pending order numbers.
	Pending int `json:"pending_orders"`
}

// ActivityReport is the quota check of one activity of the item.
type ActivityReport struct {
	ActivityID int64 `json:"activity_id"`
	// QuotaChecked is false for an activity that ended more than the
	// window ago (its quota keys have expired by design).
	QuotaChecked bool `json:"quota_checked"`
	LiveOrders   int  `json:"live_orders"`
	// QuotaMissing: users with a live order whose quota key is missing or
	// holds another, stale, order number (Holder).
	QuotaMissing []QuotaIssue `json:"quota_missing"`
	// QuotaStale: quota keys whose order (Holder) is neither live in MySQL
	// nor RESERVED/CLAIMED in Redis.
	QuotaStale []QuotaIssue `json:"quota_stale"`
	// QuotaMissingCount and QuotaStaleCount count the issues of each kind;
	// the lists above show the first MaxListed of them.
	QuotaMissingCount int `json:"quota_missing_count"`
	QuotaStaleCount   int `json:"quota_stale_count"`
}

// QuotaIssue is one user's quota problem.
type QuotaIssue struct {
	UserID string `json:"user_id"`
	// OrderNo is the user's live order ("" for a stale key).
	OrderNo string `json:"order_no,omitempty"`
	// Holder is what the key holds ("" when it is missing).
	Holder string `json:"holder,omitempty"`
}

// ExitCode is 1 when an item's stores still disagree, else 0.
func (r Report) ExitCode() int {
	for _, it := range r.Items {
		if it.Verdict.Problem() {
			return 1
		}
	}
	return 0
}

// UncheckedItems returns the lines of the items whose check or repair
// failed.
func (r Report) UncheckedItems() []ItemReport {
	var out []ItemReport
	for _, it := range r.Items {
		if it.Verdict == Unchecked {
			out = append(out, it)
		}
	}
	return out
}

// Count returns how many items have each verdict.
func (r Report) Count() map[Verdict]int {
	out := map[Verdict]int{}
	for _, it := range r.Items {
		out[it.Verdict]++
	}
	return out
}

// Summary is one line: how many items, and how many of each verdict.
func (r Report) Summary() string {
	counts := r.Count()
	parts := []string{}
	for _, v := range []Verdict{OK, NotStarted, Repaired, Drift, NotWarmed, Unsettled, Retry, Unchecked} {
		if n := counts[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	s := fmt.Sprintf("%d items checked", len(r.Items))
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	return s
}

// WriteJSON writes the report as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Report
		ExitCode int `json:"exit_code"`
	}{r, r.ExitCode()})
}

// WriteTable writes the report as a table, one row per item and activity,
// then the problems and repairs of each item and a summary line.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\tACTIVITY\tMYSQL\tREDIS\tIN FLIGHT\tDRIFT\tQUOTA MISSING\tQUOTA STALE\tVERDICT")
	for _, it := range r.Items {
		redis, mysql := "-", strconv.FormatInt(it.MySQLStock, 10)
		if it.RedisStock != nil {
			redis = strconv.FormatInt(*it.RedisStock, 10)
		}
		if it.Reads == 0 {
			mysql = "-" // unchecked before its first read
		}
		acts := it.Activities
		if len(acts) == 0 {
			acts = []ActivityReport{{}}
		}
		for _, a := range acts {
			act, missing, stale := "-", "-", "-"
			if a.ActivityID != 0 {
				act = strconv.FormatInt(a.ActivityID, 10)
			}
			if a.QuotaChecked {
				missing, stale = strconv.Itoa(a.QuotaMissingCount), strconv.Itoa(a.QuotaStaleCount)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", it.ItemID, act, mysql, redis,
				it.InFlight, signed(it.Drift), missing, stale, it.Verdict)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, it := range r.Items {
		for _, p := range it.Problems {
			fmt.Fprintf(w, "item %d: %s\n", it.ItemID, p)
		}
		for _, p := range it.Repairs {
			fmt.Fprintf(w, "item %d: %s\n", it.ItemID, p)
		}
		if it.Error != "" {
			fmt.Fprintf(w, "item %d: unchecked: %s\n", it.ItemID, it.Error)
		}
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

func signed(n int64) string {
	if n > 0 {
		return "+" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}

// logAttrs are the attributes of the item's log lines.
func (it *ItemReport) logAttrs() []any {
	attrs := []any{"item_id", it.ItemID, "verdict", string(it.Verdict), "mysql_stock", it.MySQLStock,
		"redis_warmed", it.RedisStock != nil, "in_flight", it.InFlight, "drift", it.Drift}
	if it.RedisStock != nil {
		attrs = append(attrs, "redis_stock", *it.RedisStock)
	}
	missing, stale := 0, 0
	var acts []int64
	for _, a := range it.Activities {
		acts = append(acts, a.ActivityID)
		missing += a.QuotaMissingCount
		stale += a.QuotaStaleCount
	}
	attrs = append(attrs, "activity_ids", acts, "quota_missing", missing, "quota_stale", stale)
	if len(it.Problems) > 0 {
		attrs = append(attrs, "problems", it.Problems)
	}
	if it.Error != "" {
		attrs = append(attrs, "error", it.Error)
	}
	return attrs
}
