package orderdb_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
)

// drawSale makes a draw sale of len(stocks) sizes, started a minute ago,
// whose entries close at closes.
func drawSale(t *testing.T, db *mysqltest.DB, closes time.Time, stocks ...int64) activity.Activity {
	t.Helper()
	return db.OpenSizedDraw(t, closes, stocks...)
}

func TestDrawSaleReadsBack(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	closes := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	a := drawSale(t, db, closes, 3, 4)
	got, err := db.Activities.Activity(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Draw.EntriesCloseAt.Equal(closes) || got.Draw.Seed != a.Draw.Seed || got.Mode() != activity.ModeDraw || len(got.Items) != 2 {
		t.Fatalf("read back %+v, want the draw closing at %v with its seed", got.Draw, closes)
	}
	sum, err := db.Draws.DrawSummary(context.Background(), a.ID)
	if err != nil || sum.State != draw.StateOpen || sum.Entries != 0 {
		t.Fatalf("summary %+v, %v", sum, err)
	}
}

// Entrants keep entering while the draw runs: the ranking has exactly the
// entries that committed (every one the api answered 201 for), the count
// matches, and every entry after that was refused, none half written.
func TestDrawFreezesTheListExactly(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	closes := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	a := drawSale(t, db, closes, 5, 5, 5)
	var (
		accepted, refused atomic.Int64
		next              atomic.Int64
		wg                sync.WaitGroup
		stop              = make(chan struct{})
	)
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				u := next.Add(1)
				// The api's clock says the entries are still open; the
				// draw's, that they closed: the lock decides.
				_, created, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: strconv.FormatInt(u, 10),
					ItemID: a.Items[u%3].ItemID, Quantity: 1 + int(u%2), At: closes.Add(-time.Millisecond)})
				switch {
				case errors.Is(err, order.ErrActivityNotActive):
					refused.Add(1)
					if refused.Load() > 50 {
						return
					}
				case err != nil:
					t.Errorf("enter %d: %v", u, err)
					return
				case created:
					accepted.Add(1)
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
	if !res.Ran || int64(res.Entries) != accepted.Load() || refused.Load() == 0 {
		t.Fatalf("the draw took %d entries (ran %v); %d were accepted, %d refused", res.Entries, res.Ran, accepted.Load(), refused.Load())
	}
	var inTable, inRanking int64
	g := db.Gorm()
	g.Raw("SELECT COUNT(*) FROM draw_entries WHERE activity_id = ?", a.ID).Scan(&inTable)
	g.Raw("SELECT COUNT(*) FROM draw_results WHERE activity_id = ?", a.ID).Scan(&inRanking)
	sum, _ := db.Draws.DrawSummary(ctx, a.ID)
	if inTable != accepted.Load() || inRanking != inTable || sum.Entries != inTable || sum.State != draw.StateDrawn {
		t.Fatalf("entries: %d accepted, %d in the table, %d ranked, %d counted (%s)", accepted.Load(), inTable, inRanking, sum.Entries, sum.State)
	}
	rec, err := db.Draws.DrawRecord(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := draw.Verify(rec); err != nil {
		t.Fatalf("the record does not verify: %v", err)
	}
	won := map[int64]int64{}
	for _, e := range rec.Entries {
		if e.Outcome == draw.Won {
			won[e.ItemID] += int64(e.Quantity)
		}
	}
	for _, it := range a.Items {
		if won[it.ItemID] > 5 || won[it.ItemID] < 4 {
			t.Errorf("size %d: %d units won of 5", it.ItemID, won[it.ItemID])
		}
	}
	// Drawn once: another run does nothing.
	if again, err := db.Draws.RunDrawWith(ctx, a.ID, closes.Add(time.Second), draw.Pick); err != nil || again.Ran {
		t.Fatalf("a second draw: %+v, %v", again, err)
	}
}

// A draw is not run before its close, nor for a sale that ended or was
// cancelled first.
func TestDrawRunsOnlyWhenDue(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	closes := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	a := drawSale(t, db, closes, 2)
	if res, err := db.Draws.RunDrawWith(ctx, a.ID, closes.Add(-time.Millisecond), draw.Pick); err != nil || res.Ran {
		t.Fatalf("a draw before its close: %+v, %v", res, err)
	}
	due, err := db.Draws.DrawsDue(ctx, closes)
	if err != nil || len(due) != 1 || due[0] != a.ID {
		t.Fatalf("due at the close: %v, %v", due, err)
	}
	if _, err := db.Activities.EndActivity(ctx, a.ID, time.Now(), activity.CancelNow); err != nil {
		t.Fatal(err)
	}
	if due, err := db.Draws.DrawsDue(ctx, closes); err != nil || len(due) != 0 {
		t.Fatalf("a cancelled sale is still due: %v, %v", due, err)
	}
	if res, err := db.Draws.RunDrawWith(ctx, a.ID, closes, draw.Pick); err != nil || res.Ran {
		t.Fatalf("a cancelled sale drawn: %+v, %v", res, err)
	}
}

// An instance whose copy of the sale predates its end still asks MySQL:
// no entry is taken after an end or a cancel, whatever the copy says.
func TestEnterAfterTheSaleEndedIsRefused(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	for _, how := range []activity.Ending{activity.EndNow, activity.CancelNow} {
		a := drawSale(t, db, time.Now().Add(time.Minute), 2)
		if _, err := db.Activities.EndActivity(ctx, a.ID, time.Now(), how); err != nil {
			t.Fatal(err)
		}
		_, _, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: "late", ItemID: a.ItemID, Quantity: 1, At: time.Now()})
		if !errors.Is(err, order.ErrActivityNotActive) {
			t.Fatalf("an entry after the sale ended (ending %v): %v, want ErrActivityNotActive", how, err)
		}
		if sum, _ := db.Draws.DrawSummary(ctx, a.ID); sum.Entries != 0 {
			t.Fatalf("%d entries counted after the end", sum.Entries)
		}
	}
}

