package orderdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/failpoint"
)

// drawRow is a draw sale's draw (0014).
type drawRow struct {
	ActivityID     int64 `gorm:"primaryKey"`
	EntriesCloseAt time.Time
	Seed           []byte
	// Commitment is SHA-256 of Seed when the draw was made (0015); MySQL
	// refuses a change of either.
	Commitment    string
	State         string
	Entries       int64
	EntriesDigest *string
	Sizes         *string
	DrawnAt       *time.Time
}

func (drawRow) TableName() string { return "activity_draws" }

// drawColumns are a sale's draw settings beside its row (LEFT JOIN
// activity_draws): NULL, so zero, for a first-come sale.
type drawColumns struct {
	EntriesCloseAt *time.Time
	Seed           []byte
	Commitment     *string
}

const drawSelect = "activity_draws.entries_close_at AS draw_entries_close_at, activity_draws.seed AS draw_seed, " +
	"activity_draws.commitment AS draw_commitment"

func (c drawColumns) draw() order.Draw {
	if c.EntriesCloseAt == nil {
		return order.Draw{}
	}
	d := order.Draw{EntriesCloseAt: *c.EntriesCloseAt}
	copy(d.Seed[:], c.Seed)
	if c.Commitment != nil {
		d.Commitment = *c.Commitment
	}
	return d
}

// entryRow is one buyer's entry in a draw.
type entryRow struct {
	EntryID    string `gorm:"primaryKey"`
	ActivityID int64
	UserID     string
	ItemID     int64
	Quantity   int
	CreatedAt  time.Time `gorm:"autoCreateTime:false"`
}

func (entryRow) TableName() string { return "draw_entries" }

// resultRow is one entry's place in the ranking.
type resultRow struct {
	ActivityID int64 `gorm:"primaryKey"`
	DrawRank   int   `gorm:"primaryKey"`
	EntryID    string
	ItemID     int64
	Quantity   int
	UserID     string
	Outcome    string
	Alternate  *int
	OrderNo    *string
	Issued     bool
}

func (resultRow) TableName() string { return "draw_results" }

// createDraw writes a new sale's draw (in the sale's transaction), with
// its commitment: SHA-256 of its seed, fixed from now on.
func createDraw(tx *gorm.DB, activity int64, d order.Draw) error {
	return tx.Create(&drawRow{ActivityID: activity, EntriesCloseAt: d.EntriesCloseAt.UTC(), Seed: d.Seed[:],
		Commitment: draw.Seed(d.Seed).Commitment(), State: draw.StateOpen}).Error
}

// changeDraw checks a change of the sale of row against its draw, if it
// has one: the times as the change leaves them, and no room or buckets.
func changeDraw(tx *gorm.DB, row activityRow, ch ActivityChange, starts, ends, now time.Time) error {
	var d drawRow
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("activity_id = ?", row.ID).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	a := row.activity()
	a.StartsAt, a.EndsAt, a.Draw = starts, ends, order.Draw{EntriesCloseAt: d.EntriesCloseAt}
	if ch.StockBuckets != nil {
		a.StockBuckets = *ch.StockBuckets
	}
	if ch.Room != nil {
		a.Room = *ch.Room
	}
	return a.CheckDraw(now, ch.PaymentWindow)
}

// NewEntry is a buyer's entry as the api takes it.
type NewEntry struct {
	ActivityID int64
	UserID     string
	ItemID     int64
	Quantity   int
	// At is the shared clock's time of the request: entries are taken
	// only before entries_close_at.
	At time.Time
}

// Entry is a buyer's entry and, once drawn, what became of it.
type Entry struct {
	draw.Entry
	ActivityID int64
	UserID     string
	CreatedAt  time.Time
	// Rank is its place in the ranking (from 1), Outcome its outcome at
	// the draw (draw.Won, draw.Alternate); zero and "" before the draw.
	Rank    int
	Outcome string
	// OrderNo is the order made for it: a winner's, or an alternate's that
	// units came back to; Issued once that order's event reached Kafka
	// (before, the order may still not come of it, for an alternate).
	OrderNo string
	Issued  bool
	// AlternatesBefore is, for an alternate without an issued order, how
	// many of its size's alternates without a number come before it.
	AlternatesBefore int64
}

