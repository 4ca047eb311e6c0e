package orderdb

import (
	"context"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
)

func (r resultRow) pick() draw.Picked {
	p := draw.Picked{ActivityID: r.ActivityID, EntryID: r.EntryID, Rank: r.DrawRank, ItemID: r.ItemID, Quantity: r.Quantity, UserID: r.UserID, Outcome: r.Outcome}
	if r.OrderNo != nil {
		p.OrderNo = *r.OrderNo
	}
	return p
}

func picks(q *gorm.DB, op string) ([]draw.Picked, error) {
	return findAs(q.Order("draw_rank"), op, resultRow.pick)
}

// Results lists the sale's ranking, every entry with its outcome, in
// ranking order (none before the draw ran).
func (s *Draws) Results(ctx context.Context, activity int64) ([]draw.Picked, error) {
	return picks(s.db(ctx).Model(&resultRow{}).Where("activity_id = ?", activity), "read the draw's results")
}

// Unannounced takes, in ctx's unit, the next page of the drawn sale's
// ranking after rank after whose entries are owed their first event
// (entry.won, entry.alternate), at most limit, in rank order: it locks
// those rows and counts that event on them (event_seq 1), so the caller
// writes the events in the same unit, and a unit that rolls back leaves
// them owed. The page is found by a plain read (a locking one would lock
// every row it passed over), then locked by key, and those another unit
// announced meanwhile are left out.
func (s *Draws) Unannounced(ctx context.Context, activity int64, after, limit int) ([]draw.Picked, error) {
	tx := s.db(ctx)
	var ranks []int
	err := tx.Model(&resultRow{}).Where("activity_id = ? AND draw_rank > ? AND event_seq = ?", activity, after, firstEventOwed).
		Order("draw_rank").Limit(limit).Pluck("draw_rank", &ranks).Error
	if err != nil || len(ranks) == 0 {
		return nil, wrap("list entries owed their outcome", err)
	}
	out, err := picks(tx.Model(&resultRow{}).Clauses(clause.Locking{Strength: "UPDATE"}).
		Where("activity_id = ? AND draw_rank IN ? AND event_seq = ?", activity, ranks, firstEventOwed), "list entries owed their outcome")
	if err != nil || len(out) == 0 {
		return out, err
	}
	res := tx.Exec("UPDATE draw_results SET event_seq = 1 WHERE activity_id = ? AND draw_rank IN ? AND event_seq = ?",
		activity, ranksOf(out), firstEventOwed)
	if res.Error == nil && res.RowsAffected != int64(len(out)) {
		return nil, fmt.Errorf("count entries' outcomes: %d of %d rows", res.RowsAffected, len(out))
	}
	return out, wrap("count entries' outcomes", res.Error)
}

func ranksOf(ps []draw.Picked) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.Rank
	}
	return out
}

// Unissued lists the sale's entries numbered for an order whose event is
// not known to have reached Kafka, in ranking order.
func (s *Draws) Unissued(ctx context.Context, activity int64, limit int) ([]draw.Picked, error) {
	return picks(s.db(ctx).Model(&resultRow{}).Where("activity_id = ? AND order_no IS NOT NULL AND issued = 0", activity).Limit(limit), "list unissued picks")
}

// WinnersWithoutOrders lists the sale's winners not yet numbered for an
// order, in ranking order.
func (s *Draws) WinnersWithoutOrders(ctx context.Context, activity int64, limit int) ([]draw.Picked, error) {
	return picks(s.db(ctx).Model(&resultRow{}).Where("activity_id = ? AND outcome = ? AND order_no IS NULL", activity, draw.Won).Limit(limit), "list winners")
}

// NextAlternates lists the first alternates of the size without an order
// whose quantity is at most most, in ranking order (none that its sale's
// end left not selected).
func (s *Draws) NextAlternates(ctx context.Context, activity, item int64, most int64, limit int) ([]draw.Picked, error) {
	return picks(s.db(ctx).Model(&resultRow{}).Where("activity_id = ? AND item_id = ? AND outcome = ? AND order_no IS NULL AND quantity <= ? AND not_selected = 0",
		activity, item, draw.Alternate, most).Limit(limit), "list alternates")
}

