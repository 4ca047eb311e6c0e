package orderdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/pkg/domain/activity"
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

func (c drawColumns) draw() activity.Draw {
	if c.EntriesCloseAt == nil {
		return activity.Draw{}
	}
	d := activity.Draw{EntriesCloseAt: *c.EntriesCloseAt}
	copy(d.Seed[:], c.Seed)
	if c.Commitment != nil {
		d.Commitment = *c.Commitment
	}
	return d
}

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
	// EventSeq is the seq of the entry's last event in the outbox (0020):
	// a row is written with its first.
	EventSeq int
	// NotSelected: its entry.not_selected is written; final (0020).
	NotSelected bool
}

func (resultRow) TableName() string { return "draw_results" }

// createDraw writes a new sale's draw (in the sale's transaction), with
// its commitment: SHA-256 of its seed, fixed from now on.
func createDraw(tx *gorm.DB, activity int64, d activity.Draw) error {
	return tx.Create(&drawRow{ActivityID: activity, EntriesCloseAt: d.EntriesCloseAt.UTC(), Seed: d.Seed[:],
		Commitment: draw.Seed(d.Seed).Commitment(), State: draw.StateOpen}).Error
}

// changeDraw checks a change of the sale of row against its draw, if it
// has one: the times as the change leaves them, and no room or buckets.
func changeDraw(tx *gorm.DB, row activityRow, ch activity.Patch, starts, ends, now time.Time) error {
	var d drawRow
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("activity_id = ?", row.ID).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	a := row.activity()
	a.StartsAt, a.EndsAt, a.Draw = starts, ends, activity.Draw{EntriesCloseAt: d.EntriesCloseAt}
	if ch.StockBuckets != nil {
		a.StockBuckets = *ch.StockBuckets
	}
	if ch.Room != nil {
		a.Room = *ch.Room
	}
	return a.CheckDraw(now, ch.PaymentWindow)
}

// DrawSummary reads the sale's draw; order.ErrNotFound for a sale that is
// not a draw.
func (s *Draws) DrawSummary(ctx context.Context, activity int64) (draw.Summary, error) {
	var row drawRow
	err := s.db(ctx).Select("state", "entries").Where("activity_id = ?", activity).Take(&row).Error
	return draw.Summary{State: row.State, Entries: row.Entries}, wrap("read draw", err)
}

// DrawsDue lists the draw sales to draw at now: entries closed, not drawn,
// the sale neither ended nor cancelled.
func (s *Draws) DrawsDue(ctx context.Context, now time.Time) ([]int64, error) {
	var ids []int64
	err := s.db(ctx).Table("activity_draws").Select("activity_draws.activity_id").
		Joins("JOIN activities ON activities.id = activity_draws.activity_id").
		Where("activity_draws.state = ? AND activity_draws.entries_close_at <= ? AND activities.ends_at > ? AND activities.cancelled_at IS NULL",
			draw.StateOpen, now.UTC(), now.UTC()).
		Order("activity_draws.activity_id").Limit(100).Pluck("activity_draws.activity_id", &ids).Error
	return ids, wrap("list draws due", err)
}

// DrawnLive lists the drawn sales still on at now: their winners and
// alternates are given orders.
func (s *Draws) DrawnLive(ctx context.Context, now time.Time) ([]int64, error) {
	var ids []int64
	err := s.db(ctx).Table("activity_draws").Select("activity_draws.activity_id").
		Joins("JOIN activities ON activities.id = activity_draws.activity_id").
		Where("activity_draws.state = ? AND activities.ends_at > ? AND activities.cancelled_at IS NULL", draw.StateDrawn, now.UTC()).
		Order("activity_draws.activity_id").Limit(1000).Pluck("activity_draws.activity_id", &ids).Error
	return ids, wrap("list drawn sales", err)
}

// resultBatch is how many ranking rows one INSERT writes: 9 values a row,
// well under MySQL's 65,535 placeholders a statement.
const resultBatch = 2000

// firstEventOwed is a ranking row's event_seq until its entry's first
// event (entry.won, entry.alternate) is written (Unannounced): 0 already
// means an entry of a draw before the outbox, which has no first event.
const firstEventOwed = -1