var errEntered = errors.New("already entered")

// Enter records a buyer's entry and reports whether it is new. A buyer who
// entered already gets that entry back, unchanged, so a retry of a request
// whose answer was lost finds the entry it made. An entry after the list
// froze (entries_close_at, or the draw ran), before the sale started
// (MySQL's starts_at) or after it ended (MySQL's ends_at, an end or a
// cancel included) is order.ErrActivityNotActive.
func (db *DB) Enter(ctx context.Context, e NewEntry) (Entry, bool, error) {
	var b [draw.EntryIDLen / 2]byte
	_, _ = rand.Read(b[:])
	row := entryRow{EntryID: hex.EncodeToString(b[:]), ActivityID: e.ActivityID, UserID: e.UserID, ItemID: e.ItemID,
		Quantity: e.Quantity, CreatedAt: e.At.UTC()}
	err := db.gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			if duplicateKey(err) != "" {
				return errEntered
			}
			return err
		}
		// Last, so the draw row's lock is held only to the commit: the draw
		// takes it first, so an entry either commits before the list is
		// read or finds the draw no longer OPEN.
		// The sale's window is MySQL's too: an instance whose copy of the
		// sale predates an end, a cancel or a later start (up to
		// order.ActivityTTL old) takes no entry outside it.
		res := tx.Model(&drawRow{}).Where("activity_id = ? AND state = ? AND entries_close_at > ?", e.ActivityID, draw.StateOpen, e.At.UTC()).
			Where(`EXISTS (SELECT 1 FROM activities WHERE activities.id = ? AND activities.starts_at <= ? AND activities.ends_at > ?
				AND activities.cancelled_at IS NULL)`, e.ActivityID, e.At.UTC(), e.At.UTC()).
			UpdateColumn("entries", gorm.Expr("entries + 1"))
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			var a activityRow
			if tx.Select("starts_at").Where("id = ?", e.ActivityID).Take(&a).Error == nil && e.At.Before(a.StartsAt) {
				return order.Errorf(order.ErrActivityNotActive, "the sale starts at %s: entries open then", a.StartsAt.UTC().Format(time.RFC3339Nano))
			}
			return order.Errorf(order.ErrActivityNotActive, "the draw's entries are closed")
		}
		return nil
	})
	switch {
	case errors.Is(err, errEntered):
		got, err := db.EntryOf(ctx, e.ActivityID, e.UserID)
		return got, false, err
	case err != nil:
		return Entry{}, false, wrap("enter draw", err)
	}
	return row.entry(), true, nil
}

func (r entryRow) entry() Entry {
	return Entry{Entry: draw.Entry{ID: r.EntryID, ItemID: r.ItemID, Quantity: r.Quantity}, ActivityID: r.ActivityID,
		UserID: r.UserID, CreatedAt: r.CreatedAt}
}

// EntryOf returns the buyer's entry in the sale with its outcome,
// order.ErrNotFound if they have none.
func (db *DB) EntryOf(ctx context.Context, activity int64, user string) (Entry, error) {
	var row struct {
		Entry     entryRow `gorm:"embedded"`
		DrawRank  *int
		Outcome   *string
		Alternate *int
		OrderNo   *string
		Issued    *bool
		// OrderStatus is the status of the order MySQL holds for OrderNo.
		OrderStatus *string
	}
	tx := db.gdb.WithContext(ctx)
	err := tx.Table("draw_entries").
		Select("draw_entries.*, draw_results.draw_rank, draw_results.outcome, draw_results.alternate, draw_results.order_no, draw_results.issued, orders.status AS order_status").
		Joins("LEFT JOIN draw_results ON draw_results.entry_id = draw_entries.entry_id").
		Joins("LEFT JOIN orders ON orders.order_no = draw_results.order_no").
		Where("draw_entries.activity_id = ? AND draw_entries.user_id = ?", activity, user).Take(&row).Error
	if err != nil {
		return Entry{}, wrap("read entry", err)
	}
	e := row.Entry.entry()
	if row.DrawRank != nil {
		e.Rank, e.Outcome = *row.DrawRank, *row.Outcome
	}
	e.Issued = row.Issued != nil && *row.Issued
	switch {
	case e.Outcome == draw.Alternate && row.OrderStatus != nil && *row.OrderStatus == string(order.Failed):
		// Its order found no stock: it waits in its place again (the
		// drawer takes the number back, ReturnFailedAlternates), never a
		// winner with a failed order.
		e.Issued = false
	case row.OrderNo != nil:
		e.OrderNo = *row.OrderNo
	}
	if e.Outcome == draw.Alternate && !e.Issued && row.Alternate != nil {
		// Its place among the size's alternates less the ones before it
		// given a number since: a read of those alone (few: as many as
		// units came back), not of the whole line.
		var numbered int64
		err = tx.Table("draw_results").Joins("LEFT JOIN orders ON orders.order_no = draw_results.order_no").
			Where("draw_results.activity_id = ? AND draw_results.item_id = ? AND draw_results.outcome = ? AND draw_results.order_no IS NOT NULL AND draw_results.draw_rank < ?",
				activity, e.ItemID, draw.Alternate, e.Rank).
			Where("orders.status IS NULL OR orders.status <> ?", string(order.Failed)).Count(&numbered).Error
		e.AlternatesBefore = int64(*row.Alternate) - 1 - numbered
	}
	return e, wrap("read entry", err)
}