// Entering again returns the first entry unchanged, whatever the second
// request asks for; the count is one.
func TestEnterTwiceKeepsTheFirstEntry(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	a := drawSale(t, db, time.Now().Add(time.Minute), 2, 2)
	now := time.Now()
	first, created, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: "ann", ItemID: a.Items[0].ItemID, Quantity: 1, At: now})
	if err != nil || !created || !draw.ValidEntryID(first.ID) {
		t.Fatalf("first entry: %+v %v %v", first, created, err)
	}
	again, created, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: "ann", ItemID: a.Items[1].ItemID, Quantity: 2, At: now})
	if err != nil || created || again.ID != first.ID || again.ItemID != first.ItemID || again.Quantity != 1 {
		t.Fatalf("entering again: %+v %v %v; first %+v", again, created, err, first)
	}
	if sum, _ := db.Draws.DrawSummary(ctx, a.ID); sum.Entries != 1 {
		t.Fatalf("%d entries counted, want 1", sum.Entries)
	}
	// Buyer ids compare byte for byte: "Ann" is not "ann".
	other, created, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: "Ann", ItemID: a.Items[1].ItemID, Quantity: 1, At: now})
	if err != nil || !created || other.ID == first.ID {
		t.Fatalf("another buyer whose id differs in case: %+v %v %v", other, created, err)
	}
}

// The COMMIT of an entry reaches MySQL and its answer is lost: the retry
// finds the entry it made (not a second one), and the count is one.
func TestEnterLostCommitRetryFindsIt(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	p, via := proxiedOrderDB(t, db)
	ctx := context.Background()
	a := drawSale(t, db, time.Now().Add(time.Minute), 2)
	e := draw.NewEntry{ActivityID: a.ID, UserID: "bo", ItemID: a.ItemID, Quantity: 1, At: time.Now()}
	cutCommit(p)
	if _, _, err := via.Draws.Enter(ctx, e); err == nil {
		t.Fatal("the entry's answer was cut, yet Enter returned no error")
	}
	waitCutOver(t, via)
	got, created, err := via.Draws.Enter(ctx, e)
	if err != nil || created {
		t.Fatalf("retry: %+v created %v, %v; want the entry the lost commit made", got, created, err)
	}
	if sum, _ := db.Draws.DrawSummary(ctx, a.ID); sum.Entries != 1 {
		t.Fatalf("%d entries counted, want 1", sum.Entries)
	}
}

