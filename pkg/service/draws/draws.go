// Package draws holds a draw sale's use cases: for its buyers, enter the
// draw, read one's entry, read the draw's published record; the run of the
// draw (Run), its ranking inside the store's transaction; and, once the
// sale ended, telling each alternate left without an order that it was not
// selected (Settle). The consumer runs the draws and settles them (ADR 6).
package draws

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// Store is MySQL as the draw's use cases use it (*orderdb.Draws).
type Store interface {
	Enter(ctx context.Context, e draw.NewEntry) (draw.BuyerEntry, bool, error)
	EntryOf(ctx context.Context, activity int64, user string) (draw.BuyerEntry, error)
	// DrawHead is the published record but its entries, and how many
	// the draw ranked; DrawRanking gives its entries, a page at a time.
	DrawHead(ctx context.Context, activity int64) (draw.Record, int64, error)
	DrawRanking(ctx context.Context, activity int64, each func([]draw.Ranked) error) error
	// RunDrawWith is the run's unit of work: one transaction that freezes
	// the list, reads the entries and the stock, ranks them with the given
	// ranker, and records the ranking, each entry owed its first event.
	RunDrawWith(ctx context.Context, activity int64, now time.Time, pick draw.Ranker) (draw.Drawn, error)
	// Unannounced takes, in the unit, the next page of the ranking whose
	// entries are owed their first event, and counts it on them.
	Unannounced(ctx context.Context, activity int64, after, limit int) ([]draw.Picked, error)
	// NotSelected marks, in the unit, the next page of the alternates
	// that the sale's end left without an order (none before the end).
	NotSelected(ctx context.Context, activity int64, now time.Time, after, limit int) (draw.Ended, error)
	// SettleDraw records that every alternate had its last event, unless
	// one has not yet, and says whether it did.
	SettleDraw(ctx context.Context, activity int64) (bool, error)
	// WriteEntries writes accepted entries, each sale's batch in one
	// transaction that only an OPEN draw takes.
	WriteEntries(ctx context.Context, entries []draw.EntryEvent) (draw.Written, error)
}

// Events is the outbox (*orderdb.Outbox): Announce writes each entry's
// outcome (entry.won, entry.alternate) in the unit that counts it, the end each
// alternate's entry.not_selected in the unit that marks it.
type Events interface {
	Record(ctx context.Context, evs ...outbox.Event) error
}

// Service runs the use cases; Now is the shared clock.
type Service struct {
	// Tx is the unit of work an entry and a run are written in, the run
	// with its events.
	Tx     unit.Work
	Store  Store
	Events Events
	Now    func() time.Time

	// Summaries serve the sale page (summary.go).
	Summaries Summaries

	// Accepting is the api's path of entries through Redis and Kafka
	// (accept.go); nil: each entry is written to MySQL in its own
	// transaction (ADR 6).
	Accepting *Accepting
}

// Enter records user's entry in draw sale a, for itemID (0: the sale's
// only item) and qty units, and says whether it is new: entering again
// answers the entry made before, unchanged, so a retry is safe whatever
// became of the first answer, also after the entries closed. A
// code_required sale takes entries only with a presale code (code, as the
// buyer typed it), whose use a new entry holds; addr is the client's
// address bucket its invalid codes are counted under (codes.go).
func (s *Service) Enter(ctx context.Context, a activity.Activity, user string, itemID int64, qty int, code, addr string) (e draw.BuyerEntry, created bool, err error) {
	if err := a.CheckQuantity(qty); err != nil {
		return e, false, err
	}
	digest, err := s.accessCode(ctx, a, user, code, addr)
	if err != nil {
		return e, false, err
	}
	chosen, err := a.ChooseItem(itemID)
	if err != nil {
		return e, false, err
	}
	now := s.Now()
	if !a.EntriesOpenAt(now) {
		// A retry after the close still finds the entry it made: MySQL's,
		// or one Redis took before the close, published again.
		if e, err := s.Store.EntryOf(ctx, a.ID, user); err == nil {
			return e, false, nil
		}
		if s.Accepting != nil {
			if got, err := s.acceptedBeforeDraw(ctx, a, user); err == nil {
				e, err = s.publish(ctx, a, user, got)
				return e, false, err
			}
		}
		return e, false, order.Errorf(order.ErrActivityNotActive, "the draw takes entries from %s until %s",
			a.StartsAt.UTC().Format(time.RFC3339), a.Draw.EntriesCloseAt.UTC().Format(time.RFC3339))
	}
	if s.Accepting != nil {
		return s.accept(ctx, a, user, addr, chosen, qty, now, digest)
	}
	if digest != "" {
		return e, false, errors.New("draws: a sale with codes takes entries through Redis only (Service.Accepting)")
	}
	err = s.Tx.InTx(ctx, func(ctx context.Context) (err error) {
		e, created, err = s.Store.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: user, ItemID: chosen.ItemID, Quantity: qty, At: now})
		return err
	})
	return e, created, err
}