// DrawSummary is where a sale's draw stands: draw.StateOpen or
// draw.StateDrawn (the api shows CLOSED for an OPEN draw past its close),
// and its entries so far.
type DrawSummary struct {
	State   string
	Entries int64
}

// DrawSummary reads the sale's draw; order.ErrNotFound for a sale that is
// not a draw.
func (db *DB) DrawSummary(ctx context.Context, activity int64) (DrawSummary, error) {
	var row drawRow
	err := db.gdb.WithContext(ctx).Select("state", "entries").Where("activity_id = ?", activity).Take(&row).Error
	return DrawSummary{State: row.State, Entries: row.Entries}, wrap("read draw", err)
}

// DrawsDue lists the draw sales to draw at now: entries closed, not drawn,
// the sale neither ended nor cancelled.
func (db *DB) DrawsDue(ctx context.Context, now time.Time) ([]int64, error) {
	var ids []int64
	err := db.gdb.WithContext(ctx).Table("activity_draws").Select("activity_draws.activity_id").
		Joins("JOIN activities ON activities.id = activity_draws.activity_id").
		Where("activity_draws.state = ? AND activity_draws.entries_close_at <= ? AND activities.ends_at > ? AND activities.cancelled_at IS NULL",
			draw.StateOpen, now.UTC(), now.UTC()).
		Order("activity_draws.activity_id").Limit(100).Pluck("activity_draws.activity_id", &ids).Error
	return ids, wrap("list draws due", err)
}

// DrawnLive lists the drawn sales still on at now: their winners and
// alternates are given orders.
func (db *DB) DrawnLive(ctx context.Context, now time.Time) ([]int64, error) {
	var ids []int64
	err := db.gdb.WithContext(ctx).Table("activity_draws").Select("activity_draws.activity_id").
		Joins("JOIN activities ON activities.id = activity_draws.activity_id").
		Where("activity_draws.state = ? AND activities.ends_at > ? AND activities.cancelled_at IS NULL", draw.StateDrawn, now.UTC()).
		Order("activity_draws.activity_id").Limit(1000).Pluck("activity_draws.activity_id", &ids).Error
	return ids, wrap("list drawn sales", err)
}

// Drawn is what a run of the draw did.
type Drawn struct {
	// Ran is false when there was nothing to do: drawn already, or not due.
	Ran     bool
	Entries int
	Winners int
}

// resultBatch is how many ranking rows one INSERT writes.
const resultBatch = 1000

