package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/pkg/foundation/logs"
)

// Mode is what a run does with the drift it finds.
type Mode int

const (
	// CheckOnly reports drift and changes nothing.
	CheckOnly Mode = iota
	// CheckAndRepair reports drift and repairs it; it needs a lock.
	CheckAndRepair
)

// Run checks every target, reads each mismatch again after Recheck (up to
// MaxReads reads), and, when repair is set, repairs what two reads in a row
// agreed on, under l.
//
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

	r := &checkRun{c: c, targets: targets, l: l, reads: make([][]reading, len(targets)),
		failed: make([]error, len(targets)), resv: map[int64]restoredRes{}}
	if repair {
		if stop := r.prepare(ctx); stop != nil {
			return c.finish(rep, targets, r.reads, r.failed), stop
		}
	}
	if stop := r.readAll(ctx); stop != nil {
		return c.finish(rep, targets, r.reads, r.failed), stop
	}

	rep = c.finish(rep, targets, r.reads, r.failed)
	c.logProblems(ctx, rep, repair)
	if !repair {
		return rep, nil
	}
	stop := r.repairAll(ctx, rep.Items)
	return rep, stop
}

// checkRun is where one Run stands: what each target's reads showed, why
// each target that failed did, and what each repaired target's
// reservations came to before the reads.
type checkRun struct {
	c       *Checker
	targets []Target
	l       Lock
	reads   [][]reading
	failed  []error
	resv    map[int64]restoredRes
}

// restoredRes is what restoreReservations did for an item.
type restoredRes struct {
	restored, takenBack int
	ok                  bool
}

// fail records err as target i's (what was being done: stage) and
// returns nil, or the error that stops the run.
func (r *checkRun) fail(ctx context.Context, i int, stage string, err error) error {
	id := r.targets[i].ItemID
	r.failed[i] = fmt.Errorf("%s: %w", stage, err)
	if stop := r.c.stops(ctx, r.l, err); stop != nil {
		return fmt.Errorf("%s: %w", fmt.Sprintf(stageError[stage], id), stop)
	}
	// Debug: the caller reports it from the item's line, once (the
	// reconciler per run, the heal watch when it starts failing).
	r.c.Log.Debug("item could not be checked or repaired; the run goes on with the other items",
		"item_id", id, "stage", stage, "err", err)
	return nil
}

// prepare, for a repair, finishes each target's restocks and gives its
// orders their reservations back, before the reads. It returns the error
// that stops the run.
func (r *checkRun) prepare(ctx context.Context) error {
	for i, t := range r.targets {
		if err := r.c.finishRestocks(ctx, t.item(), r.l); err != nil {
			if stop := r.fail(ctx, i, stageRestocks, err); stop != nil {
				return stop
			}
			continue
		}
		// Before the reads, so they see each close's release as it
		// will credit (see reservations.go).
		n, back, ok, err := r.c.restoreReservations(ctx, t, r.l)
		if err != nil {
			if stop := r.fail(ctx, i, stageReservations, err); stop != nil {
				return stop
			}
			continue
		}
		r.resv[t.ItemID] = restoredRes{n, back, ok}
	}
	return nil
}

// readAll reads every target that has not failed, then again after a
// pause those whose reads have not settled, up to MaxReads reads. It
// returns the error that stops the run.
func (r *checkRun) readAll(ctx context.Context) error {
	c := r.c
	todo := make([]int, 0, len(r.targets))
	for i := range r.targets {
		if r.failed[i] == nil {
			todo = append(todo, i)
		}
	}
	for pass := 1; pass <= MaxReads && len(todo) > 0; pass++ {
		if pass > 1 {
			c.Log.Info("mismatch found; reading again after a pause", "items", len(todo), "pause", c.recheck().String(), "read", pass)
			if err := sleep(ctx, c.recheck()); err != nil {
				return err
			}
		}
		next, stop := r.readPass(ctx, pass, todo)
		if stop != nil {
			return stop
		}
		todo = next
	}
	return nil
}

