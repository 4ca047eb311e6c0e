package orderdb

import (
	"context"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
)

// What becomes of a draw's alternates after the draw (0020): promoted when
// an order of theirs commits CREATED, not selected when their sale ends
// without giving them one. Each writes the entry's event in the unit that
// makes it so.

// PromotedAlternates lists the alternates whose current order number is
// one of orderNos, in ranking order (ctx's unit writes those orders:
// fulfilment). An alternate keeps the number of an order MySQL holds
// CREATED: only a number whose reserve Redis refused (no order exists) or
// whose order FAILED is taken back.
func (s *Draws) PromotedAlternates(ctx context.Context, orderNos []string) ([]draw.Picked, error) {
	if len(orderNos) == 0 {
		return nil, nil
	}
	return picks(s.db(ctx).Model(&resultRow{}).Where("order_no IN ? AND outcome = ?", orderNos, draw.Alternate),
		"read the promoted alternates")
}

// NotSelected marks, in ctx's unit, the next alternates of draw sale
// activity after the rank after, up to limit of them, that its end left
// without an order, and returns them (the service writes their
// entry.not_selected in the same unit): a sale that ended at now or was
// cancelled, as MySQL holds it, and an alternate without an order number
// or whose order MySQL holds FAILED (final: after the end no number is
// taken back, nor given). An alternate whose order MySQL does not hold yet
// (on its way) is left for a later call: that order may still commit
// CREATED, a promotion.
//
// It finds them with a read that locks nothing, then locks their rows (in
// the order of their ids, as every unit that numbers several entries'
// events does) and marks only the ones still so: a unit numbering an
// order for one (NumberPick), or marking it, commits before or after, and
// the later one finds it changed. A retry after a lost answer finds them
// marked and returns the ones left.
func (s *Draws) NotSelected(ctx context.Context, activity int64, now time.Time, after, limit int) (draw.Ended, error) {
	g := s.db(ctx)
	var out draw.Ended
	var sale activityRow
	if err := g.Select("ends_at", "cancelled_at").Where("id = ?", activity).Take(&sale).Error; err != nil {
		return out, wrap("find the alternates not selected", err)
	}
	switch {
	case sale.CancelledAt != nil:
		out.Reason = order.ReasonSaleCancelled
	case !now.Before(sale.EndsAt):
		out.Reason = order.ReasonSaleEnded
	default:
		return out, nil
	}
	var found []struct {
		EntryID  string
		DrawRank int
	}
	err := g.Raw(`SELECT r.entry_id, r.draw_rank FROM draw_results r LEFT JOIN orders o ON o.order_no = r.order_no
		WHERE r.activity_id = ? AND r.outcome = ? AND r.not_selected = 0 AND r.draw_rank > ?
		AND (r.order_no IS NULL OR o.status = ?) ORDER BY r.draw_rank LIMIT ?`,
		activity, draw.Alternate, after, string(order.Failed), limit).Scan(&found).Error
	if err != nil || len(found) == 0 {
		return out, wrap("find the alternates not selected", err)
	}
	out.Last = found[len(found)-1].DrawRank
	ids := make([]string, len(found))
	for i, f := range found {
		ids[i] = f.EntryID
	}
	var rows []resultRow
	if err := g.Raw("SELECT * FROM draw_results WHERE entry_id IN ? FOR UPDATE", ids).Scan(&rows).Error; err != nil {
		return out, wrap("find the alternates not selected", err)
	}
	failed, err := s.failedOrders(g, rows)
	if err != nil {
		return out, err
	}
	mark := make([]string, 0, len(rows))
	for _, r := range rows {
		if r.NotSelected || r.OrderNo != nil && !failed[*r.OrderNo] {
			continue
		}
		mark = append(mark, r.EntryID)
		out.Picks = append(out.Picks, r.pick())
	}
	if len(mark) == 0 {
		return out, nil
	}
	if err := g.Model(&resultRow{}).Where("entry_id IN ?", mark).UpdateColumn("not_selected", true).Error; err != nil {
		return draw.Ended{}, wrap("mark the alternates not selected", err)
	}
	slices.SortFunc(out.Picks, func(a, b draw.Picked) int { return a.Rank - b.Rank })
	return out, nil
}

// failedOrders reads which of the orders rows are numbered for MySQL holds
// FAILED. The read locks nothing: FAILED is final, so an order it shows
// FAILED is, and one it shows otherwise, or not at all, is left alone.
func (s *Draws) failedOrders(g *gorm.DB, rows []resultRow) (map[string]bool, error) {
	var nos []string
	for _, r := range rows {
		if r.OrderNo != nil {
			nos = append(nos, *r.OrderNo)
		}
	}
	failed := map[string]bool{}
	if len(nos) == 0 {
		return failed, nil
	}
	var got []string
	err := g.Model(&orderRow{}).Where("order_no IN ? AND status = ?", nos, string(order.Failed)).Pluck("order_no", &got).Error
	if err != nil {
		return nil, wrap("find the alternates not selected", err)
	}
	for _, no := range got {
		failed[no] = true
	}
	return failed, nil
}

// SettleDraw records that every alternate of the ended draw sale activity
// had its last event (promoted, or not selected), unless one has not: an
// alternate neither marked nor holding an order MySQL has (CREATED or
// after), so one without a number, with a FAILED order, or with one still
// on its way. It reports whether the draw is settled. The read locks
// nothing: an alternate only ever leaves that set (a mark is final, and so
// is an order that is not FAILED), so a read older than the update can
// only find more of them.
func (s *Draws) SettleDraw(ctx context.Context, activity int64) (bool, error) {
	g := s.db(ctx)
	var open []int
	err := g.Raw(`SELECT r.draw_rank FROM draw_results r LEFT JOIN orders o ON o.order_no = r.order_no
		WHERE r.activity_id = ? AND r.outcome = ? AND r.not_selected = 0 AND (o.order_no IS NULL OR o.status = ?) LIMIT 1`,
		activity, draw.Alternate, string(order.Failed)).Scan(&open).Error
	if err != nil || len(open) > 0 {
		return false, wrap("settle the draw", err)
	}
	err = g.Model(&drawRow{}).Where("activity_id = ? AND state = ? AND settled_at IS NULL", activity, draw.StateDrawn).
		UpdateColumn("settled_at", gorm.Expr("NOW(3)")).Error
	return err == nil, wrap("settle the draw", err)
}

// DrawsToSettle lists the drawn sales that ended at now (or were
// cancelled) whose alternates have not all had their last event (as many
// as DrawnLive lists: a draw stays listed only while an alternate's order
// is on its way).
func (s *Draws) DrawsToSettle(ctx context.Context, now time.Time) ([]int64, error) {
	var ids []int64
	err := s.db(ctx).Table("activity_draws").Select("activity_draws.activity_id").
		Joins("JOIN activities ON activities.id = activity_draws.activity_id").
		Where("activity_draws.state = ? AND activity_draws.settled_at IS NULL AND (activities.ends_at <= ? OR activities.cancelled_at IS NOT NULL)",
			draw.StateDrawn, now.UTC()).
		Order("activity_draws.activity_id").Limit(1000).Pluck("activity_draws.activity_id", &ids).Error
	return ids, wrap("list the draws to settle", err)
}
