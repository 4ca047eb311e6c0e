package orderdb_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// A database whose draws ran before 0020 counts each entry's events from
// what the outbox holds of it: 1 for a draw that wrote its entries'
// outcomes (since 0018), none for one before; each entry's next event
// follows. A ranking row written without the column, as a program of the
// version before does during a rolling upgrade, counts its first event.
func TestMigrationCountsTheEntriesEvents(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	now := time.Now()
	run := func(withEvents bool) []draw.Picked {
		t.Helper()
		a := drawSale(t, db, now.Add(time.Minute), 1)
		for u := range 3 {
			if _, _, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: strconv.Itoa(u), ItemID: a.ItemID, Quantity: 1, At: now}); err != nil {
				t.Fatal(err)
			}
		}
		err := db.InTx(ctx, func(ctx context.Context) error {
			if _, err := db.Draws.RunDrawWith(ctx, a.ID, now.Add(time.Minute), draw.Pick); err != nil {
				return err
			}
			if !withEvents {
				return nil
			}
			ranked, err := db.Draws.Unannounced(ctx, a.ID, 0, 10)
			if err != nil {
				return err
			}
			for _, p := range ranked {
				if err := db.Outbox.Record(ctx, outbox.Drawn(a.ID, p)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ranked, err := db.Draws.Results(ctx, a.ID)
		if err != nil || len(ranked) != 3 {
			t.Fatalf("ranking %v, %v", ranked, err)
		}
		return ranked
	}
	since0018, before0018 := run(true), run(false)
	g := db.Gorm().WithContext(ctx)
	for _, q := range []string{
		"ALTER TABLE draw_results DROP KEY idx_draw_results_open, DROP COLUMN not_selected, DROP COLUMN event_seq",
		"ALTER TABLE activity_draws DROP COLUMN settled_at",
		"DELETE FROM schema_migrations WHERE version = '0020_entry_events'",
	} {
		if err := g.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	next := func(p draw.Picked) int {
		t.Helper()
		err := db.InTx(ctx, func(ctx context.Context) error {
			return db.Outbox.Record(ctx, outbox.NotSelected(p, order.ReasonSaleEnded))
		})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := db.Outbox.Stream(ctx, "entry_"+p.EntryID)
		if err != nil || len(evs) == 0 {
			t.Fatalf("entry %s: %v, %v", p.EntryID, evs, err)
		}
		return evs[len(evs)-1].Data.Seq
	}
	if seq := next(since0018[2]); seq != 2 {
		t.Fatalf("an entry whose outcome the outbox holds: its next event is seq %d, want 2", seq)
	}
	if seq := next(before0018[2]); seq != 1 {
		t.Fatalf("an entry of a draw before the outbox: its next event is seq %d, want 1", seq)
	}
	var seq int
	p := since0018[0]
	if err := g.Exec("DELETE FROM draw_results WHERE entry_id = ?", p.EntryID).Error; err != nil {
		t.Fatal(err)
	}
	if err := g.Exec(`INSERT INTO draw_results (activity_id, draw_rank, entry_id, item_id, quantity, user_id, outcome)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, p.ActivityID, p.Rank, p.EntryID, p.ItemID, p.Quantity, p.UserID, p.Outcome).Error; err != nil {
		t.Fatal(err)
	}
	if err := g.Raw("SELECT event_seq FROM draw_results WHERE entry_id = ?", p.EntryID).Scan(&seq).Error; err != nil || seq != 1 {
		t.Fatalf("a row written as the version before writes it: event_seq %d (%v), want 1", seq, err)
	}
}
