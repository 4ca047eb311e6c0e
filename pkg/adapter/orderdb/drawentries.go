package orderdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
)

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

var errEntered = errors.New("already entered")

// Enter records a buyer's entry and reports whether it is new. A buyer who
// entered already gets that entry back, unchanged, so a retry of a request
// whose answer was lost finds the entry it made. An entry after the list
// froze (entries_close_at, or the draw ran), before the sale started
// (MySQL's starts_at) or after it ended (MySQL's ends_at, an end or a
// cancel included) is order.ErrActivityNotActive.
func (s *Draws) Enter(ctx context.Context, e draw.NewEntry) (draw.BuyerEntry, bool, error) {
	var b [draw.EntryIDLen / 2]byte
	_, _ = rand.Read(b[:])
	row := entryRow{EntryID: hex.EncodeToString(b[:]), ActivityID: e.ActivityID, UserID: e.UserID, ItemID: e.ItemID,
		Quantity: e.Quantity, CreatedAt: e.At.UTC()}
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
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
		// activity.CopyTTL old) takes no entry outside it.
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
		got, err := s.EntryOf(ctx, e.ActivityID, e.UserID)
		return got, false, err
	case err != nil:
		return draw.BuyerEntry{}, false, wrap("enter draw", err)
	}
	return row.entry(), true, nil
}

func (r entryRow) entry() draw.BuyerEntry {
	return draw.BuyerEntry{Entry: draw.Entry{ID: r.EntryID, ItemID: r.ItemID, Quantity: r.Quantity}, ActivityID: r.ActivityID,
		UserID: r.UserID, CreatedAt: r.CreatedAt}
}

// EntryOf returns the buyer's entry in the sale with its outcome,
// order.ErrNotFound if they have none.
func (s *Draws) EntryOf(ctx context.Context, activity int64, user string) (draw.BuyerEntry, error) {
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
	tx := s.db(ctx)
	err := tx.Table("draw_entries").
		Select("draw_entries.*, draw_results.draw_rank, draw_results.outcome, draw_results.alternate, draw_results.order_no, draw_results.issued, orders.status AS order_status").
		Joins("LEFT JOIN draw_results ON draw_results.entry_id = draw_entries.entry_id").
		Joins("LEFT JOIN orders ON orders.order_no = draw_results.order_no").
		Where("draw_entries.activity_id = ? AND draw_entries.user_id = ?", activity, user).Take(&row).Error
	if err != nil {
		return draw.BuyerEntry{}, wrap("read entry", err)
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