// The COMMIT of the draw reaches MySQL and its answer is lost: the next run
// finds it drawn and draws nothing again.
func TestRunDrawLostCommitDrawsOnce(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	p, via := proxiedOrderDB(t, db)
	ctx := context.Background()
	closes := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	a := drawSale(t, db, closes, 3)
	for u := range 12 {
		if _, _, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: strconv.Itoa(u), ItemID: a.ItemID, Quantity: 1, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	cutCommit(p)
	if _, err := via.Draws.RunDrawWith(ctx, a.ID, closes, draw.Pick); err == nil {
		t.Fatal("the draw's answer was cut, yet RunDrawWith returned no error")
	}
	waitCutOver(t, via)
	if res, err := via.Draws.RunDrawWith(ctx, a.ID, closes, draw.Pick); err != nil || res.Ran {
		t.Fatalf("the run after the lost commit: %+v, %v; want nothing left to draw", res, err)
	}
	rec, err := db.Draws.DrawRecord(ctx, a.ID)
	if err != nil || len(rec.Entries) != 12 {
		t.Fatalf("record of %d entries, %v", len(rec.Entries), err)
	}
	if err := draw.Verify(rec); err != nil {
		t.Fatal(err)
	}
}

// An entry is numbered for one order only; a number is taken back only
// from an alternate not yet issued.
func TestNumberPickKeepsTheFirstNumber(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	closes := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	a := drawSale(t, db, closes, 1)
	for _, u := range []string{"a", "b", "c"} {
		if _, _, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: u, ItemID: a.ItemID, Quantity: 1, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Draws.RunDrawWith(ctx, a.ID, closes, draw.Pick); err != nil {
		t.Fatal(err)
	}
	winners, err := db.Draws.WinnersWithoutOrders(ctx, a.ID, 10)
	if err != nil || len(winners) != 1 {
		t.Fatalf("winners %+v, %v", winners, err)
	}
	w := winners[0]
	if no, err := db.Draws.NumberPick(ctx, w.EntryID, "n1"); err != nil || no != "n1" {
		t.Fatalf("first number: %q %v", no, err)
	}
	if no, err := db.Draws.NumberPick(ctx, w.EntryID, "n2"); err != nil || no != "n1" {
		t.Fatalf("second number: %q %v, want the first kept", no, err)
	}
	if err := db.Draws.Unnumber(ctx, w.EntryID, "n1"); err != nil {
		t.Fatal(err)
	}
	if un, _ := db.Draws.Unissued(ctx, a.ID, 10); len(un) != 1 || un[0].OrderNo != "n1" {
		t.Fatalf("a winner's number was taken back: %+v", un)
	}
	alts, err := db.Draws.NextAlternates(ctx, a.ID, a.ItemID, 1, 10)
	if err != nil || len(alts) != 2 || alts[0].Rank > alts[1].Rank {
		t.Fatalf("alternates %+v, %v", alts, err)
	}
	if _, err := db.Draws.NumberPick(ctx, alts[0].EntryID, "n3"); err != nil {
		t.Fatal(err)
	}
	e, err := db.Draws.EntryOf(ctx, a.ID, alts[1].UserID)
	if err != nil || e.Outcome != draw.Alternate || e.AlternatesBefore != 0 {
		t.Fatalf("the second alternate with the first numbered: %+v, %v", e, err)
	}
	if err := db.Draws.Unnumber(ctx, alts[0].EntryID, "n3"); err != nil {
		t.Fatal(err)
	}
	if e, _ := db.Draws.EntryOf(ctx, a.ID, alts[1].UserID); e.AlternatesBefore != 1 {
		t.Fatalf("the second alternate once the first waits again: %+v", e)
	}
	if err := db.Draws.MarkIssued(ctx, w.EntryID, "n1"); err != nil {
		t.Fatal(err)
	}
	if un, _ := db.Draws.Unissued(ctx, a.ID, 10); len(un) != 0 {
		t.Fatalf("issued picks still listed: %+v", un)
	}
}

// A record longer than a page reads whole, in rank order, and verifies;
// each alternate's place in line counts its size's alternates only.
func TestDrawRecordReadsPageByPage(t *testing.T) {
	db := mysqltest.New(t)
	ctx := context.Background()
	closes := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	a := drawSale(t, db, closes, 2, 3)
	for u := range 25 {
		if _, _, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: strconv.Itoa(u), ItemID: a.Items[u%2].ItemID, Quantity: 1, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Draws.RunDrawWith(ctx, a.ID, closes, draw.Pick); err != nil {
		t.Fatal(err)
	}
	defer orderdb.SetRecordPage(10)()
	rec, err := db.Draws.DrawRecord(ctx, a.ID)
	if err != nil || len(rec.Entries) != 25 {
		t.Fatalf("record of %d entries, %v; want 25", len(rec.Entries), err)
	}
	if err := draw.Verify(rec); err != nil {
		t.Fatal(err)
	}
	place := map[int64]int64{}
	for _, e := range rec.Entries {
		if e.Outcome != draw.Alternate {
			continue
		}
		place[e.ItemID]++
		var user string
		db.Gorm().Raw("SELECT user_id FROM draw_results WHERE entry_id = ?", e.ID).Scan(&user)
		got, err := db.Draws.EntryOf(ctx, a.ID, user)
		if err != nil || got.AlternatesBefore != place[e.ItemID]-1 {
			t.Fatalf("alternate %s of size %d: %d before it, want %d (%v)", e.ID, e.ItemID, got.AlternatesBefore, place[e.ItemID]-1, err)
		}
	}
}

// laterDrawSale makes a draw sale of one item that starts at start, runs
// an hour, and whose entries close half an hour in.
func laterDrawSale(t *testing.T, db *mysqltest.DB, start time.Time) activity.Activity {
	t.Helper()
	ctx := context.Background()
	it, err := db.Activities.CreateItem(ctx, "sneaker", 3)
	if err != nil {
		t.Fatal(err)
	}
	a, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: start, EndsAt: start.Add(time.Hour), PerUserLimit: 1,
		Draw: activity.Draw{EntriesCloseAt: start.Add(30 * time.Minute), Seed: draw.NewSeed()}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A change of the sale keeps entries_close_at between its start and end,
// the payment window before the end.
func TestPatchKeepsTheDrawWithinTheSale(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	start := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	a := laterDrawSale(t, db, start)
	for _, ch := range []activity.Patch{
		{EndsAt: ptrTo(start.Add(20 * time.Minute))},
		{StartsAt: ptrTo(start.Add(40 * time.Minute))},
		{StockBuckets: ptrTo(2)},
		{EndsAt: ptrTo(start.Add(40 * time.Minute)), PaymentWindow: 15 * time.Minute},
	} {
		if _, err := db.Activities.PatchActivity(ctx, a.ID, ch, time.Now()); !errors.Is(err, order.ErrInvalidArgument) {
			t.Errorf("change %+v: %v, want ErrInvalidArgument", ch, err)
		} else {
			t.Log(err)
		}
	}
	if _, err := db.Activities.PatchActivity(ctx, a.ID, activity.Patch{EndsAt: ptrTo(start.Add(2 * time.Hour))}, time.Now()); err != nil {
		t.Fatalf("a later end: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// An instance whose copy of the sale says it started, while MySQL's row
// says it starts later (a start moved later since the copy was read), takes
// no entry before MySQL's start.
func TestEnterBeforeTheSaleStartedIsRefused(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	start := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	a := laterDrawSale(t, db, start)
	_, _, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: "early", ItemID: a.ItemID, Quantity: 1, At: time.Now()})
	if !errors.Is(err, order.ErrActivityNotActive) || !strings.Contains(err.Error(), "starts at") {
		t.Fatalf("an entry before MySQL's start: %v, want ErrActivityNotActive naming the start", err)
	}
	if sum, _ := db.Draws.DrawSummary(ctx, a.ID); sum.Entries != 0 {
		t.Fatalf("%d entries counted before the start", sum.Entries)
	}
	var rows int64
	if err := db.Gorm().Raw("SELECT COUNT(*) FROM draw_entries WHERE activity_id = ?", a.ID).Scan(&rows).Error; err != nil || rows != 0 {
		t.Fatalf("%d entry rows written before the start (%v)", rows, err)
	}
	if _, _, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: "on time", ItemID: a.ItemID, Quantity: 1, At: start}); err != nil {
		t.Fatalf("an entry at the start: %v", err)
	}
}

// MySQL holds the draw's commitment apart from its seed, as SHA-256 of the
// seed the sale was made with, and refuses a change of either, whoever
// asks: before the first entry and after it. The record publishes the
// stored commitment.
func TestDrawCommitmentIsFixedInMySQL(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	a := drawSale(t, db, time.Now().Add(time.Minute), 2)
	want := a.Draw.Seed
	commitment := draw.Seed(want).Commitment()
	g := db.Gorm().WithContext(ctx)
	refused := func(when string) {
		t.Helper()
		for what, q := range map[string]string{
			"seed":       "UPDATE activity_draws SET seed = UNHEX(SHA2('another', 256)) WHERE activity_id = ?",
			"commitment": "UPDATE activity_draws SET commitment = SHA2('another', 256) WHERE activity_id = ?",
			"both":       "UPDATE activity_draws SET seed = UNHEX(SHA2('another', 256)), commitment = SHA2(UNHEX(SHA2('another', 256)), 256) WHERE activity_id = ?",
		} {
			err := g.Exec(q, a.ID).Error
			if err == nil || !strings.Contains(err.Error(), "activity_draws.") {
				t.Errorf("%s: an UPDATE of the %s: %v, want MySQL's refusal", when, what, err)
			}
		}
		var row struct {
			Seed       []byte
			Commitment string
		}
		if err := g.Raw("SELECT seed, commitment FROM activity_draws WHERE activity_id = ?", a.ID).Scan(&row).Error; err != nil {
			t.Fatal(err)
		}
		if string(row.Seed) != string(want[:]) || row.Commitment != commitment {
			t.Fatalf("%s: seed %x commitment %s, want %x and %s", when, row.Seed, row.Commitment, want, commitment)
		}
		got, err := db.Activities.Activity(ctx, a.ID)
		if err != nil || got.Draw.Commitment != commitment {
			t.Fatalf("%s: the sale reads commitment %q (%v), want %s", when, got.Draw.Commitment, err, commitment)
		}
		rec, err := db.Draws.DrawRecord(ctx, a.ID)
		if err != nil || rec.Commitment != commitment {
			t.Fatalf("%s: the record's commitment %q (%v), want %s", when, rec.Commitment, err, commitment)
		}
	}
	refused("before any entry")
	if _, _, err := db.Draws.Enter(ctx, draw.NewEntry{ActivityID: a.ID, UserID: "u1", ItemID: a.ItemID, Quantity: 1, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	refused("after the first entry")
}

// A database with draws made before 0015 gives each its commitment from
// its seed, and from then on refuses a change of either.
func TestMigrationGivesOldDrawsTheirCommitment(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	a := drawSale(t, db, time.Now().Add(time.Minute), 2)
	g := db.Gorm().WithContext(ctx)
	for _, q := range []string{
		"DROP TRIGGER activity_draws_fixed",
		"ALTER TABLE activity_draws DROP COLUMN commitment",
		"DELETE FROM schema_migrations WHERE version = '0015_draw_commitment'",
	} {
		if err := g.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	rec, err := db.Draws.DrawRecord(ctx, a.ID)
	if want := draw.Seed(a.Draw.Seed).Commitment(); err != nil || rec.Commitment != want {
		t.Fatalf("an old draw's commitment after the migration: %q (%v), want %s", rec.Commitment, err, want)
	}
	if err := g.Exec("UPDATE activity_draws SET seed = UNHEX(SHA2('x', 256)) WHERE activity_id = ?", a.ID).Error; err == nil {
		t.Fatal("the seed of an old draw changed after the migration")
	}
}

// A draw row inserted without its commitment, as a program of the version
// before 0015 does during a rolling upgrade, is taken and gets the SHA-256
// of its seed (0016): the sale reads back, and publishes, the commitment to
// its seed like any other; the commitment then stays fixed.
func TestDrawInsertedWithoutCommitmentGetsItsSeeds(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	it, err := db.Activities.CreateItem(ctx, "sneaker", 3)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	a, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PerUserLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	seed := draw.NewSeed()
	g := db.Gorm().WithContext(ctx)
	if err := g.Exec("INSERT INTO activity_draws (activity_id, entries_close_at, seed) VALUES (?, ?, ?)",
		a.ID, now.Add(30*time.Minute), seed[:]).Error; err != nil {
		t.Fatalf("the previous version's insert of a draw: %v", err)
	}
	want := draw.Seed(seed).Commitment()
	got, err := db.Activities.Activity(ctx, a.ID)
	if err != nil || got.Draw.Commitment != want {
		t.Fatalf("the draw's commitment %q (%v), want the seed's %s", got.Draw.Commitment, err, want)
	}
	if err := g.Exec("UPDATE activity_draws SET commitment = SHA2('another', 256) WHERE activity_id = ?", a.ID).Error; err == nil {
		t.Fatal("the commitment filled in changed afterwards")
	}
}
