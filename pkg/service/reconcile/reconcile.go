// Package reconcile checks, item by item, that Redis and MySQL agree, and
// repairs what they disagree on when asked.
//
// # Stock
//
// The invariant is
//
//	Redis stock + in flight = MySQL stock
//
// where "in flight" is every unit Redis has taken out of its stock that
// MySQL still counts as its own. From the Redis side that is the inflight
// counter (the quantities of RESERVED and CLAIMED reservations), corrected
// for the orders MySQL has already decided but Redis has not heard of yet:
//
//	in flight = inflight − committed + closing + restocking
//	drift     = Redis stock + in flight − MySQL stock
//
// where:
//
//   - committed: pending reservations (RESERVED|CLAIMED) whose order MySQL
//     has as CREATED or PAID. MySQL took their units when it committed;
//     the confirm that takes them off the counter follows. Counting them
//     would count them twice.
//   - releasing: pending reservations whose order MySQL has as FAILED (or
//     CLOSED before the confirm). MySQL never took their units and the
//     release that follows moves them from the counter back to Redis stock;
//     stock + inflight does not change, so they stay in "in flight". (They
//     are not in flight in the sense of "undecided": the report shows them
//     apart; undecided = inflight − committed − releasing.)
//   - closing: CONFIRMED reservations of orders MySQL has CLOSED (cancel,
//     payment timeout) whose Redis release has not run yet. MySQL has the
//     units back already; Redis gets them with the release.
//   - restocking: restocks MySQL committed (table restocks, applied_at
//     NULL) that Redis stock does not hold yet: no marker, and the stock
//     key's restock record does not include them (lua/restock.lua: a
//     warm-up's figure did not). MySQL has the units; Redis gets them with
//     the restock's Redis step, which runs once per restock (the API's, a
//     retry's, or the repair's).
//
// # Reading without false drift
//
// Orders flow while the reconciler reads, so each read is ordered so that
// every cross-store step (MySQL first, Redis second: commit then confirm,
// close then release) is seen consistently:
//
//  1. MySQL: the item's CLOSED orders without a recorded release and its
//     restocks not recorded as applied (and the server's clock, the last
//     order id and the last restock id).
//  2. Redis, one script, one instant: stock, inflight, the pending order
//     numbers, the reservation states of the orders from step 1, and the
//     markers of its restocks.
//  3. MySQL, one REPEATABLE READ snapshot: the stock and the status of every
//     pending order from step 2.
//
// A pending order that commits between 2 and 3 is seen committed in 3 and
// is still in the counter read in 2: it is subtracted once, as it should
// be. MySQL being read after Redis is what makes this exact. Two moves
// remain that the order of reads cannot place: an order reserved after
// step 2 and committed before step 3, and a cancel or timeout close that
// lands between step 1 and step 3. Step 1 also notes the server's clock and
// the last order id, and the snapshot of step 3 lists the live orders
// created since (not pending in step 2) and the orders closed since; when
// there are any, the item is read again at once (up to three times). Then,
// as a last guard, a mismatch is read again after a pause
// (Checker.Recheck), and it is drift only when two reads in a row show the
// same values. A restock made after step 1 is listed by the snapshot too
// (a larger restock id) and the item is read again at once.
//
// # Quota
//
// Every user with a live order in an activity must hold the activity's
// quota key with that order's number (after a Redis restart they would not,
// and could buy again), and a quota key whose order is neither live in
// MySQL nor RESERVED/CLAIMED in Redis is stale (the user can never buy
// again) — unless MySQL closed that order and its release, which deletes
// the key, has not run yet. The check reads a page at a time, so it holds
// a few pages whatever the size of the sale: first the live orders in user
// order (a keyset scan of uk_orders_live), each page before the keys of its
// users (MGET), and the users whose key is missing read again (a key goes
// only after its order left the live set); then the quota keys by SCAN, each
// step before the live orders of its users, for the keys whose user holds
// no live order. A suspect key is read together with its reservation
// (MULTI) before MySQL is asked about its order, so neither an order being
// closed nor one on its way is taken for drift. On a cluster the item's
// hash tag puts all its keys on one node, and that node is scanned. Issues
// are counted, and the first MaxListed of each kind listed.
//
// # Repair
//
// Only drift seen in two reads in a row is repaired, under the caller's
// lock, with every write a compare-and-set script that carries the lock's
// fencing token (see package stockredis). Quota keys are restored before
// stock, so a restored item never sells to a buyer whose quota is still
// missing. Every repair pass also gives the orders MySQL holds their
// idempotency records back where Redis lost them (see idem.go), first of
// all, on every item it read. Before reading, it gives CREATED orders their
// reservation hashes back where Redis lost them (see reservations.go) and
// finishes the restocks whose Redis step was left undone (an API that
// answered 503 and was not retried; see restock.go), and it finishes those
// again once it brought back a missing stock key (a restock's step adds
// nothing to a missing key).
//
// # One item at a time
//
// An item whose check or repair fails (a key of the wrong type, a statement
// MySQL refuses) is reported Unchecked with its error, and the run goes on
// with the other items: one bad item never keeps the others unchecked or
// unrepaired. A run stops only when its context ends, its lock is lost, or
// a store is down (it no longer answers a ping after an item failed).
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/logs"
)