// RunDraw draws the sale at now, exactly once: in one transaction it locks
// the draw, which freezes the list (an entry not committed by then finds it
// DRAWN), reads the entries and each size's stock, ranks them
// (draw.Pick), writes the ranking and sets the draw DRAWN. A crash or a
// lost answer leaves it all or nothing, and a second run finds it DRAWN;
// the ranking depends on the seed and the list alone, so a run again after
// a rollback draws the same.
func (db *DB) RunDraw(ctx context.Context, activity int64, now time.Time) (Drawn, error) {
	var out Drawn
	err := db.gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var d drawRow
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("activity_id = ?", activity).Take(&d).Error; err != nil {
			return err
		}
		if d.State != draw.StateOpen {
			return nil
		}
		var arow activityRow
		if err := tx.Where("id = ?", activity).Take(&arow).Error; err != nil {
			return err
		}
		a := arow.activity()
		a.Draw = order.Draw{EntriesCloseAt: d.EntriesCloseAt}
		if !a.DrawDueAt(now) {
			return nil
		}
		a, err := withItemsOne(tx, a)
		if err != nil {
			return err
		}
		var rows []entryRow
		if err := tx.Where("activity_id = ?", activity).Find(&rows).Error; err != nil {
			return err
		}
		users := make(map[string]string, len(rows))
		entries := make([]draw.Entry, len(rows))
		for i, r := range rows {
			entries[i] = draw.Entry{ID: r.EntryID, ItemID: r.ItemID, Quantity: r.Quantity}
			users[r.EntryID] = r.UserID
		}
		sizes, stock, err := drawStock(tx, a.ItemIDs())
		if err != nil {
			return err
		}
		var seed draw.Seed
		copy(seed[:], d.Seed)
		ranked := draw.Pick(seed, entries, stock)
		results := make([]resultRow, len(ranked))
		alternates := map[int64]int{}
		for i, r := range ranked {
			results[i] = resultRow{ActivityID: activity, DrawRank: i + 1, EntryID: r.ID, ItemID: r.ItemID, Quantity: r.Quantity,
				UserID: users[r.ID], Outcome: r.Outcome}
			if r.Outcome == draw.Won {
				out.Winners++
				continue
			}
			alternates[r.ItemID]++
			results[i].Alternate = ptr(alternates[r.ItemID])
		}
		if len(results) > 0 {
			if err := tx.CreateInBatches(results, resultBatch).Error; err != nil {
				return err
			}
		}
		failpoint.Inject("draw-before-commit")
		sizesJSON, err := json.Marshal(sizes)
		if err != nil {
			return err
		}
		digest, js := draw.Digest(entries), string(sizesJSON)
		out.Ran, out.Entries = true, len(entries)
		return tx.Model(&drawRow{}).Where("activity_id = ? AND state = ?", activity, draw.StateOpen).Updates(map[string]any{
			"state": draw.StateDrawn, "entries": len(entries), "entries_digest": digest, "sizes": js, "drawn_at": now.UTC()}).Error
	})
	if err != nil {
		return Drawn{}, wrap(fmt.Sprintf("draw activity %d", activity), err)
	}
	return out, nil
}

// drawStock is MySQL's stock of each size, in the sale's order, locked
// for share until the draw commits (a restock commits before or after it).
func drawStock(tx *gorm.DB, items []int64) ([]draw.Size, map[int64]int64, error) {
	var rows []struct {
		ItemID int64
		Stock  int64
	}
	err := tx.Table("item_stock").Clauses(clause.Locking{Strength: "SHARE"}).Select("item_id, stock").
		Where("item_id IN ?", items).Find(&rows).Error
	if err != nil {
		return nil, nil, err
	}
	stock := make(map[int64]int64, len(rows))
	for _, r := range rows {
		stock[r.ItemID] = r.Stock
	}
	sizes := make([]draw.Size, len(items))
	for i, id := range items {
		sizes[i] = draw.Size{ItemID: id, Stock: stock[id]}
	}
	return sizes, stock, nil
}

