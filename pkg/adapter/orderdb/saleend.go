package orderdb

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

// EndActivity ends a running sale at now: ends_at moves to now (the API
// instances refuse new orders once their copy of the activity, at most
// activity.CopyTTL old, shows it). activity.CancelNow also marks it cancelled
// (cancelled_at, the moment the cancel took effect by MySQL's clock: the
// first cancel's), after which the closer closes its CREATED orders. Ending
// a sale that has ended already changes nothing (cancelling one still marks
// it); a sale that has not started is order.ErrActivityNotActive: change its
// times instead.
func (s *Activities) EndActivity(ctx context.Context, id int64, now time.Time, how activity.Ending) (activity.Activity, error) {
	now = now.UTC()
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		row, err := lockActivity(tx, id)
		if err != nil {
			return err
		}
		if now.Before(row.StartsAt) {
			return order.Errorf(order.ErrActivityNotActive, "the sale has not started (it starts at %s): change its times with PATCH",
				row.StartsAt.UTC().Format(time.RFC3339))
		}
		set := map[string]any{}
		if now.Before(row.EndsAt) {
			set["ends_at"] = now
		}
		if how == activity.CancelNow {
			// MySQL's clock when the cancel takes effect, after the lock:
			// a payment the cancel waited for (saleCancelled) committed
			// before this statement, so its updated_at, by the same clock,
			// is never later. now was read before the wait.
			set["cancelled_at"] = gorm.Expr("COALESCE(cancelled_at, NOW(3))")
		}
		if len(set) == 0 {
			return nil
		}
		return tx.Model(&activityRow{}).Where("id = ?", id).Updates(set).Error
	})
	if err != nil {
		return activity.Activity{}, wrap("end activity", err)
	}
	return s.Activity(ctx, id)
}

// PatchActivity changes a sale's times, per-user limit or bucket count
// while it starts more than activity.SettingsGuard after now (every instance
// then sees the change before it opens); later, order.ErrActivityStarted.
// The result must still be within the range of order.CheckSaleTimes
// (order.ErrInvalidArgument).
// Once the sale was warmed up, its bucket count, its items and a later end
// are activity.ErrSettingLocked (checkChange). A window or items that overlap
// another sale of one of its items are order.ErrItemInAnotherSale
// (checkOwner).
func (s *Activities) PatchActivity(ctx context.Context, id int64, ch activity.Patch, now time.Time) (activity.Activity, error) {
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		row, err := lockActivity(tx, id)
		if err != nil {
			return err
		}
		if err := activity.CheckChangeable(row.StartsAt, now); err != nil {
			return err
		}
		set := map[string]any{}
		starts, ends := row.StartsAt, row.EndsAt
		if ch.StartsAt != nil {
			starts = ch.StartsAt.UTC()
			set["starts_at"] = starts
		}
		if ch.EndsAt != nil {
			ends = ch.EndsAt.UTC()
			set["ends_at"] = ends
		}
		if ch.PerUserLimit != nil {
			set["per_user_limit"] = *ch.PerUserLimit
		}
		if ch.StockBuckets != nil {
			set["stock_buckets"] = *ch.StockBuckets
		}
		if err := activity.CheckTimes(starts, ends, now); err != nil {
			return err
		}
		if err := changeRoom(tx, row, ch, starts, now); err != nil {
			return err
		}
		if err := changeDraw(tx, row, ch, starts, ends, now); err != nil {
			return err
		}
		if ch.Access != nil {
			if err := checkAccess(tx, row.ID, *ch.Access, ch.Room != nil); err != nil {
				return err
			}
			set["access"] = string(*ch.Access)
		}
		if err := checkOwner(tx, row, ch, starts, ends, now); err != nil {
			return err
		}
		lists, err := checkChange(tx, row, ch)
		if err != nil {
			return err
		}
		changed, err := keySettingsChange(tx, row, ch)
		if err != nil {
			return err
		}
		if changed {
			set["key_settings_changed_at"] = gorm.Expr("NOW(3)")
		}
		if ch.Items != nil {
			a := activity.Activity{ID: id, Items: append([]activity.Item(nil), ch.Items...)}
			if err := priceItems(a.Items, lists); err != nil {
				return err
			}
			set["item_id"] = a.Items[0].ItemID
			set["sale_price"], set["currency"] = priceColumns(a.Items[0].SalePrice)
			if err := tx.Where("activity_id = ?", id).Delete(&saleItemRow{}).Error; err != nil {
				return err
			}
			if err := tx.Create(saleItemRows(a)).Error; err != nil {
				return err
			}
		}
		if len(set) == 0 {
			return nil
		}
		return tx.Model(&activityRow{}).Where("id = ?", id).Updates(set).Error
	}, itemSalesTx)
	if err != nil {
		return activity.Activity{}, wrap("change activity", err)
	}
	return s.Activity(ctx, id)
}

// CancelledUnpaid lists up to limit CREATED orders of cancelled sales
// (activity 0: of every cancelled sale), a sale's by id.
func (s *Orders) CancelledUnpaid(ctx context.Context, activity int64, limit int) ([]string, error) {
	// It runs every closer pass, so it reads only what it lists: the
	// cancelled sales by idx_activities_cancelled, then each one's CREATED
	// orders by idx_orders_activity_status (0011), whose entries are in id
	// order within a sale. No ORDER BY: the join streams in that order
	// and stops at limit rows, where sorting would read every unpaid
	// order of every cancelled sale first (and, ordered by o.id alone,
	// the optimizer scanned the whole orders table by its primary key).
	sales, where, args := "activities a FORCE INDEX (idx_activities_cancelled)", "", []any{}
	if activity != 0 {
		sales, where, args = "activities a", " AND a.id = ?", []any{activity}
	}
	q := `SELECT o.order_no FROM ` + sales + `
		STRAIGHT_JOIN orders o FORCE INDEX (idx_orders_activity_status) ON o.activity_id = a.id AND o.status = 'CREATED'
		WHERE a.cancelled_at IS NOT NULL` + where + ` LIMIT ?`
	var nos []string
	err := s.db(ctx).Raw(q, append(args, limit)...).Scan(&nos).Error
	return nos, wrap("list cancelled unpaid", err)
}

// lockActivity reads an activity's row for update inside tx.
func lockActivity(tx *gorm.DB, id int64) (activityRow, error) {
	var row activityRow
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", id).Take(&row).Error
	return row, err
}

// checkAccess refuses, inside tx with the activity's row locked, an access
// the sale cannot have (activity.Activity.CheckAccess): code_priority
// without the room the sale has or the change gives it (newRoom).
func checkAccess(tx *gorm.DB, id int64, mode access.Mode, newRoom bool) error {
	if mode != access.CodePriority || newRoom {
		return nil
	}
	var rooms int64
	if err := tx.Table("activity_rooms").Where("activity_id = ?", id).Count(&rooms).Error; err != nil {
		return err
	}
	a := activity.Activity{Access: mode}
	if rooms > 0 {
		a.Room.AdmitPerSecond = 1 // a room, whatever its rate
	}
	return a.CheckAccess()
}
