// Package verify checks the pipeline's invariants after a run, from what
// the bench itself read back from MySQL and Redis and what the API answered.
// It is pure: the scenarios gather an Observation, Check judges it.
package verify

import (
	"fmt"
	"sort"
	"time"
)

// Observation is what one scenario saw once the pipeline had drained.
type Observation struct {
	// InitialStock is the item's stock when the sale began (units).
	InitialStock int64
	// DBStock is item_stock.stock in MySQL now.
	DBStock int64
	// RedisWarmed says whether Redis still has the stock key; RedisStock
	// and Inflight are its stock and in-flight units.
	RedisWarmed bool
	RedisStock  int64
	Inflight    int64
	// LiveUnits and LiveOrders sum the item's CREATED and PAID orders.
	LiveUnits  int64
	LiveOrders int64
	// ExtraLiveOrders is, over users holding more than one live order in
	// the activity, the number of orders beyond the first; UsersOverLimit
	// is how many such users there are.
	ExtraLiveOrders int64
	UsersOverLimit  int64
	// Accepted is the number of distinct order numbers answered 202.
	Accepted int64
	// Unresolved lists accepted order numbers that are neither CREATED (or
	// later) in MySQL nor FAILED (in MySQL or released in Redis).
	Unresolved []string
	// ReplayMismatches counts idempotency keys whose repeated requests were
	// answered with different order numbers, or refused after a 202.
	ReplayMismatches int64
	// ReplayChecked counts idempotency keys sent more than once.
	ReplayChecked int64
	// Unacknowledged counts live orders whose number the API never
	// answered with 202.
	Unacknowledged int64
	// Errors counts requests that got a 5xx or no answer: faults. With
	// faults, an order may exist that the client never heard of, and fewer
	// orders than stock is no violation.
	Errors int64
	// DemandUnits is the most units the buyers could have bought (distinct
	// buyers times the per-user limit, bounded by what they asked for).
	DemandUnits int64
	// Quantity is the units of every order (default 1): a sold-out sale
	// leaves less than one order's worth of stock.
	Quantity int64
	// Drained says whether the pipeline emptied (no in-flight units)
	// before the bench gave up waiting.
	Drained bool
}

// Violation is one broken invariant.
type Violation struct {
	Invariant string `json:"invariant"`
	// By is how far off it is, in the invariant's unit.
	By     int64  `json:"by"`
	Detail string `json:"detail"`
}

func (v Violation) String() string {
	return fmt.Sprintf("%s (off by %d): %s", v.Invariant, v.By, v.Detail)
}

// The invariants, by name.
const (
	NoOversell        = "no-oversell"
	StockAccounting   = "mysql-stock-accounts-for-orders"
	OneLivePerUser    = "one-live-order-per-user"
	Every202Final     = "every-202-reached-created-or-failed"
	ReplaySameOrder   = "replayed-key-returns-original-order"
	MySQLEqualsRedis  = "mysql-stock-equals-redis-stock"
	Drained           = "pipeline-drained"
	SoldExactlyStock  = "sold-exactly-stock"
	NoPhantomOrders   = "no-order-without-202"
	NonNegativeStocks = "stock-never-negative"
)