// Entry is user's entry in draw sale a and what became of it.
func (s *Service) Entry(ctx context.Context, a activity.Activity, user string) (draw.BuyerEntry, error) {
	e, err := s.Store.EntryOf(ctx, a.ID, user)
	if errors.Is(err, order.ErrNotFound) && s.Accepting != nil {
		e, err = s.onItsWay(ctx, a, user)
	}
	if errors.Is(err, order.ErrNotFound) {
		err = order.Errorf(order.ErrNotFound, "you have not entered this draw")
	}
	return e, err
}

// Run draws sale activityID at now, exactly once (Draw), then writes
// every entry's outcome, entry.won or entry.alternate (Announce).
func (s *Service) Run(ctx context.Context, activityID int64, now time.Time) (draw.Drawn, error) {
	drawn, err := s.Draw(ctx, activityID, now)
	if err != nil || !drawn.Ran {
		return drawn, err
	}
	for {
		_, done, err := s.Announce(ctx, activityID, announcePages)
		if err != nil || done {
			return drawn, err
		}
	}
}

// Draw draws sale activityID at now, exactly once, inside the store's
// transaction: the ranking is draw.Pick's, and a second run, or one before
// the entries closed, does nothing (Drawn.Ran false). Every entry of the
// ranking is then owed its first event, which Announce writes: a million
// of them in the draw's transaction would double its time, and the
// winners' orders wait for the draw, not for the events.
func (s *Service) Draw(ctx context.Context, activityID int64, now time.Time) (draw.Drawn, error) {
	drawn, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (draw.Drawn, error) {
		return s.Store.RunDrawWith(ctx, activityID, now, draw.Pick)
	})
	if err != nil {
		// The unit's commit too: its answer lost, the run may have happened.
		return drawn, fmt.Errorf("draw activity %d: %w", activityID, err)
	}
	return drawn, nil
}

// announcePage is how many entries' outcomes one unit of Announce writes,
// and announcePages how many units a call runs at most.
const (
	announcePage  = 2000
	announcePages = 50
)

// Announce writes the first event of the entries of drawn sale activityID
// that are owed it (entry.won or entry.alternate, seq 1), a page in each
// unit with the count of it on the entries' ranking rows, so each entry
// has it once however many run Announce, however often and at once; a
// unit that rolled back, or whose answer was lost, leaves its page to the
// next call. It runs pages units at most and returns how many events it
// wrote and whether none is owed any more. No other event of an entry can
// come before it: the alternates get no order, and no entry.not_selected,
// until it is done (the drawer's pass, Settle).
func (s *Service) Announce(ctx context.Context, activityID int64, pages int) (n int, done bool, err error) {
	after := 0
	for range pages {
		page, err := unit.Do(ctx, s.Tx, func(ctx context.Context) ([]draw.Picked, error) {
			page, err := s.Store.Unannounced(ctx, activityID, after, announcePage)
			if err != nil || len(page) == 0 {
				return page, err
			}
			evs := make([]outbox.Event, len(page))
			for i, p := range page {
				evs[i] = outbox.Drawn(activityID, p)
			}
			return page, s.Events.Record(ctx, evs...)
		})
		if err != nil {
			return n, false, fmt.Errorf("announce the draw of activity %d: %w", activityID, err)
		}
		if len(page) == 0 {
			return n, true, nil
		}
		n += len(page)
		after = page[len(page)-1].Rank
	}
	return n, false, nil
}

