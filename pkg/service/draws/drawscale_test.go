//go:build scale

package draws_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/heaptest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/service/draws"
)

// bell is the bench's draw scenario's stock: 1,000 units over 5 sizes in
// a bell shape (bench's bellStock(1000, 5)); the entrants want the sizes
// in the same shape.
var bell = []int64{93, 241, 332, 241, 93}

// A draw of 1,000,000 entrants over 5 sizes, their entries written into
// MySQL as the entries' consumer leaves them, is run as the drawer runs it
// (draws.Service.Draw on the real MySQL), then every entry's outcome is
// written to the outbox (Announce, the drawer's later passes): every entry
// is ranked, each has its first event, and the record verifies. It reports
// the time and peak heap of each; the goal of issue 44 is drawn,
// and every winner's order CREATED, within 60 s of the close (the whole
// pipeline: e2e's TestDrawAtScale). Slow, so behind the scale tag:
//
//	go test -tags scale -count=1 -timeout 30m -v -run TestRunDrawAtScale ./pkg/service/draws/
func TestRunDrawAtScale(t *testing.T) {
	const entrants = 1_000_000
	db := mysqltest.New(t)
	ctx := context.Background()
	closes := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	a := db.OpenSizedDraw(t, closes, bell...)
	t.Logf("wrote %d entries in %.1f s", entrants, db.SeedEntries(t, a, entrants, bell).Seconds())

	s := &draws.Service{Tx: db, Store: db.Draws, Events: db.Outbox, Now: time.Now}
	peak, start := heaptest.Start(), time.Now()
	res, err := s.Draw(ctx, a.ID, closes)
	took := time.Since(start)
	heap, total := peak.End()
	if err != nil || !res.Ran || res.Entries != entrants {
		t.Fatalf("the draw: %+v, %v; want %d entries drawn", res, err, entrants)
	}
	t.Logf("drew %d entries (%d won) in %.1f s, peak heap %.0f MiB (Go runtime mapped %.0f MiB)",
		res.Entries, res.Winners, took.Seconds(), heap, total)
	peak, start = heaptest.Start(), time.Now()
	announced := 0
	for done := false; !done; {
		n, d, err := s.Announce(ctx, a.ID, 25)
		if err != nil {
			t.Fatal(err)
		}
		announced, done = announced+n, d
	}
	took = time.Since(start)
	heap, _ = peak.End()
	if announced != entrants {
		t.Fatalf("%d outcomes written, want %d", announced, entrants)
	}
	t.Logf("then wrote the %d entries' outcomes (entry.won, entry.alternate) in %.1f s, peak heap %.0f MiB", announced, took.Seconds(), heap)

	var ranked, events int64
	if err := db.Gorm().Raw("SELECT COUNT(*) FROM draw_results WHERE activity_id = ?", a.ID).Scan(&ranked).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm().Raw("SELECT COUNT(*) FROM outbox_events WHERE type IN ('entry.won', 'entry.alternate') AND seq = 1").Scan(&events).Error; err != nil {
		t.Fatal(err)
	}
	if ranked != entrants || events != entrants {
		t.Fatalf("%d ranking rows and %d first events; want %d of each", ranked, events, entrants)
	}
	rec, _, err := db.Draws.DrawHead(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	v := draw.NewVerifier()
	v.Head(rec)
	err = db.Draws.DrawRanking(ctx, a.ID, func(page []draw.Ranked) error {
		for _, e := range page {
			v.Add(e)
		}
		return nil
	})
	if got, won := v.Entries(); err != nil || v.Err() != nil || got != entrants || won != res.Winners {
		t.Fatalf("the record: %d entries, %d won (the run: %d): %v, %v", got, won, res.Winners, err, v.Err())
	}
}