// Check returns every invariant o breaks, in a fixed order; none means the
// run was correct.
func Check(o Observation) []Violation {
	var out []Violation
	add := func(name string, by int64, format string, args ...any) {
		out = append(out, Violation{Invariant: name, By: by, Detail: fmt.Sprintf(format, args...)})
	}
	if o.LiveUnits > o.InitialStock {
		add(NoOversell, o.LiveUnits-o.InitialStock, "%d units sold from a stock of %d", o.LiveUnits, o.InitialStock)
	}
	if o.DBStock < 0 || (o.RedisWarmed && o.RedisStock < 0) {
		add(NonNegativeStocks, min(o.DBStock, o.RedisStock, 0), "MySQL stock %d, Redis stock %d", o.DBStock, o.RedisStock)
	}
	if o.DBStock+o.LiveUnits != o.InitialStock {
		add(StockAccounting, o.InitialStock-o.DBStock-o.LiveUnits,
			"MySQL stock %d + %d live units != initial stock %d", o.DBStock, o.LiveUnits, o.InitialStock)
	}
	if o.ExtraLiveOrders > 0 {
		add(OneLivePerUser, o.ExtraLiveOrders, "%d users hold %d live orders more than one each", o.UsersOverLimit, o.ExtraLiveOrders)
	}
	if n := int64(len(o.Unresolved)); n > 0 {
		add(Every202Final, n, "%d of %d accepted orders are neither CREATED nor FAILED, e.g. %s", n, o.Accepted, o.Unresolved[0])
	}
	if o.ReplayMismatches > 0 {
		add(ReplaySameOrder, o.ReplayMismatches, "%d of %d replayed keys got a different answer than the original 202", o.ReplayMismatches, o.ReplayChecked)
	}
	if !o.Drained {
		add(Drained, o.Inflight, "%d units still in flight when the bench stopped waiting", o.Inflight)
	}
	switch {
	case !o.RedisWarmed:
		add(MySQLEqualsRedis, o.DBStock, "Redis has no stock key for the item (MySQL stock %d)", o.DBStock)
	case o.Drained && o.DBStock != o.RedisStock:
		add(MySQLEqualsRedis, o.RedisStock-o.DBStock, "MySQL stock %d, Redis stock %d", o.DBStock, o.RedisStock)
	}
	if o.Errors == 0 && o.Unacknowledged > 0 {
		add(NoPhantomOrders, o.Unacknowledged, "%d live orders were never answered 202", o.Unacknowledged)
	}
	q := max(o.Quantity, 1)
	if o.Drained && o.Errors == 0 && o.DemandUnits >= o.InitialStock && o.LiveUnits <= o.InitialStock && o.InitialStock-o.LiveUnits >= q {
		add(SoldExactlyStock, o.InitialStock-o.LiveUnits, "%d units sold of %d with demand for %d and no faults",
			o.LiveUnits, o.InitialStock, o.DemandUnits)
	}
	return out
}

// Answer is one answer to a buyer's order request.
type Answer struct {
	User int64
	Key  string
	// Sent and Done are when the request left and its answer arrived,
	// since the start of the run.
	Sent, Done time.Duration
	Accepted   bool
	OrderNo    string
}

// CheckReplays looks at every idempotency key used more than once and
// counts those whose answers break the replay contract: every 202 for one
// key carries the same order number, and a request sent after a 202 for its
// key arrived is itself answered 202. It returns how many keys were
// checked and how many broke it.
func CheckReplays(answers []Answer) (checked, mismatches int64) {
	type key struct {
		user int64
		key  string
	}
	groups := map[key][]Answer{}
	for _, a := range answers {
		k := key{a.User, a.Key}
		groups[k] = append(groups[k], a)
	}
	for _, g := range groups {
		if len(g) < 2 {
			continue
		}
		checked++
		sort.Slice(g, func(i, j int) bool { return g[i].Sent < g[j].Sent })
		first := -1
		for i, a := range g {
			if a.Accepted && (first < 0 || a.Done < g[first].Done) {
				first = i
			}
		}
		if first < 0 {
			continue
		}
		for _, a := range g {
			if (a.Accepted && a.OrderNo != g[first].OrderNo) || (!a.Accepted && a.Sent > g[first].Done) {
				mismatches++
				break
			}
		}
	}
	return checked, mismatches
}

// CheckItems judges one sale of several items from an observation per
// item (labels name them): each item's own invariants, stock, orders and
// answers, with the item's label in the detail, and the sale's
// one-live-order-per-user once (a buyer may hold one live order across
// all the items, so every item's observation carries the sale's count; the
// first one's is used).
func CheckItems(labels []string, items []Observation) []Violation {
	var out []Violation
	for i, o := range items {
		extra, users := o.ExtraLiveOrders, o.UsersOverLimit
		o.ExtraLiveOrders, o.UsersOverLimit = 0, 0
		for _, v := range Check(o) {
			v.Detail = labels[i] + ": " + v.Detail
			out = append(out, v)
		}
		if i == 0 && extra > 0 {
			out = append(out, Violation{Invariant: OneLivePerUser, By: extra,
				Detail: fmt.Sprintf("%d users hold %d live orders more than one each across the sale's %d items", users, extra, len(items))})
		}
	}
	return out
}