// RunDrawWith draws the sale at now, exactly once: in one transaction it
// locks the draw, which freezes the list (an entry not committed by then
// finds it DRAWN), reads the entries and each size's stock, ranks them
// with pick (the caller's rule: draw.Pick) inside the transaction, writes
// the ranking and sets the draw DRAWN. A crash or a lost answer leaves it
// all or nothing, and a second run finds it DRAWN; the ranking depends on
// the seed and the list alone, so a run again after a rollback draws the
// same. Each row is written owing its entry's first event
// (firstEventOwed), which Unannounced's units write after the commit.
//
// A million entries are held packed (the entries' own rows, sorted by id,
// no map), written in multi-row INSERTs of resultBatch rows, and never
// read back.
func (s *Draws) RunDrawWith(ctx context.Context, activityID int64, now time.Time, pick draw.Ranker) (draw.Drawn, error) {
	var out draw.Drawn
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		var d drawRow
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("activity_id = ?", activityID).Take(&d).Error; err != nil {
			return err
		}
		if d.State != draw.StateOpen {
			return nil
		}
		var arow activityRow
		if err := tx.Where("id = ?", activityID).Take(&arow).Error; err != nil {
			return err
		}
		a := arow.activity()
		a.Draw = activity.Draw{EntriesCloseAt: d.EntriesCloseAt}
		if !a.DrawDueAt(now) {
			return nil
		}
		a, err := withItemsOne(tx, a)
		if err != nil {
			return err
		}
		list, err := drawEntries(tx, activityID)
		if err != nil {
			return err
		}
		sizes, stock, err := drawStock(tx, a.ItemIDs())
		if err != nil {
			return err
		}
		var seed draw.Seed
		copy(seed[:], d.Seed)
		ranked := pick(seed, list.entries, stock)
		alternates := map[int64]int{}
		page := make([]draw.Picked, 0, resultBatch)
		places := make([]*int, 0, resultBatch)
		for i, r := range ranked {
			page = append(page, draw.Picked{ActivityID: activityID, EntryID: r.ID, Rank: i + 1, ItemID: r.ItemID, Quantity: r.Quantity,
				UserID: list.user(r.ID), Outcome: r.Outcome})
			var place *int
			if r.Outcome == draw.Won {
				out.Winners++
			} else {
				alternates[r.ItemID]++
				place = ptr(alternates[r.ItemID])
			}
			places = append(places, place)
			if len(page) == resultBatch || i == len(ranked)-1 {
				if err := insertResults(tx, page, places); err != nil {
					return err
				}
				page, places = page[:0], places[:0]
			}
		}
		failpoint.Inject("draw-before-commit")
		sizesJSON, err := json.Marshal(sizes)
		if err != nil {
			return err
		}
		digest, js := draw.Digest(list.entries), string(sizesJSON)
		out.Ran, out.Entries = true, len(list.entries)
		return tx.Model(&drawRow{}).Where("activity_id = ? AND state = ?", activityID, draw.StateOpen).Updates(map[string]any{
			"state": draw.StateDrawn, "entries": len(list.entries), "entries_digest": digest, "sizes": js, "drawn_at": now.UTC()}).Error
	})
	if err != nil {
		return draw.Drawn{}, wrap("run the draw", err)
	}
	return out, nil
}

// entryList is a draw's entries sorted by id, and each one's buyer.
type entryList struct {
	entries []draw.Entry
	users   []string
}

// user is the buyer of the entry id (in the list).
func (l entryList) user(id string) string {
	i, _ := slices.BinarySearchFunc(l.entries, id, func(e draw.Entry, id string) int { return strings.Compare(e.ID, id) })
	return l.users[i]
}

// drawEntries reads the sale's entries, sorted by id: one query, its
// rows scanned as they come, so a million entries cost their fields
// and no more.
func drawEntries(tx *gorm.DB, activityID int64) (entryList, error) {
	var n int
	if err := tx.Raw("SELECT entries FROM activity_draws WHERE activity_id = ?", activityID).Scan(&n).Error; err != nil {
		return entryList{}, err
	}
	rows, err := tx.Raw("SELECT entry_id, user_id, item_id, quantity FROM draw_entries WHERE activity_id = ?", activityID).Rows()
	if err != nil {
		return entryList{}, err
	}
	defer rows.Close()
	type entry struct {
		draw.Entry
		user string
	}
	list := make([]entry, 0, n)
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.ID, &e.user, &e.ItemID, &e.Quantity); err != nil {
			return entryList{}, err
		}
		list = append(list, e)
	}
	if err := rows.Err(); err != nil {
		return entryList{}, err
	}
	slices.SortFunc(list, func(a, b entry) int { return strings.Compare(a.ID, b.ID) })
	out := entryList{entries: make([]draw.Entry, len(list)), users: make([]string, len(list))}
	for i, e := range list {
		out.entries[i], out.users[i] = e.Entry, e.user
	}
	return out, nil
}

