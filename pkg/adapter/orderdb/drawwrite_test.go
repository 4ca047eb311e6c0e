package orderdb_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
)

func entryEvent(a activity.Activity, user string, size int, at time.Time) draw.EntryEvent {
	return draw.EventOf(a.ID, user, draw.Accepted{Entry: draw.Entry{ID: draw.EntryIDFor([]byte("k"), a.ID, user),
		ItemID: a.Items[size%len(a.Items)].ItemID, Quantity: 1}, At: at})
}

// Batches of entries written while the draw runs: the ranking has exactly
// the entries of the batches that committed before it (counted New), the
// draw's count matches, and every batch after it wrote none (Late). A
// batch written again (a consumer that redelivers) finds its entries
// Known and counts nothing twice.
func TestWriteEntriesBatchesFreezeExactly(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	closes := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	a := drawSale(t, db, closes, 5, 5, 5)
	at := closes.Add(-time.Millisecond)
	var (
		written, late, next atomic.Int64
		wg                  sync.WaitGroup
		stop                = make(chan struct{})
	)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				batch := make([]draw.EntryEvent, 50)
				for i := range batch {
					u := next.Add(1)
					batch[i] = entryEvent(a, strconv.FormatInt(u, 10), int(u), at)
				}
				w, err := db.Draws.WriteEntries(ctx, batch)
				if err != nil {
					t.Error(err)
					return
				}
				if w.New+w.Late != len(batch) || w.New != 0 && w.Late != 0 {
					t.Errorf("a batch of one sale split: %+v", w)
				}
				written.Add(int64(w.New))
				late.Add(int64(w.Late))
				// Redelivered: nothing new.
				if again, err := db.Draws.WriteEntries(ctx, batch); err != nil || again.New != 0 {
					t.Errorf("the batch again: %+v, %v", again, err)
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	res, err := db.Draws.RunDrawWith(ctx, a.ID, closes, draw.Pick)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if !res.Ran || int64(res.Entries) != written.Load() || late.Load() == 0 || written.Load() == 0 {
		t.Fatalf("the draw took %d entries (ran %v); %d were written, %d late", res.Entries, res.Ran, written.Load(), late.Load())
	}
	var inTable int64
	db.Gorm().Raw("SELECT COUNT(*) FROM draw_entries WHERE activity_id = ?", a.ID).Scan(&inTable)
	sum, _ := db.Draws.DrawSummary(ctx, a.ID)
	if inTable != written.Load() || sum.Entries != inTable {
		t.Fatalf("%d written, %d in the table, %d counted", written.Load(), inTable, sum.Entries)
	}
}

// MySQL's row of the sale is the last word on the window: an entry taken
// before the start, at the close or after it, or after a cancel, is Late,
// whatever Redis took; a buyer's second entry is Known and the first kept.
func TestWriteEntriesKeepsMySQLsWindow(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	closes := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	a := drawSale(t, db, closes, 5, 5)
	in := entryEvent(a, "in", 0, a.StartsAt)
	second := entryEvent(a, "in", 1, a.StartsAt.Add(time.Second))
	w, err := db.Draws.WriteEntries(ctx, []draw.EntryEvent{
		entryEvent(a, "early", 0, a.StartsAt.Add(-time.Millisecond)), in,
		entryEvent(a, "at-close", 0, closes), entryEvent(a, "last", 0, closes.Add(-time.Millisecond)), second})
	if err != nil || w.New != 2 || w.Known != 1 || w.Late != 2 || !slices.Equal(w.IsLate, []bool{true, false, true, false, false}) {
		t.Fatalf("written %+v, %v; want 2 new, 1 known, 2 late (the first and the third)", w, err)
	}
	got, err := db.Draws.EntryOf(ctx, a.ID, "in")
	if err != nil || got.ID != in.EntryID || got.ItemID != in.ItemID {
		t.Fatalf("in's entry: %+v, %v; want the first, size %d", got, err, in.ItemID)
	}
	if sum, _ := db.Draws.DrawSummary(ctx, a.ID); sum.Entries != 2 {
		t.Fatalf("counted %d, want 2", sum.Entries)
	}
	// Cancelled now: an entry an instance took a moment later, by a copy
	// of the sale from before the cancel, is not written.
	cancelled := time.Now().UTC()
	if _, err := db.Activities.EndActivity(ctx, a.ID, cancelled, activity.CancelNow); err != nil {
		t.Fatal(err)
	}
	// With another sale's entries in the batch, each sale by its own row.
	b := drawSale(t, db, closes, 5)
	w, err = db.Draws.WriteEntries(ctx, []draw.EntryEvent{entryEvent(b, "x", 0, b.StartsAt), entryEvent(a, "after-cancel", 0, cancelled.Add(time.Millisecond)),
		entryEvent(b, "y", 0, b.StartsAt)})
	if err != nil || w.Late != 1 || w.New != 2 || !slices.Equal(w.IsLate, []bool{false, true, false}) {
		t.Fatalf("after the cancel: %+v, %v; want a's entry late, b's two new", w, err)
	}
}
