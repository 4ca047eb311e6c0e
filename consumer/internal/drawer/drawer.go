// Package drawer runs the draws of draw sales and gives their winners, and
// then their alternates, orders. Exactly one drawer acts at a time across
// consumer processes (the "drawer" lock); two overlapping would still be
// exact, since the draw is one MySQL transaction that sets the draw DRAWN
// only if it was not, an entry gets its order number once (set before the
// order is reserved), and the order goes through the pipeline's own path:
// the reserve script, keyed by the entry, then Kafka and the consumer's
// conditional insert.
//
// Units reach alternates only through Redis's stock, and only as many as
// MySQL says came back: once every winner's order of a size is reserved,
// units of it that are free again in both stores (a winner's order closed
// unpaid, cancelled or failed; a restock) go to that size's first
// alternates, in ranking order, whose quantity fits them. An alternate
// whose order MySQL still fails for stock waits in its place again and is
// promoted anew, under the same key, when units come back.
//
// A pick whose order fails (its reserve refused for another reason than
// stock, a store that does not answer) is backed off on its own (Picks):
// the pass reports it, skips it until its backoff ends, and goes on with
// the other picks. What it holds back is only what it must: a winner
// without its reservation holds its size's alternates (its units are in
// Redis's stock but are its own), and an alternate holds the alternates
// after it in its size (they come in rank order); every other winner and
// every other size goes on.
//
// Once a drawn sale ended (its end time passed, or an operator ended or
// cancelled it), the drawer gives its alternates nothing more and tells
// each one left without an order that it was not selected
// (draws.Service.Settle: entry.not_selected, once each), including, later,
// one whose order was on its way at the end and failed. The draw is then
// settled and the pass no longer looks at it.
package drawer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/consumer/internal/backoff"
	"github.com/seckill/seckill/consumer/internal/pass"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/service/draws"
	"github.com/seckill/seckill/pkg/service/placing"
)

// DB is MySQL as the drawer uses it (*orderdb.Draws).
type DB interface {
	DrawsDue(ctx context.Context, now time.Time) ([]int64, error)
	DrawnLive(ctx context.Context, now time.Time) ([]int64, error)
	DrawsToSettle(ctx context.Context, now time.Time) ([]int64, error)
	Unissued(ctx context.Context, activity int64, limit int) ([]draw.Picked, error)
	WinnersWithoutOrders(ctx context.Context, activity int64, limit int) ([]draw.Picked, error)
	NextAlternates(ctx context.Context, activity, item int64, most int64, limit int) ([]draw.Picked, error)
	NumberPick(ctx context.Context, entryID, no string) (string, error)
	MarkIssued(ctx context.Context, entryID, no string) error
	Unnumber(ctx context.Context, entryID, no string) error
	DrawFree(ctx context.Context, activity int64, items []int64) (map[int64]int64, error)
	ReturnFailedAlternates(ctx context.Context, activity int64) (int64, error)
}

// Draws runs a draw, once, in the store's transaction, writes its
// entries' outcomes, and settles its alternates once the sale ended
// (*draws.Service).
type Draws interface {
	Draw(ctx context.Context, activity int64, now time.Time) (draw.Drawn, error)
	Announce(ctx context.Context, activity int64, pages int) (int, bool, error)
	Settle(ctx context.Context, activity int64, now time.Time) (draws.Settled, error)
}

// Activities reads a drawn sale (*orderdb.Activities).
type Activities interface {
	Activity(ctx context.Context, id int64) (activity.Activity, error)
}

// Orders reads an order a pick was numbered for (*orderdb.Orders).
type Orders interface {
	Order(ctx context.Context, orderNo string) (order.Order, error)
}

// Reservations is Redis as the retire of an alternate's failed order
// uses it (*stockredis.Reservations).
type Reservations interface {
	Release(ctx context.Context, r reservation.Ref, o reservation.ReleaseOptions) (reservation.Released, error)
}

// Stock is Redis's stock as the drawer reads it (*stockredis.Stock).
type Stock interface {
	Stocks(ctx context.Context, items []reservation.Item) ([]reservation.Snapshot, error)
}

// Placing reserves and publishes a pick's order (*placing.Service).
type Placing interface {
	PlaceDrawn(ctx context.Context, a activity.Activity, d placing.Drawn) error
}