// DrawRecord is the sale's draw as published: the commitment always, and
// once drawn the seed, the digest, the sizes' stock at the draw and every
// entry in ranking order. order.ErrNotFound for a sale that is not a draw.
func (db *DB) DrawRecord(ctx context.Context, activity int64) (draw.Record, error) {
	tx := db.gdb.WithContext(ctx)
	var d drawRow
	if err := tx.Where("activity_id = ?", activity).Take(&d).Error; err != nil {
		return draw.Record{}, wrap("read draw", err)
	}
	// The commitment as stored when the sale was made, not recomputed from
	// the seed: a seed changed since no longer matches it, and draw.Verify
	// says so.
	rec := draw.Record{ActivityID: activity, State: d.State, Commitment: d.Commitment}
	if d.State != draw.StateDrawn {
		return rec, nil
	}
	var seed draw.Seed
	copy(seed[:], d.Seed)
	rec.Seed = seed.String()
	if d.EntriesDigest != nil {
		rec.Digest = *d.EntriesDigest
	}
	if d.Sizes != nil {
		if err := json.Unmarshal([]byte(*d.Sizes), &rec.Sizes); err != nil {
			return draw.Record{}, fmt.Errorf("read draw %d: its sizes: %w", activity, err)
		}
	}
	restocks, err := drawRestocks(tx, activity, rec.Sizes, d.DrawnAt)
	if err != nil {
		return draw.Record{}, wrap("read draw", err)
	}
	rec.Restocks = restocks
	rec.Entries = make([]draw.Ranked, 0, d.Entries)
	// Paged by rank (FindInBatches pages by a single-column primary key,
	// which draw_results has not).
	for last := 0; ; {
		var batch []resultRow
		err := tx.Select("draw_rank", "entry_id", "item_id", "quantity", "outcome").Where("activity_id = ? AND draw_rank > ?", activity, last).
			Order("draw_rank").Limit(recordPage).Find(&batch).Error
		if err != nil {
			return draw.Record{}, wrap("read draw", err)
		}
		for _, r := range batch {
			rec.Entries = append(rec.Entries, draw.Ranked{Entry: draw.Entry{ID: r.EntryID, ItemID: r.ItemID, Quantity: r.Quantity}, Outcome: r.Outcome})
		}
		if len(batch) < recordPage {
			return rec, nil
		}
		last = batch[len(batch)-1].DrawRank
	}
}

// drawRestocks lists the restocks of sizes recorded from the sale's
// start to its draw at drawn, in time order.
func drawRestocks(tx *gorm.DB, activity int64, sizes []draw.Size, drawn *time.Time) ([]draw.Restock, error) {
	if len(sizes) == 0 || drawn == nil {
		return nil, nil
	}
	items := make([]int64, len(sizes))
	for i, s := range sizes {
		items[i] = s.ItemID
	}
	var rows []restockRow
	err := tx.Select("id", "item_id", "quantity", "created_at").
		Where("item_id IN ? AND created_at <= ? AND created_at >= (SELECT starts_at FROM activities WHERE id = ?)", items, drawn.UTC(), activity).
		Order("created_at, id").Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	out := make([]draw.Restock, len(rows))
	for i, r := range rows {
		out[i] = draw.Restock{ItemID: r.ItemID, Quantity: r.Quantity, At: r.CreatedAt.UTC()}
	}
	return out, nil
}

// recordPage is how many ranking rows one read of a record takes.
var recordPage = 10_000

// Pick is an entry of the ranking the draw gives (or has given) an order.
type Pick struct {
	EntryID  string
	Rank     int
	ItemID   int64
	Quantity int
	UserID   string
	Outcome  string
	OrderNo  string
}

func (r resultRow) pick() Pick {
	p := Pick{EntryID: r.EntryID, Rank: r.DrawRank, ItemID: r.ItemID, Quantity: r.Quantity, UserID: r.UserID, Outcome: r.Outcome}
	if r.OrderNo != nil {
		p.OrderNo = *r.OrderNo
	}
	return p
}

func picks(q *gorm.DB, op string) ([]Pick, error) {
	return findAs(q.Order("draw_rank"), op, resultRow.pick)
}

// Unissued lists the sale's entries numbered for an order whose event is
// not known to have reached Kafka, in ranking order.
func (db *DB) Unissued(ctx context.Context, activity int64, limit int) ([]Pick, error) {
	return picks(db.gdb.WithContext(ctx).Model(&resultRow{}).Where("activity_id = ? AND order_no IS NOT NULL AND issued = 0", activity).Limit(limit), "list unissued picks")
}

// WinnersWithoutOrders lists the sale's winners not yet numbered for an
// order, in ranking order.
func (db *DB) WinnersWithoutOrders(ctx context.Context, activity int64, limit int) ([]Pick, error) {
	return picks(db.gdb.WithContext(ctx).Model(&resultRow{}).Where("activity_id = ? AND outcome = ? AND order_no IS NULL", activity, draw.Won).Limit(limit), "list winners")
}

