package draws_test

import (
	"context"
	"errors"
	"github.com/seckill/seckill/pkg/domain/order"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/draws"
)

// The service runs the draw in the store's transaction: once, with the
// entries taken before the close, and a record that verifies.
func TestRunDrawsOnce(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	a, closes := db.OpenDraw(t, 2, now)
	s := &draws.Service{Tx: db, Store: db.Draws, Events: db.Outbox, Now: func() time.Time { return now }}
	for u := range 5 {
		if _, created, err := s.Enter(ctx, a, strconv.Itoa(u), 0, 1, "", ""); err != nil || !created {
			t.Fatalf("enter %d: created %v, %v", u, created, err)
		}
	}
	if res, err := s.Run(ctx, a.ID, closes.Add(-time.Millisecond)); err != nil || res.Ran {
		t.Fatalf("a run before the close: %+v, %v; want nothing done", res, err)
	}
	// Three drawers at once: one runs it.
	runs := make([]draw.Drawn, 3)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			var err error
			if runs[i], err = s.Run(ctx, a.ID, closes); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ran := 0
	for _, res := range runs {
		if res.Ran {
			ran++
			if res.Entries != 5 || res.Winners != 2 {
				t.Fatalf("the run: %+v; want 5 entries, 2 winners", res)
			}
		}
	}
	if ran != 1 {
		t.Fatalf("%d runs drew, want 1", ran)
	}
	if again, err := s.Run(ctx, a.ID, closes.Add(time.Second)); err != nil || again.Ran {
		t.Fatalf("a second run: %+v, %v; want nothing done", again, err)
	}
	rec, err := db.Draws.DrawRecord(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := draw.Verify(rec); err != nil {
		t.Fatalf("the record does not verify: %v", err)
	}
	// The run wrote each entry's outcome as its first event, with it.
	ranked, err := db.Draws.Results(ctx, a.ID)
	if err != nil || len(ranked) != 5 {
		t.Fatalf("results %v, %v", ranked, err)
	}
	won := 0
	for _, p := range ranked {
		evs, err := db.Outbox.Stream(ctx, "entry_"+p.EntryID)
		if err != nil {
			t.Fatal(err)
		}
		want := outbox.EntryAlternate
		if p.Outcome == draw.Won {
			want, won = outbox.EntryWon, won+1
		}
		if len(evs) != 1 || evs[0].Type != want || evs[0].Data.Seq != 1 || evs[0].Data.Subject != p.UserID ||
			evs[0].Data.Rank != p.Rank || evs[0].Data.SaleID != a.ID || evs[0].Data.EntryID != p.EntryID {
			t.Fatalf("entry %+v: events %+v", p, evs)
		}
	}
	if won != 2 {
		t.Fatalf("%d entry.won events, want 2", won)
	}
}

// The draw commits with every entry owed its outcome; Announce writes
// each one's entry.won or entry.alternate once (seq 1), however many run
// it at once, and a unit that rolled back leaves its page owed. Until
// then an entry numbers no later event, which would come before it.
func TestAnnounceWritesEachOutcomeOnce(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	a, closes := db.OpenDraw(t, 3, now)
	s := &draws.Service{Tx: db, Store: db.Draws, Events: db.Outbox, Now: func() time.Time { return now }}
	const entrants = 40
	for u := range entrants {
		if _, _, err := s.Enter(ctx, a, strconv.Itoa(u), 0, 1, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := s.Draw(ctx, a.ID, closes); err != nil || res.Entries != entrants {
		t.Fatalf("the draw: %+v, %v", res, err)
	}
	count := func() (events, owed int64) {
		t.Helper()
		g := db.Gorm()
		if err := g.Raw("SELECT COUNT(*) FROM outbox_events WHERE type IN ('entry.won', 'entry.alternate')").Scan(&events).Error; err != nil {
			t.Fatal(err)
		}
		if err := g.Raw("SELECT COUNT(*) FROM draw_results WHERE activity_id = ? AND event_seq <> 1", a.ID).Scan(&owed).Error; err != nil {
			t.Fatal(err)
		}
		return events, owed
	}
	if events, owed := count(); events != 0 || owed != entrants {
		t.Fatalf("after the draw: %d outcomes written, %d owed; want 0 and %d", events, owed, entrants)
	}
	ranking, err := db.Draws.Results(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	err = db.InTx(ctx, func(ctx context.Context) error {
		return db.Outbox.Record(ctx, outbox.NotSelected(ranking[entrants-1], order.ReasonSaleEnded))
	})
	if !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("a later event of an entry owed its outcome: %v, want it refused", err)
	}

	failing := *s
	failing.Events = failingEvents{db}
	if n, done, err := failing.Announce(ctx, a.ID, 1); err == nil || n != 0 || done {
		t.Fatalf("an Announce whose unit fails: %d, %v, %v", n, done, err)
	}
	if events, owed := count(); events != 0 || owed != entrants {
		t.Fatalf("after a unit rolled back: %d outcomes written, %d owed; want 0 and %d", events, owed, entrants)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, _, err := s.Announce(ctx, a.ID, 10); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if events, owed := count(); events != entrants || owed != 0 {
		t.Fatalf("after three at once: %d outcomes written, %d owed; want %d and 0", events, owed, entrants)
	}
	if n, done, err := s.Announce(ctx, a.ID, 1); n != 0 || !done || err != nil {
		t.Fatalf("Announce again: %d, %v, %v; want nothing, done", n, done, err)
	}
	for _, p := range ranking {
		evs, err := db.Outbox.Stream(ctx, "entry_"+p.EntryID)
		want := outbox.EntryAlternate
		if p.Outcome == draw.Won {
			want = outbox.EntryWon
		}
		if err != nil || len(evs) != 1 || evs[0].Type != want || evs[0].Data.Seq != 1 || evs[0].Data.Rank != p.Rank {
			t.Fatalf("entry %s (rank %d): %+v, %v", p.EntryID, p.Rank, evs, err)
		}
	}
}