// settlePage is how many alternates one unit of Settle marks, and
// settlePages how many units one call runs at most.
const (
	settlePage  = 500
	settlePages = 20
)

// Settled is what a Settle did.
type Settled struct {
	// NotSelected counts the entry.not_selected events written.
	NotSelected int
	// Done: every alternate of the sale has had its last event
	// (entry.promoted or entry.not_selected); the draw is settled.
	Done bool
}

// Settle ends the draw of sale activityID for its alternates once the sale
// ended (at now, or was cancelled): each alternate its end left without an
// order (none given, or the last one FAILED) gets entry.not_selected, its
// last event, with the end's reason (SALE_ENDED, SALE_CANCELLED). Each page
// of them is marked in MySQL and has its events written in one unit, so
// an alternate has it exactly once whoever runs Settle, however often and
// at once: a retry after a lost answer, or a unit that rolled back, finds
// the ones left. An alternate whose order is still on its way to MySQL is
// left until that order is written: CREATED, it is promoted (fulfilment);
// FAILED, a later Settle finds it. A call runs settlePages units at most;
// Done says the draw is settled (a sale not ended yet does nothing).
func (s *Service) Settle(ctx context.Context, activityID int64, now time.Time) (Settled, error) {
	var out Settled
	// An alternate's last event comes after its first.
	if _, done, err := s.Announce(ctx, activityID, settlePages); err != nil || !done {
		return out, err
	}
	after := 0
	for range settlePages {
		page, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (draw.Ended, error) {
			page, err := s.Store.NotSelected(ctx, activityID, now, after, settlePage)
			if err != nil || len(page.Picks) == 0 {
				return page, err
			}
			evs := make([]outbox.Event, len(page.Picks))
			for i, p := range page.Picks {
				evs[i] = outbox.NotSelected(p, page.Reason)
			}
			return page, s.Events.Record(ctx, evs...)
		})
		if err != nil {
			// The unit's commit too: its answer lost, the page may be
			// marked; the next call finds what is left.
			return out, fmt.Errorf("settle the draw of activity %d: %w", activityID, err)
		}
		out.NotSelected += len(page.Picks)
		if page.Reason == "" {
			return out, nil // not ended
		}
		if page.Last == 0 {
			done, err := s.Store.SettleDraw(ctx, activityID)
			if err != nil {
				return out, fmt.Errorf("settle the draw of activity %d: %w", activityID, err)
			}
			out.Done = done
			return out, nil
		}
		after = page.Last
	}
	return out, nil
}

// RecordHead is draw sale a's published record but its entries, and how
// many entries it lists: the commitment, and once drawn everything
// draw.Verify recomputes but the entries (RecordEntries). Its state is the
// one buyers see: an OPEN draw is CLOSED from entries_close_at (its list
// is then frozen, and the draw runs within seconds) or once the sale
// ended. A DRAWN record never changes.
func (s *Service) RecordHead(ctx context.Context, a activity.Activity) (draw.Record, int64, error) {
	rec, n, err := s.Store.DrawHead(ctx, a.ID)
	if err != nil {
		return rec, 0, err
	}
	rec.State = State(rec.State, a, s.Now())
	return rec, n, nil
}

// RecordEntries gives each page of drawn sale a's record's entries, in
// ranking order, to each as it is read: a record of a million entries is
// never held whole. The page is reused once each returns.
func (s *Service) RecordEntries(ctx context.Context, a activity.Activity, each func([]draw.Ranked) error) error {
	return s.Store.DrawRanking(ctx, a.ID, each)
}

// State is the state buyers see of a draw MySQL has in state.
func State(state string, a activity.Activity, now time.Time) string {
	if state == draw.StateOpen && (!now.Before(a.Draw.EntriesCloseAt) || !a.ActiveAt(now) && !now.Before(a.StartsAt)) {
		return draw.StateClosed
	}
	return state
}
