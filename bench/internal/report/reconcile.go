package report

import (
	"fmt"
	"strings"
)

// Reconcile is the reconcile scenario: the reconciler program run against
// a sale of many settled orders built straight into a MySQL database and a
// redis-server of the bench's own.
type Reconcile struct {
	Orders     int64 `json:"orders"`
	Buyers     int64 `json:"buyers"`
	Stock      int64 `json:"initial_stock"`
	ItemID     int64 `json:"item_id"`
	ActivityID int64 `json:"activity_id"`
	// RollbackOrders is the orders placed after the copy of Redis was
	// taken and before Redis came back from it (beside Orders).
	RollbackOrders int64 `json:"rollback_orders"`
	// Paid is how many of all the orders are PAID; the others are CREATED.
	Paid int64 `json:"paid_orders"`
	// Database and RedisAddr are where the sale was built.
	Database  string `json:"mysql_database"`
	RedisAddr string `json:"redis_addr"`
	// BuildSeconds is the time to build the sale in both stores
	// (warm-up, reserve and confirm scripts, multi-row INSERTs).
	BuildSeconds float64 `json:"build_s"`
	// RedisKeys and RedisMemoryMiB are the private Redis's DBSIZE and
	// used_memory after the build.
	RedisKeys      int64           `json:"redis_keys"`
	RedisMemoryMiB float64         `json:"redis_used_memory_mib"`
	Steps          []ReconcileStep `json:"steps"`
	// The item's stock at the end, after every step: MySQL's, Redis's
	// and Redis's in flight.
	FinalMySQLStock int64 `json:"final_mysql_stock"`
	FinalRedisStock int64 `json:"final_redis_stock"`
	FinalInflight   int64 `json:"final_in_flight"`
	// Completed says every step ran (the final figures are read).
	Completed bool `json:"completed"`
}

// ReconcileStep is one run of the reconciler, after what was done to the
// stores before it.
type ReconcileStep struct {
	Name string `json:"name"`
	// Before is what the bench did to the stores first, and how long it
	// took (0 when nothing).
	Before        string  `json:"before,omitempty"`
	BeforeSeconds float64 `json:"before_s,omitempty"`
	Args          string  `json:"args"`
	ExitCode      int     `json:"exit_code"`
	WantExit      int     `json:"want_exit_code"`
	Seconds       float64 `json:"took_s"`
	MaxRSSMiB     float64 `json:"max_rss_mib"`
	// Summary is the last line of the reconciler's standard output;
	// StderrTail the end of its standard error when it did not exit as
	// wanted. Stdout and Stderr name its files in the results folder.
	Summary    string `json:"summary"`
	StderrTail string `json:"stderr_tail,omitempty"`
	Stdout     string `json:"stdout_file"`
	Stderr     string `json:"stderr_file"`
}

// OK reports whether the step exited as wanted.
func (s ReconcileStep) OK() bool { return s.ExitCode == s.WantExit }

// Step returns the step named name, or nil.
func (r *Reconcile) Step(name string) *ReconcileStep {
	for i := range r.Steps {
		if r.Steps[i].Name == name {
			return &r.Steps[i]
		}
	}
	return nil
}

// reconcileTables writes one table per reconcile scenario run.
func reconcileTables(p func(string, ...any), r *Report) {
	for _, rc := range r.Reconcile {
		p("### reconcile: %d orders of one item (the reconciler program, its own process)\n\n", rc.Orders)
		p("Built straight into MySQL database `%s` and a private redis-server (%s) in %.1f s: item %d, activity %d, stock %d, %d buyers, %d orders (every fifth PAID, the rest CREATED); Redis holds %d keys, %.0f MiB.\n\n",
			rc.Database, rc.RedisAddr, rc.BuildSeconds, rc.ItemID, rc.ActivityID, rc.Stock, rc.Buyers, rc.Orders, rc.RedisKeys, rc.RedisMemoryMiB)
		if rc.RollbackOrders > 0 {
			p("The rollback step places %d more orders (new buyers) after the copy of Redis is taken; the steps after it see %d orders.\n\n",
				rc.RollbackOrders, rc.Orders+rc.RollbackOrders)
		}
		p("| step | before it | reconciler | exit (want) | took s | max RSS MiB | last line |\n|---|---|---|---:|---:|---:|---|\n")
		for _, s := range rc.Steps {
			before := "—"
			if s.Before != "" {
				before = fmt.Sprintf("%s (%.1f s)", s.Before, s.BeforeSeconds)
			}
			exit := fmt.Sprintf("%d (%d)", s.ExitCode, s.WantExit)
			if !s.OK() {
				exit = "**" + exit + "**"
			}
			p("| %s | %s | `%s` | %s | %.2f | %.0f | %s |\n", s.Name, before, s.Args, exit, s.Seconds, s.MaxRSSMiB, cell(s.Summary))
		}
		if rc.Completed {
			p("\nAt the end: MySQL stock %d, Redis stock %d, in flight %d.\n\n", rc.FinalMySQLStock, rc.FinalRedisStock, rc.FinalInflight)
		} else {
			p("\nThe scenario stopped before its last step.\n\n")
		}
		for _, s := range rc.Steps {
			if !s.OK() && s.StderrTail != "" {
				p("%s: exit %d, the end of its stderr:\n\n```\n%s\n```\n\n", s.Name, s.ExitCode, strings.TrimRight(s.StderrTail, "\n"))
			}
		}
	}
}

// cell makes s safe inside a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "|", `\|`)
	if s == "" {
		return "—"
	}
	return s
}