// Drawer runs the draws and their orders periodically.
type Drawer struct {
	DB           DB
	Draws        Draws
	Activities   Activities
	Orders       Orders
	Reservations Reservations
	Stock        Stock
	// Placing reserves and publishes the picks' orders, as the api's are.
	Placing Placing
	// Numbers makes the orders' numbers: the api's signed generator, so
	// the api vouches for them.
	Numbers *order.NumberGenerator
	Locker  pass.Locker
	// Every is the pause between passes (default 1s).
	Every time.Duration
	Log   *slog.Logger
	// Now is the shared clock.
	Now func() time.Time
	// Picks backs off the picks whose order failed, by entry id (nil:
	// each is tried again at every pass).
	Picks *backoff.Records

	// Watermark, when set, holds a draw until every entry Kafka
	// acknowledged by Grace after the close is in MySQL (ADR 7); nil:
	// the api writes entries to MySQL itself and the draw runs at the
	// close.
	Watermark Watermark
	Grace     time.Duration
	// FreezeWait observes how long after the close a draw waited for
	// the watermark, and Behind how many entries the waiting draws still
	// wait for at each pass, in all; nil records nothing.
	FreezeWait func(time.Duration)
	Behind     func(n int64)

	marksMu sync.Mutex
	marks   map[int64]map[int]int64 // sale -> the end read after its close + Grace
	// announced: the drawn sales every entry's outcome is written of.
	announced map[int64]bool

	runner pass.Runner[Stats]
}

// batch bounds the picks one pass handles of each kind, for each sale.
const batch = 500

// announcePages bounds the pages of outcomes (2,000 entries each) one pass
// writes for each sale: a million take several passes, each well inside
// the lock's TTL.
const announcePages = 25

// pass is the drawer's pass: under the "drawer" lock, every Every. It
// backs off its picks in Picks (the runner's own records stay empty when
// Picks is nil).
func (d *Drawer) pass() pass.Pass[Stats] {
	return pass.Pass[Stats]{
		Name: metrics.PassDraw, Lock: "drawer", TTL: 30 * time.Second, Every: d.Every, Default: time.Second,
		Locker: d.Locker, Log: d.Log, Records: d.Picks, Work: d.draw,
		FailedMsg: "drawer pass failed",
		Done: func(st Stats, _ bool) {
			if st.Drawn > 0 || st.Ordered > 0 || st.NotSelected > 0 {
				d.Log.Info("draw pass", "drawn", st.Drawn, "orders", st.Ordered, "alternates", st.Alternates, "not_selected", st.NotSelected)
			}
		},
	}
}

// Run runs a pass every Every until ctx ends.
func (d *Drawer) Run(ctx context.Context) { d.runner.Run(ctx, d.pass()) }

// Stats counts what one pass did.
type Stats struct {
	Drawn      int // draws run
	Ordered    int // orders reserved and published (winners' and alternates')
	Alternates int // of which alternates'
	// NotSelected counts the alternates of ended sales told they were not
	// selected.
	NotSelected int
}

// Once runs one pass under the lock; lock.ErrNotAcquired means another
// process is drawing.
func (d *Drawer) Once(ctx context.Context) (Stats, error) { return d.runner.Once(ctx, d.pass()) }

