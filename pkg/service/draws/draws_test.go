package draws_test

import (
	"context"
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
		if _, created, err := s.Enter(ctx, a, strconv.Itoa(u), 0, 1); err != nil || !created {
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