// LockName is the distributed lock every repair of Redis from MySQL runs
// under (the reconciler's runs, and the consumer's repair after Redis lost
// data): one at a time.
const LockName = "reconcile"

// Defaults for the zero values of Checker.
const (
	DefaultRecheck = 500 * time.Millisecond
	DefaultWindow  = 24 * time.Hour
	// MaxReads bounds the reads of one item in one run.
	MaxReads = 3
)

// ErrLockLost means the lock the repairs run under was lost; nothing more
// was written.
var ErrLockLost = errors.New("reconcile: lock lost; repairs stopped")

// Lock is what the repairs need of the lock they run under (*lock.Lock).
type Lock interface {
	// Fence is the fencing token every repair carries.
	Fence() int64
	// Lost is closed when the lock is no longer held.
	Lost() <-chan struct{}
}

// Progress hears about each item checked. Start is called once per pass.
type Progress interface {
	Start(stage string, total int)
	Step()
	Done()
}

// Warmer lays out a bucketed item's stock keys (*stockredis.Store): it
// writes the bucket marker and creates the missing buckets from MySQL stock
// minus what is in flight, never raising an existing one, recording the
// restocks that stock includes (stockredis.WarmupFrom).
type Warmer interface {
	WarmupFrom(ctx context.Context, item stockredis.Item, buckets int, ttl time.Duration, db stockredis.StockReader) (int64, error)
}

// Checker checks and repairs items.
type Checker struct {
	Stock Stock
	DB    DB
	Log   *slog.Logger
	// Warmer restores the layout of a bucketed item whose bucket marker
	// Redis lost with its stock (the layout comes from the item's current
	// sale in MySQL, stock_buckets; see buckets). Nil: such an item is
	// reported and left alone.
	Warmer Warmer
	// Progress may be nil.
	Progress Progress
	// Stores are pinged after an item failed: one that does not answer
	// stops the run (a store down for one item is down for all). Nil: the
	// DB only.
	Stores []Pinger
	// Recheck is the pause before a mismatch is read again (default
	// DefaultRecheck).
	Recheck time.Duration
	// PaymentWindow is the payment window of activities without their own
	// (default order.DefaultPaymentWindow); it bounds the TTL of restored
	// keys.
	PaymentWindow time.Duration
	// Window: the activities that ended less than Window ago are still
	// checked (default DefaultWindow).
	Window time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	// beforeWrite, when set (tests), runs before each repair write;
	// afterView between the Redis and the MySQL read of an item's stock.
	beforeWrite func(item int64)
	afterView   func(item int64)
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Checker) recheck() time.Duration {
	if c.Recheck > 0 {
		return c.Recheck
	}
	return DefaultRecheck
}

func (c *Checker) window() time.Duration {
	if c.Window > 0 {
		return c.Window
	}
	return DefaultWindow
}

// paymentWindow is the payment window of activities without their own.
func (c *Checker) paymentWindow() time.Duration {
	if c.PaymentWindow > 0 {
		return c.PaymentWindow
	}
	return order.DefaultPaymentWindow
}

// Target is one item to check and the activities of it whose quota is
// checked.
type Target struct {
	ItemID     int64
	Activities []order.Activity
	// Tag is the first item of the sale the item's keys are kept with
	// (orderdb.LatestTag): the item itself but for a size of a sale of
	// several items. 0 means ItemID.
	Tag int64
}

// item is where the target's keys are in Redis.
func (t Target) item() stockredis.Item { return stockredis.Item{ID: t.ItemID, Tag: t.Tag} }

// quotaOwner reports whether t checks a's quota keys: those of a sale of
// several items are checked once, with its first item, whose hash tag they
// share (every live order of the sale, whatever its item).
func (t Target) quotaOwner(a order.Activity) bool { return a.ItemID == t.ItemID }