// draw runs the draws due and gives the drawn sales' picks their orders.
func (d *Drawer) draw(ctx context.Context, _ *backoff.Records) (Stats, error) {
	var st Stats
	now := d.Now()
	due, err := d.DB.DrawsDue(ctx, now)
	if err != nil {
		return st, err
	}
	var errs []error
	var behind int64
	for _, id := range due {
		frozen, n, err := d.frozen(ctx, id, now)
		behind += n
		if err != nil || !frozen {
			if err != nil {
				errs = append(errs, fmt.Errorf("activity %d: %w", id, err))
			}
			continue
		}
		res, err := d.Draws.Draw(ctx, id, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if res.Ran {
			st.Drawn++
			d.Log.Info("draw run", "activity_id", id, "entries", res.Entries, "winners", res.Winners)
		}
	}
	if d.Behind != nil {
		d.Behind(behind)
	}
	live, err := d.DB.DrawnLive(ctx, now)
	if err != nil {
		return st, errors.Join(append(errs, err)...)
	}
	for _, id := range live {
		if err := d.orders(ctx, id, &st); err != nil {
			errs = append(errs, fmt.Errorf("activity %d: %w", id, err))
		}
	}
	ended, err := d.DB.DrawsToSettle(ctx, now)
	if err != nil {
		return st, errors.Join(append(errs, err)...)
	}
	for _, id := range ended {
		res, err := d.Draws.Settle(ctx, id, now)
		st.NotSelected += res.NotSelected
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if res.Done {
			d.Log.Info("draw settled: every alternate had its last event", "activity_id", id)
		}
	}
	return st, errors.Join(errs...)
}

// try places p's order with place unless p is backed off, and reports
// whether it got it; a failure is p's alone (given to d.Picks, held in
// h), never the pass's, unless ctx ended.
func (d *Drawer) try(ctx context.Context, a activity.Activity, p draw.Picked, h *held, place func() (bool, error)) (bool, error) {
	if !d.Picks.Due(p.EntryID) {
		h.hold(p)
		return false, nil
	}
	ok, err := place()
	switch {
	case err != nil && ctx.Err() != nil:
		return false, err
	case err != nil:
		d.Picks.Failed(p.EntryID, err, "activity_id", a.ID, "entry_id", p.EntryID, "item_id", p.ItemID, "outcome", p.Outcome)
		h.hold(p)
		return false, nil
	case ok:
		d.Picks.Succeeded(p.EntryID, "activity_id", a.ID, "entry_id", p.EntryID)
	case p.Outcome == draw.Won:
		h.hold(p)
	}
	return ok, nil
}

// orders gives the drawn sale's picks their orders: first any numbered one
// whose event is not known to be in Kafka, then the winners, then, for each
// size whose winners all have their orders, the alternates the free units
// fit. A pick that fails holds back only what it must (see held).
func (d *Drawer) orders(ctx context.Context, id int64, st *Stats) error {
	a, err := d.Activities.Activity(ctx, id)
	if err != nil {
		return err
	}
	if !a.ActiveAt(d.Now()) {
		return nil
	}
	h := newHeld()
	// An alternate whose order found no stock in MySQL waits in its place
	// again before anything is promoted.
	if n, err := d.DB.ReturnFailedAlternates(ctx, id); err != nil {
		return err
	} else if n > 0 {
		d.Log.Warn("alternates whose orders failed wait in their places again", "activity_id", id, "alternates", n)
	}
	unissued, err := d.DB.Unissued(ctx, id, batch)
	if err != nil {
		return err
	}
	for _, p := range unissued {
		ok, err := d.try(ctx, a, p, h, func() (bool, error) { return d.place(ctx, a, p, p.OrderNo, false) })
		if err != nil {
			return err
		}
		if ok {
			st.Ordered++
		}
	}
	winners, err := d.DB.WinnersWithoutOrders(ctx, id, batch)
	if err != nil {
		return err
	}
	ordered, err := d.issueAll(ctx, a, winners, h)
	st.Ordered += ordered
	if err != nil {
		return err
	}
	if len(winners) == batch {
		// More winners than one pass lists: which sizes they hold is not
		// known yet, so no size's units are free for an alternate.
		return nil
	}
	// The entries' outcomes (entry.won, entry.alternate), written after
	// the draw so the winners' orders need not wait for a million of
	// them; an alternate is promoted only once every outcome is out, so
	// its entry.promoted comes after its entry.alternate.
	// Known done in this process, it is not looked for again: the search
	// reads the sale's ranking.
	d.marksMu.Lock()
	announced := d.announced[id]
	d.marksMu.Unlock()
	if !announced {
		_, done, err := d.Draws.Announce(ctx, id, announcePages)
		if err != nil || !done {
			return err
		}
		d.marksMu.Lock()
		if d.announced == nil {
			d.announced = map[int64]bool{}
		}
		d.announced[id] = true
		d.marksMu.Unlock()
	}
	return d.alternates(ctx, a, h, st)
}

// alternates gives each size's free units to its first alternates in
// ranking order whose quantity fits; a size that h holds back waits for
// the next pass. The units free are the fewer of what Redis counts (a
// reserve needs them there) and what MySQL says came back (DrawFree): a
// Redis stock the heal has not checked yet (restored from a copy taken
// before orders were made) promotes nobody.
func (d *Drawer) alternates(ctx context.Context, a activity.Activity, h *held, st *Stats) error {
	items := make([]reservation.Item, len(a.Items))
	for i, it := range a.Items {
		items[i] = reservation.In(a.ItemID, it.ItemID)
	}
	snaps, err := d.Stock.Stocks(ctx, items)
	if err != nil {
		return err
	}
	free, err := d.DB.DrawFree(ctx, a.ID, a.ItemIDs())
	if err != nil {
		return err
	}
	for i, it := range items {
		left := min(snaps[i].Stock, free[it.ID])
		if !snaps[i].Warmed || h.size(it.ID) {
			continue
		}
		for left > 0 && !h.size(it.ID) {
			next, err := d.DB.NextAlternates(ctx, a.ID, it.ID, left, 50)
			if err != nil {
				return err
			}
			if len(next) == 0 {
				break
			}
			for _, p := range next {
				if int64(p.Quantity) > left {
					continue
				}
				ok, err := d.try(ctx, a, p, h, func() (bool, error) { return d.issue(ctx, a, p) })
				if err != nil {
					return err
				}
				if h.size(it.ID) {
					break // it keeps its place: the ones after it wait
				}
				if !ok {
					// Redis had fewer units than it showed: the next
					// pass reads it again.
					left = 0
					break
				}
				st.Ordered++
				st.Alternates++
				left -= int64(p.Quantity)
			}
		}
	}
	return nil
}

// parallel is how many winners' orders one pass places at once: each is
// a reserve, a publish and two MySQL writes, mostly waiting.
const parallel = 16

// issueAll issues picks (issue), parallel at a time, each as d.try does,
// and returns how many got their order; an error means ctx ended.
func (d *Drawer) issueAll(ctx context.Context, a activity.Activity, picks []draw.Picked, h *held) (int, error) {
	var (
		mu      sync.Mutex
		ordered int
		first   error
		wg      sync.WaitGroup
		slots   = make(chan struct{}, parallel)
	)
	for _, p := range picks {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			ok, err := d.try(ctx, a, p, h, func() (bool, error) { return d.issue(ctx, a, p) })
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && first == nil:
				first = err
			case err == nil && ok:
				ordered++
			}
		})
	}
	wg.Wait()
	return ordered, first
}