// insertResults writes page, ranking rows with places[i] the alternate
// place of page[i] (nil for a winner), in one INSERT, each row owing its
// entry's first event.
func insertResults(tx *gorm.DB, page []draw.Picked, places []*int) error {
	var q strings.Builder
	q.WriteString("INSERT INTO draw_results (activity_id, draw_rank, entry_id, item_id, quantity, user_id, outcome, alternate, event_seq) VALUES ")
	args := make([]any, 0, 9*len(page))
	for i, p := range page {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,?,?,?,?,?)")
		args = append(args, p.ActivityID, p.Rank, p.EntryID, p.ItemID, p.Quantity, p.UserID, p.Outcome, places[i], firstEventOwed)
	}
	return tx.Exec(q.String(), args...).Error
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
// It holds the whole record: the api serves one a page at a time
// (DrawHead, DrawRanking).
func (s *Draws) DrawRecord(ctx context.Context, activity int64) (draw.Record, error) {
	rec, n, err := s.DrawHead(ctx, activity)
	if err != nil || rec.State != draw.StateDrawn {
		return rec, err
	}
	rec.Entries = make([]draw.Ranked, 0, n)
	err = s.DrawRanking(ctx, activity, func(page []draw.Ranked) error {
		rec.Entries = append(rec.Entries, page...)
		return nil
	})
	if err != nil {
		return draw.Record{}, err
	}
	return rec, nil
}

// DrawHead is the sale's draw as published but its entries, and how many
// entries the draw ranked (0 before it ran): the commitment always, and
// once drawn the seed, the digest, the sizes' stock at the draw and the
// restocks before it. order.ErrNotFound for a sale that is not a draw.
func (s *Draws) DrawHead(ctx context.Context, activity int64) (draw.Record, int64, error) {
	tx := s.db(ctx)
	var d drawRow
	if err := tx.Where("activity_id = ?", activity).Take(&d).Error; err != nil {
		return draw.Record{}, 0, wrap("read draw", err)
	}
	// The commitment as stored when the sale was made, not recomputed from
	// the seed: a seed changed since no longer matches it, and draw.Verify
	// says so.
	rec := draw.Record{ActivityID: activity, State: d.State, Commitment: d.Commitment}
	if d.State != draw.StateDrawn {
		return rec, 0, nil
	}
	var seed draw.Seed
	copy(seed[:], d.Seed)
	rec.Seed = seed.String()
	if d.EntriesDigest != nil {
		rec.Digest = *d.EntriesDigest
	}
	if d.Sizes != nil {
		if err := json.Unmarshal([]byte(*d.Sizes), &rec.Sizes); err != nil {
			return draw.Record{}, 0, fmt.Errorf("read draw %d: its sizes: %w", activity, err)
		}
	}
	restocks, err := drawRestocks(tx, activity, rec.Sizes, d.DrawnAt)
	if err != nil {
		return draw.Record{}, 0, wrap("read draw", err)
	}
	rec.Restocks = restocks
	return rec, d.Entries, nil
}

// DrawRanking gives each page of the sale's ranking, in rank order, to
// each as it is read: recordPage rows a query, each the next after the
// last rank read (keyset on the primary key, so a page costs the same
// at the end of a million entries as at the start), and a page is
// reused once each returns. An error of each stops the read and is
// returned.
func (s *Draws) DrawRanking(ctx context.Context, activity int64, each func([]draw.Ranked) error) error {
	tx := s.db(ctx)
	page := make([]draw.Ranked, 0, recordPage)
	var batch []resultRow
	// FindInBatches pages by a single-column primary key, which
	// draw_results has not.
	for last := 0; ; {
		batch = batch[:0]
		err := tx.Select("draw_rank", "entry_id", "item_id", "quantity", "outcome").Where("activity_id = ? AND draw_rank > ?", activity, last).
			Order("draw_rank").Limit(recordPage).Find(&batch).Error
		if err != nil {
			return wrap("read draw", err)
		}
		if len(batch) == 0 {
			return nil
		}
		page = page[:0]
		for _, r := range batch {
			page = append(page, draw.Ranked{Entry: draw.Entry{ID: r.EntryID, ItemID: r.ItemID, Quantity: r.Quantity}, Outcome: r.Outcome})
		}
		if err := each(page); err != nil {
			return err
		}
		if len(batch) < recordPage {
			return nil
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

// DrawSales lists the draw sales that end after endsAfter, or the ones
// of ids among them when ids is not nil.
func (s *Draws) DrawSales(ctx context.Context, endsAfter time.Time, ids []int64) ([]int64, error) {
	q := s.db(ctx).Table("activity_draws").
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
func (s *Draws) DrawAudit(ctx context.Context, activity int64) (DrawAudit, error) {
	var a DrawAudit
	g := s.db(ctx)
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