// Selection says which items to check. Empty: every item with an activity
// that has not ended or ended less than Checker.Window ago.
type Selection struct {
	Items, Activities []int64
}

// Targets resolves sel to the items to check, by item id.
func (c *Checker) Targets(ctx context.Context, sel Selection) ([]Target, error) {
	since := c.now().Add(-c.window())
	var acts []order.Activity
	var items []int64
	if len(sel.Items) == 0 && len(sel.Activities) == 0 {
		a, err := c.DB.Activities(ctx, orderdb.ActivityFilter{EndsAfter: since})
		if err != nil {
			return nil, err
		}
		acts = a
	} else {
		if len(sel.Activities) > 0 {
			a, err := c.DB.Activities(ctx, orderdb.ActivityFilter{IDs: sel.Activities})
			if err != nil {
				return nil, err
			}
			for _, id := range sel.Activities {
				if !slices.ContainsFunc(a, func(x order.Activity) bool { return x.ID == id }) {
					return nil, fmt.Errorf("activity %d: %w", id, order.ErrNotFound)
				}
			}
			acts = append(acts, a...)
		}
		if len(sel.Items) > 0 {
			// An item asked for that does not exist is the caller's
			// mistake, not an item whose check failed.
			for _, id := range sel.Items {
				if _, err := c.DB.Item(ctx, id); err != nil {
					return nil, fmt.Errorf("item %d: %w", id, err)
				}
			}
			a, err := c.DB.Activities(ctx, orderdb.ActivityFilter{Items: sel.Items})
			if err != nil {
				return nil, err
			}
			acts = append(acts, a...)
			items = append(items, sel.Items...)
		}
	}
	byItem := map[int64][]order.Activity{}
	for _, id := range items {
		byItem[id] = nil
	}
	for _, a := range acts {
		for _, item := range a.ItemIDs() {
			if !slices.ContainsFunc(byItem[item], func(x order.Activity) bool { return x.ID == a.ID }) {
				byItem[item] = append(byItem[item], a)
			}
		}
	}
	out := make([]Target, 0, len(byItem))
	for id, as := range byItem {
		sort.Slice(as, func(i, j int) bool { return as[i].ID < as[j].ID })
		out = append(out, Target{ItemID: id, Activities: as, Tag: orderdb.LatestTag(id, as)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ItemID < out[j].ItemID })
	return out, nil
}

// quotaChecked reports whether a's quota keys should still exist: the
// activity ended less than Window ago (the keys live order.KeyMargin past
// it: Activity.RecordsLiveUntil).
func (c *Checker) quotaChecked(a order.Activity, now time.Time) bool {
	return a.EndsAt.Add(min(c.window(), order.KeyMargin)).After(now)
}

// buckets is the number of stock buckets the item's keys are laid out in
// when Redis lost them all: that of the sale that started last by now (the
// one selling, or the last that sold), else of the next to start; 1 for
// one stock key. Never an older sale's: its buckets would be dead keys that
// nobody sells from (docs/adr/0002-stock-buckets.md).
func buckets(t Target, now time.Time) int {
	if cur := current(t, now); cur != nil {
		return max(cur.StockBuckets, 1)
	}
	return 1
}

// current is the sale of t that started last by now, else the next to
// start; nil when t has none.
func current(t Target, now time.Time) *order.Activity {
	var cur *order.Activity
	for i := range t.Activities {
		a := &t.Activities[i]
		switch {
		case cur == nil:
			cur = a
		case !a.StartsAt.After(now) && (cur.StartsAt.After(now) || a.StartsAt.After(cur.StartsAt)):
			cur = a // started, and later than cur (or cur has not started)
		case a.StartsAt.After(now) && cur.StartsAt.After(now) && a.StartsAt.Before(cur.StartsAt):
			cur = a // neither started: the next one
		}
	}
	return cur
}

// started reports whether any of t's activities has started: a missing
// stock key is then a fault, not an item nobody warmed yet.
func started(t Target, now time.Time) bool {
	for _, a := range t.Activities {
		if !now.Before(a.StartsAt) {
			return true
		}
	}
	return len(t.Activities) == 0
}

// horizon is when the item's keys may expire: the latest KeysLiveUntil of
// its activities, and at least order.KeyMargin from now.
func (c *Checker) horizon(t Target, now time.Time) time.Time {
	h := now.Add(order.KeyMargin)
	for _, a := range t.Activities {
		if e := a.KeysLiveUntil(c.paymentWindow()); e.After(h) {
			h = e
		}
	}
	return h
}

// Run checks every target, reads each mismatch again after Recheck (up to
// MaxReads reads), and, when repair is set, repairs what two reads in a row
// agreed on, under l.
//
// Mode is what a run does with the drift it finds.
type Mode int

const (
	// CheckOnly reports drift and changes nothing.
	CheckOnly Mode = iota
	// CheckAndRepair reports drift and repairs it; it needs a lock.
	CheckAndRepair
)

// A check or repair that fails for one item (a store's error for that item:
// a key of the wrong type, a statement MySQL refuses) is that item's own:
// its line gets the verdict Unchecked with the error, it is left alone for
// the rest of the run, and the run goes on with the other items; the next
// run tries it again. The run stops, with an error and a report of what was
// done, only when ctx ends, the lock is lost, or a store is down: after an
// item failed, a store that does not answer a ping (Checker.Stores) means
// every other item would fail the same way, after its own timeouts.
func (c *Checker) Run(ctx context.Context, targets []Target, mode Mode, l Lock) (rep Report, err error) {
	repair := mode == CheckAndRepair
	if repair && l == nil {
		return rep, errors.New("reconcile: repairs need a lock")
	}
	rep = Report{StartedAt: c.now().UTC(), Repair: repair}
	if l != nil {
		rep.Fence = l.Fence()
	}
	defer func() { rep.FinishedAt = c.now().UTC() }()

	reads := make([][]reading, len(targets))
	failed := make([]error, len(targets))
	// fail records err as target i's (what was being done: stage) and
	// returns nil, or the error that stops the run.
	fail := func(i int, stage string, err error) error {
		id := targets[i].ItemID
		failed[i] = fmt.Errorf("%s: %w", stage, err)
		if stop := c.stops(ctx, l, err); stop != nil {
			return fmt.Errorf("%s: %w", fmt.Sprintf(stageError[stage], id), stop)
		}
		// Debug: the caller reports it from the item's line, once (the
		// reconciler per run, the heal watch when it starts failing).
		c.Log.Debug("item could not be checked or repaired; the run goes on with the other items",
			"item_id", id, "stage", stage, "err", err)
		return nil
	}

	type restoredRes struct {
		restored, takenBack int
		ok                  bool
	}
	resv := map[int64]restoredRes{}
	if repair {
		for i, t := range targets {
			if err := c.finishRestocks(ctx, t.item(), l); err != nil {
				if stop := fail(i, stageRestocks, err); stop != nil {
					return c.finish(rep, targets, reads, failed), stop
				}
				continue
			}
			// Before the reads, so they see each close's release as it
			// will credit (see reservations.go).
			n, back, ok, err := c.restoreReservations(ctx, t, l)
			if err != nil {
				if stop := fail(i, stageReservations, err); stop != nil {
					return c.finish(rep, targets, reads, failed), stop
				}
				continue
			}
			resv[t.ItemID] = restoredRes{n, back, ok}
		}
	}
	todo := make([]int, 0, len(targets))
	for i := range targets {
		if failed[i] == nil {
			todo = append(todo, i)
		}
	}
	for pass := 1; pass <= MaxReads && len(todo) > 0; pass++ {
		if pass > 1 {
			c.Log.Info("mismatch found; reading again after a pause", "items", len(todo), "pause", c.recheck().String(), "read", pass)
			if err := sleep(ctx, c.recheck()); err != nil {
				return c.finish(rep, targets, reads, failed), err
			}
		}
		stage := "checking"
		if pass > 1 {
			stage = fmt.Sprintf("re-reading (%d)", pass)
		}
		c.start(stage, len(todo))
		var next []int
		for _, i := range todo {
			r, err := c.read(ctx, targets[i])
			if err != nil {
				if stop := fail(i, stageCheck, err); stop != nil {
					c.done()
					return c.finish(rep, targets, reads, failed), stop
				}
				c.step()
				continue
			}
			reads[i] = append(reads[i], r)
			if !settled(targets[i], reads[i], c.now()) {
				next = append(next, i)
			}
			if r.mismatch(targets[i], c.now()) {
				c.Log.Info("item read disagrees", r.logAttrs(targets[i].ItemID, pass)...)
			}
			c.step()
		}
		c.done()
		todo = next
	}

	rep = c.finish(rep, targets, reads, failed)
	for i := range rep.Items {
		it := &rep.Items[i]
		if it.Verdict.Problem() && it.Verdict != Unchecked {
			c.Log.Log(ctx, logs.Alert, "Redis and MySQL disagree", it.logAttrs()...)
		}
		if it.Detail.Restocking > 0 && !repair {
			c.Log.Warn("restocked units not in Redis yet; a retry with the restock's Idempotency-Key or --repair adds them",
				"item_id", it.ItemID, "restocking", it.Detail.Restocking)
		}
	}
	if !repair {
		return rep, nil
	}
	index := make(map[int64]int, len(targets))
	for i, t := range targets {
		index[t.ItemID] = i
	}
	// failRepair records a repair's failure on the item's line, or returns
	// the error that stops the run.
	failRepair := func(it *ItemReport, stage string, err error) error {
		j := index[it.ItemID]
		stop := fail(j, stage, err)
		it.Verdict, it.Error, it.err = Unchecked, failed[j].Error(), failed[j]
		return stop
	}
	for i := range rep.Items {
		it := &rep.Items[i]
		if it.Verdict == Unchecked {
			continue // its check failed: nothing to repair from
		}
		j := index[it.ItemID]
		rr := resv[it.ItemID] // done before the reads
		c.noteReservations(it, rr.restored, rr.takenBack, rr.ok)
		// Idempotency records first (see idem.go), before stock comes
		// back: a retry then finds its order, not stock to reserve anew.
		idemOK, err := c.restoreIdem(ctx, targets[j], it, l)
		if err != nil {
			if stop := failRepair(it, stageRepair, err); stop != nil {
				return rep, stop
			}
			continue
		}
		if r := reads[j]; r[len(r)-1].stock.view.BothLayouts {
			// Which layout is live is the operator's call (see judge).
			it.Repairs = append(it.Repairs, "not repaired: the item has two stock layouts in Redis")
			continue
		}
		if it.Verdict == Drift || it.Verdict == NotWarmed {
			cold := it.Verdict == NotWarmed
			if err := c.repair(ctx, targets[j], it, reads[j], l); err != nil {
				if stop := failRepair(it, stageRepair, err); stop != nil {
					return rep, stop
				}
				continue
			}
			if cold {
				// The stock key is back, without the restocks whose step
				// found it missing (they were restocking): their steps
				// add them now, once.
				if err := c.finishRestocks(ctx, targets[j].item(), l); err != nil {
					if stop := failRepair(it, stageRestocks, err); stop != nil {
						return rep, stop
					}
					continue
				}
			}
		}
		switch {
		case (!idemOK || !rr.ok) && !it.Verdict.Problem():
			it.Verdict = Retry
		case (it.IdemRestored > 0 || rr.restored+rr.takenBack > 0) && (it.Verdict == OK || it.Verdict == NotStarted):
			it.Verdict = Repaired
		}
	}
	return rep, nil
}

// What Run was doing for an item when it failed: the item's error says it,
// and the run's error (when it stops) says it the way stageError does.
const (
	stageRestocks     = "finish restocks"
	stageReservations = "restore reservations"
	stageCheck        = "check"
	stageRepair       = "repair"
)

var stageError = map[string]string{
	stageRestocks:     "finish restocks of item %d",
	stageReservations: "restore reservations of item %d",
	stageCheck:        "check item %d",
	stageRepair:       "repair item %d",
}

// PingTimeout bounds the ping of each store after an item failed.
const PingTimeout = 5 * time.Second

// Pinger is a store Run pings after an item failed (*stockredis.Store,
// *orderdb.DB).
type Pinger interface {
	Ping(ctx context.Context) error
}

func (c *Checker) stores() []Pinger {
	if c.Stores != nil {
		return c.Stores
	}
	return []Pinger{c.DB}
}

// stops returns the error that stops the run after an item failed with
// err, nil when the failure is the item's own and the run goes on: ctx
// ended, the lock was lost, or a store does not answer a ping.
func (c *Checker) stops(ctx context.Context, l Lock, err error) error {
	if errors.Is(err, ErrLockLost) || ctx.Err() != nil {
		return err
	}
	if l != nil {
		select {
		case <-l.Lost():
			return fmt.Errorf("%w: %w", ErrLockLost, err)
		default:
		}
	}
	pctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	for _, s := range c.stores() {
		if perr := s.Ping(pctx); perr != nil {
			return fmt.Errorf("%w (and a store is down: %w)", err, perr)
		}
	}
	return nil
}

func (c *Checker) start(stage string, n int) {
	if c.Progress != nil {
		c.Progress.Start(stage, n)
	}
}

func (c *Checker) step() {
	if c.Progress != nil {
		c.Progress.Step()
	}
}

func (c *Checker) done() {
	if c.Progress != nil {
		c.Progress.Done()
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

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