// NumberPick gives the entry the order number no unless it has one, and
// returns the number it has: no, or the one an earlier run gave it (its
// answer lost, or another process's). The number is set before the order
// is reserved, so an entry never has two orders. An alternate its sale's
// end left not selected (NotSelected) gets none: order.ErrActivityNotActive.
func (s *Draws) NumberPick(ctx context.Context, entryID, no string) (string, error) {
	tx := s.db(ctx)
	if err := tx.Model(&resultRow{}).Where("entry_id = ? AND order_no IS NULL AND not_selected = 0", entryID).UpdateColumn("order_no", no).Error; err != nil {
		return "", wrap("number pick", err)
	}
	var r resultRow
	if err := tx.Select("order_no", "not_selected").Where("entry_id = ?", entryID).Take(&r).Error; err != nil {
		return "", wrap("number pick", err)
	}
	switch {
	case r.OrderNo == nil && r.NotSelected:
		return "", order.Errorf(order.ErrActivityNotActive, "number pick %s: the sale ended: the entry was not selected", entryID)
	case r.OrderNo == nil:
		return "", fmt.Errorf("number pick %s: %w: its number was taken back meanwhile", entryID, order.ErrUnavailable)
	}
	return *r.OrderNo, nil
}

// MarkIssued records that the event of the entry's order no reached Kafka.
func (s *Draws) MarkIssued(ctx context.Context, entryID, no string) error {
	err := s.db(ctx).Model(&resultRow{}).Where("entry_id = ? AND order_no = ?", entryID, no).UpdateColumn("issued", true).Error
	return wrap("mark pick issued", err)
}

// Unnumber takes the number no back from an alternate whose order Redis
// refused (the units it was promoted for went to another): it waits for
// the next units again, in its place.
func (s *Draws) Unnumber(ctx context.Context, entryID, no string) error {
	err := s.db(ctx).Model(&resultRow{}).Where("entry_id = ? AND order_no = ? AND issued = 0 AND outcome = ?", entryID, no, draw.Alternate).
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
func (s *Draws) DrawFree(ctx context.Context, activity int64, items []int64) (map[int64]int64, error) {
	var rows []struct {
		ItemID int64
		Free   int64
	}
	// The outcomes named so that idx_draw_results_size reads only the
	// numbered picks of each size, not the whole ranking.
	err := s.db(ctx).Raw(`SELECT s.item_id, s.stock - COALESCE((SELECT SUM(r.quantity) FROM draw_results r
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

// retriedReasons are the failures of an alternate's order that another
// order may not meet: MySQL found no unit for it (its units were not truly
// free), or the order was not written for a fault on the way. An order
// refused for what the buyer asked or is (over the limit, already buying,
// a reused key, a sale outside its window) would be refused again: that
// alternate keeps its FAILED order, and the end tells it it was not
// selected (NotSelected).
var retriedReasons = []string{order.ReasonOutOfStock, order.ReasonPublishFailed, order.ReasonReserveFailed}

// ReturnFailedAlternates takes the order number back from every alternate
// of the sale whose order MySQL recorded FAILED for one of retriedReasons
// (say the consumer found no stock for it): it is an alternate
// waiting in its place again, and is promoted with a new order when units
// come back. The FAILED order stays, named by the entry's key
// (order.DrawKey), a retired attempt. It finds them with a read that locks
// nothing (the drawer runs it every pass), then takes each number back
// only while the entry still has it; FAILED is final, so a retry after a
// lost answer finds nothing more to do. It returns how many it took back.
func (s *Draws) ReturnFailedAlternates(ctx context.Context, activity int64) (int64, error) {
	g := s.db(ctx)
	var failed []struct {
		EntryID string
		OrderNo string
	}
	err := g.Raw(`SELECT r.entry_id, r.order_no FROM draw_results r JOIN orders o ON o.order_no = r.order_no
		WHERE r.activity_id = ? AND r.outcome = ? AND r.order_no IS NOT NULL AND o.status = ? AND o.failure_reason IN ?`,
		activity, draw.Alternate, string(order.Failed), retriedReasons).Scan(&failed).Error
	if err != nil {
		return 0, wrap("return failed alternates", err)
	}
	var n int64
	for _, f := range failed {
		res := g.Model(&resultRow{}).Where("entry_id = ? AND order_no = ? AND not_selected = 0", f.EntryID, f.OrderNo).
			UpdateColumns(map[string]any{"order_no": nil, "issued": false})
		if res.Error != nil {
			return n, wrap("return failed alternates", res.Error)
		}
		n += res.RowsAffected
	}
	return n, nil
}