// issue gives a pick without a number one, or finds the one it has, then
// places its order (place). A number made here is fresh: no reserve can
// have run with it before.
func (d *Drawer) issue(ctx context.Context, a activity.Activity, p draw.Picked) (bool, error) {
	mine := d.Numbers.NextFor(a.ItemID, p.UserID)
	no, err := d.DB.NumberPick(ctx, p.EntryID, mine)
	if err != nil {
		return false, err
	}
	return d.place(ctx, a, p, no, no == mine)
}

// place reserves the pick's order no and publishes its event
// (placing.Service.PlaceDrawn), marks the pick issued, and reports
// whether it did (false: Redis has not the units for it now). fresh says
// no reserve ran with no before: only then does a refusal prove that no
// order of that number exists, so that an alternate's number may be
// taken back.
func (d *Drawer) place(ctx context.Context, a activity.Activity, p draw.Picked, no string, fresh bool) (bool, error) {
	err := d.Placing.PlaceDrawn(ctx, a, placing.Drawn{EntryID: p.EntryID, UserID: p.UserID, ItemID: p.ItemID,
		Quantity: p.Quantity, OrderNo: no, Fresh: fresh, Alternate: p.Outcome == draw.Alternate,
		Retire: func(ctx context.Context, prior string) error { return d.retire(ctx, p, prior) }})
	switch {
	case errors.Is(err, order.ErrSoldOut):
		if p.Outcome == draw.Alternate && fresh {
			// Its place stays: it waits for the next units.
			return false, d.DB.Unnumber(ctx, p.EntryID, no)
		}
		if p.Outcome == draw.Alternate {
			// Kept numbered: its reserve is tried again while the sale is on.
			d.Log.Warn("an alternate's order was reserved before and Redis refuses it now", "activity_id", a.ID, "entry_id", p.EntryID, "order_no", no)
			return false, nil
		}
		d.Log.Warn("a winner's units are not in Redis yet", "activity_id", a.ID, "entry_id", p.EntryID, "item_id", p.ItemID)
		return false, nil
	case err != nil:
		return false, err
	}
	return true, d.DB.MarkIssued(ctx, p.EntryID, no)
}

// retire frees the entry's key from its earlier order prior, which MySQL
// must hold FAILED (final: it never becomes an order, so its reservation
// and the key may go, as the sweep releases them), else an error and the
// pick is tried again later. A release whose answer was lost is repeated
// by that retry and finds its work done.
func (d *Drawer) retire(ctx context.Context, p draw.Picked, prior string) error {
	o, err := d.Orders.Order(ctx, prior)
	if err != nil {
		return fmt.Errorf("entry %s: read its earlier order %s: %w", p.EntryID, prior, err)
	}
	if o.Status != order.Failed || o.UserID != p.UserID {
		return fmt.Errorf("entry %s: its key names order %s (%s), not failed", p.EntryID, prior, o.Status)
	}
	rel, err := d.Reservations.Release(ctx, reservation.OrderRef(o), reservation.ReleaseOptions{Reason: o.FailureReason,
		From: []reservation.State{reservation.StateReserved, reservation.StateClaimed}, FreeKey: true})
	if err != nil {
		return fmt.Errorf("entry %s: free its key from order %s: %w", p.EntryID, prior, err)
	}
	if !rel.Gone() {
		return fmt.Errorf("entry %s: its earlier order %s is still %s in Redis", p.EntryID, prior, rel.State)
	}
	d.Log.Info("an alternate's failed order retired; promoted again", "entry_id", p.EntryID, "failed_order_no", prior)
	return nil
}