// readPass reads the targets of todo once (the pass-th read) and returns
// those to read again, or the error that stops the run.
func (r *checkRun) readPass(ctx context.Context, pass int, todo []int) ([]int, error) {
	c := r.c
	stage := "checking"
	if pass > 1 {
		stage = fmt.Sprintf("re-reading (%d)", pass)
	}
	c.start(stage, len(todo))
	var next []int
	for _, i := range todo {
		rd, err := c.read(ctx, r.targets[i])
		if err != nil {
			if stop := r.fail(ctx, i, stageCheck, err); stop != nil {
				c.done()
				return nil, stop
			}
			c.step()
			continue
		}
		r.reads[i] = append(r.reads[i], rd)
		if !settled(r.targets[i], r.reads[i], c.now()) {
			next = append(next, i)
		}
		if rd.mismatch(r.targets[i], c.now()) {
			c.Log.Info("item read disagrees", rd.logAttrs(r.targets[i].ItemID, pass)...)
		}
		c.step()
	}
	c.done()
	return next, nil
}

// logProblems alerts on every item of rep whose verdict is a problem it
// could check, and, when the run repairs nothing, warns of the restocked
// units Redis does not hold yet.
func (c *Checker) logProblems(ctx context.Context, rep Report, repair bool) {
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
}

// repairAll repairs each item of items (the report's lines) that was
// checked. It returns the error that stops the run.
func (r *checkRun) repairAll(ctx context.Context, items []ItemReport) error {
	index := make(map[int64]int, len(r.targets))
	for i, t := range r.targets {
		index[t.ItemID] = i
	}
	for i := range items {
		it := &items[i]
		if it.Verdict == Unchecked {
			continue // its check failed: nothing to repair from
		}
		if stop := r.repairItem(ctx, it, index[it.ItemID]); stop != nil {
			return stop
		}
	}
	return nil
}

// repairItem repairs target j, whose report line is it: its idempotency
// records, then its stock (and the restocks a missing stock key held
// back), and sets its verdict from what was done. A failure goes on the
// item's line; it returns the error that stops the run.
func (r *checkRun) repairItem(ctx context.Context, it *ItemReport, j int) error {
	c := r.c
	rr := r.resv[it.ItemID] // done before the reads
	c.noteReservations(it, rr.restored, rr.takenBack, rr.ok)
	// Idempotency records first (see idem.go), before stock comes
	// back: a retry then finds its order, not stock to reserve anew.
	idemOK, err := c.restoreIdem(ctx, r.targets[j], it, r.l)
	if err != nil {
		return r.failRepair(ctx, it, j, stageRepair, err)
	}
	if rs := r.reads[j]; rs[len(rs)-1].stock.view.BothLayouts {
		// Which layout is live is the operator's call (see judge).
		it.Repairs = append(it.Repairs, "not repaired: the item has two stock layouts in Redis")
		return nil
	}
	if it.Verdict == Drift || it.Verdict == NotWarmed {
		cold := it.Verdict == NotWarmed
		if err := c.repair(ctx, r.targets[j], it, r.reads[j], r.l); err != nil {
			return r.failRepair(ctx, it, j, stageRepair, err)
		}
		if cold {
			// The stock key is back, without the restocks whose step
			// found it missing (they were restocking): their steps
			// add them now, once.
			if err := c.finishRestocks(ctx, r.targets[j].item(), r.l); err != nil {
				return r.failRepair(ctx, it, j, stageRestocks, err)
			}
		}
	}
	switch {
	case (!idemOK || !rr.ok) && !it.Verdict.Problem():
		it.Verdict = Retry
	case (it.IdemRestored > 0 || rr.restored+rr.takenBack > 0) && (it.Verdict == OK || it.Verdict == NotStarted):
		it.Verdict = Repaired
	}
	return nil
}

// failRepair records a repair's failure of target j on its line it, and
// returns nil, or the error that stops the run.
func (r *checkRun) failRepair(ctx context.Context, it *ItemReport, j int, stage string, err error) error {
	stop := r.fail(ctx, j, stage, err)
	it.Verdict, it.Error, it.err = Unchecked, r.failed[j].Error(), r.failed[j]
	return stop
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
