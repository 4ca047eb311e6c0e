package reconcile

import (
	"context"

	"github.com/seckill/seckill/pkg/domain/reservation"
)

// finishRestocks runs the Redis step of every restock of item that MySQL
// has not recorded as applied, and records it. That step adds a restock's
// units once per restock id (a marker beside the stock), so it is safe
// while the API runs it for the same restock; a restock whose step the
// API already ran, or that a warm-up's figure included, adds nothing and
// is only recorded. A restock of an item whose stock is not in Redis is
// left pending: the warm-up that loads the stock carries it, or a later
// pass adds it. It runs before the item is read, so the reading that
// follows sees the units in Redis.
func (c *Checker) finishRestocks(ctx context.Context, item reservation.Item, l Lock) error {
	pending, err := c.DB.PendingRestocks(ctx, item.ID)
	if err != nil {
		return err
	}
	for _, r := range pending {
		if err := c.before(ctx, item, l); err != nil {
			return err
		}
		res, err := c.Stock.Restock(ctx, item, r.ID, r.Quantity)
		if err != nil {
			return err
		}
		if !res.Warmed {
			c.Log.Info("restock left for the warm-up: the item's stock is not in Redis", "item_id", item.ID, "restock_id", r.ID,
				"quantity", r.Quantity, "added_now", res.Added)
			continue
		}
		if err := c.DB.MarkRestockApplied(ctx, r.ID); err != nil {
			return err
		}
		c.Log.Info("restock finished in Redis", "item_id", item.ID, "restock_id", r.ID, "quantity", r.Quantity,
			"added_now", res.Added)
	}
	return nil
}