// NextAlternates lists the first alternates of the size without an order
// whose quantity is at most most, in ranking order.
func (db *DB) NextAlternates(ctx context.Context, activity, item int64, most int64, limit int) ([]Pick, error) {
	return picks(db.gdb.WithContext(ctx).Model(&resultRow{}).Where("activity_id = ? AND item_id = ? AND outcome = ? AND order_no IS NULL AND quantity <= ?",
		activity, item, draw.Alternate, most).Limit(limit), "list alternates")
}

// NumberPick gives the entry the order number no unless it has one, and
// returns the number it has: no, or the one an earlier run gave it (its
// answer lost, or another process's). The number is set before the order
// is reserved, so an entry never has two orders.
func (db *DB) NumberPick(ctx context.Context, entryID, no string) (string, error) {
	tx := db.gdb.WithContext(ctx)
	if err := tx.Model(&resultRow{}).Where("entry_id = ? AND order_no IS NULL", entryID).UpdateColumn("order_no", no).Error; err != nil {
		return "", wrap("number pick", err)
	}
	var r resultRow
	if err := tx.Select("order_no").Where("entry_id = ?", entryID).Take(&r).Error; err != nil {
		return "", wrap("number pick", err)
	}
	if r.OrderNo == nil {
		return "", fmt.Errorf("number pick %s: %w: its number was taken back meanwhile", entryID, order.ErrUnavailable)
	}
	return *r.OrderNo, nil
}

// MarkIssued records that the event of the entry's order no reached Kafka.
func (db *DB) MarkIssued(ctx context.Context, entryID, no string) error {
	err := db.gdb.WithContext(ctx).Model(&resultRow{}).Where("entry_id = ? AND order_no = ?", entryID, no).UpdateColumn("issued", true).Error
	return wrap("mark pick issued", err)
}

// Unnumber takes the number no back from an alternate whose order Redis
// refused (the units it was promoted for went to another): it waits for
// the next units again, in its place.
func (db *DB) Unnumber(ctx context.Context, entryID, no string) error {
	err := db.gdb.WithContext(ctx).Model(&resultRow{}).Where("entry_id = ? AND order_no = ? AND issued = 0 AND outcome = ?", entryID, no, draw.Alternate).
		UpdateColumn("order_no", nil).Error
	return wrap("unnumber pick", err)
}

// DrawFree is, for each of items (the drawn sale's sizes), the units
// MySQL says are free for its alternates: the size's stock in MySQL less
// the units of the sale's picks numbered for an order MySQL does not hold
// yet (reserved in Redis, or on their way through Kafka). Only what MySQL
// took back counts: a closed, cancelled or refused order, a restock. A
// Redis stock above it (a Redis restored from a copy taken before orders
// were made, which the heal has not checked yet) gives alternates
// nothing. A draw sale takes no order but its picks', so this is every
// unit of the size not held by an order.
func (db *DB) DrawFree(ctx context.Context, activity int64, items []int64) (map[int64]int64, error) {
	var rows []struct {
		ItemID int64
		Free   int64
	}
	// The outcomes named so that idx_draw_results_size reads only the
	// numbered picks of each size, not the whole ranking.
	err := db.gdb.WithContext(ctx).Raw(`SELECT s.item_id, s.stock - COALESCE((SELECT SUM(r.quantity) FROM draw_results r
		WHERE r.activity_id = ? AND r.item_id = s.item_id AND r.outcome IN ? AND r.order_no IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.order_no = r.order_no)), 0) AS free
		FROM item_stock s WHERE s.item_id IN ?`, activity, []string{draw.Won, draw.Alternate}, nonEmpty(items)).Scan(&rows).Error
	if err != nil {
		return nil, wrap("read the draw's free units", err)
	}
	free := make(map[int64]int64, len(rows))
	for _, r := range rows {
		free[r.ItemID] = r.Free
	}
	return free, nil
}

// ReturnFailedAlternates takes the order number back from every alternate
// of the sale whose order MySQL recorded FAILED (the consumer found no
// stock for it: its units were not truly free): it is an alternate
// waiting in its place again, and is promoted with a new order when units
// come back. The FAILED order stays, named by the entry's key
// (order.DrawKey), a retired attempt. It finds them with a read that locks
// nothing (the drawer runs it every pass), then takes each number back
// only while the entry still has it; FAILED is final, so a retry after a
// lost answer finds nothing more to do. It returns how many it took back.
func (db *DB) ReturnFailedAlternates(ctx context.Context, activity int64) (int64, error) {
	g := db.gdb.WithContext(ctx)
	var failed []struct {
		EntryID string
		OrderNo string
	}
	err := g.Raw(`SELECT r.entry_id, r.order_no FROM draw_results r JOIN orders o ON o.order_no = r.order_no
		WHERE r.activity_id = ? AND r.outcome = ? AND r.order_no IS NOT NULL AND o.status = ?`,
		activity, draw.Alternate, string(order.Failed)).Scan(&failed).Error
	if err != nil {
		return 0, wrap("return failed alternates", err)
	}
	var n int64
	for _, f := range failed {
		res := g.Model(&resultRow{}).Where("entry_id = ? AND order_no = ?", f.EntryID, f.OrderNo).
			UpdateColumns(map[string]any{"order_no": nil, "issued": false})
		if res.Error != nil {
			return n, wrap("return failed alternates", res.Error)
		}
		n += res.RowsAffected
	}
	return n, nil
}

// DrawSales lists the draw sales that end after endsAfter, or the ones
// of ids among them when ids is not nil.
func (db *DB) DrawSales(ctx context.Context, endsAfter time.Time, ids []int64) ([]int64, error) {
	q := db.gdb.WithContext(ctx).Table("activity_draws").
		Joins("JOIN activities ON activities.id = activity_draws.activity_id").Where("activities.ends_at > ?", endsAfter.UTC())
	if ids != nil {
		q = q.Where("activity_draws.activity_id IN ?", nonEmpty(ids))
	}
	var out []int64
	err := q.Order("activity_draws.activity_id").Pluck("activity_draws.activity_id", &out).Error
	return out, wrap("list draw sales", err)
}

// DrawAudit is what MySQL holds of a drawn sale's orders.
type DrawAudit struct {
	// Numbered picks have an order number; Issued ones had their event
	// reach Kafka; Promoted are alternates given units after the draw.
	Numbered, Issued, Promoted int64
	// Stray are orders of the sale no pick names (but a pick's retired
	// attempts, FAILED): none may exist (a draw sale takes no order but its
	// picks').
	Stray int64
	// Missing are issued picks whose order MySQL does not have (yet: an
	// order still on its way counts until the pipeline drains).
	Missing int64
}

// DrawAudit reads the audit of the sale's draw.
func (db *DB) DrawAudit(ctx context.Context, activity int64) (DrawAudit, error) {
	var a DrawAudit
	g := db.gdb.WithContext(ctx)
	err := g.Raw(`SELECT COALESCE(SUM(order_no IS NOT NULL), 0) AS numbered, COALESCE(SUM(issued), 0) AS issued,
		COALESCE(SUM(outcome = ? AND order_no IS NOT NULL), 0) AS promoted,
		COALESCE(SUM(issued = 1 AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.order_no = draw_results.order_no)), 0) AS missing
		FROM draw_results WHERE activity_id = ?`, draw.Alternate, activity).Scan(&a).Error
	if err != nil {
		return a, wrap("audit draw", err)
	}
	// A FAILED order keyed by one of the sale's entries is a retired
	// attempt of that entry's (ReturnFailedAlternates took its number back).
	err = g.Raw(`SELECT COUNT(*) FROM orders o WHERE o.activity_id = ?
		AND NOT EXISTS (SELECT 1 FROM draw_results r WHERE r.order_no = o.order_no)
		AND NOT (o.status = ? AND EXISTS (SELECT 1 FROM draw_results r WHERE r.activity_id = o.activity_id
			AND o.idempotency_key = CONCAT(?, r.entry_id)))`, activity, string(order.Failed), order.DrawKey("")).Scan(&a.Stray).Error
	return a, wrap("audit draw", err)
}
