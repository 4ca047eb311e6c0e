package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
)

// MaxRestock bounds the units of one restock.
const MaxRestock = 1_000_000

type restockBody struct {
	Quantity *int64 `json:"quantity"`
}

// RestockView is the body of a restock's answer: the restock and the
// item's stock after it, as itemStock reports it.
type RestockView struct {
	ItemID    int64 `json:"item_id"`
	RestockID int64 `json:"restock_id"`
	Quantity  int64 `json:"quantity"`
	// Replayed: the Idempotency-Key restocked before; nothing was added now.
	Replayed   bool   `json:"replayed"`
	DBStock    int64  `json:"db_stock"`
	RedisStock *int64 `json:"redis_stock"`
	InFlight   int64  `json:"in_flight"`
}

// restock adds units to an item in MySQL, then in Redis, once per
// Idempotency-Key: MySQL records the restock under the key in the
// transaction that adds the units; the Redis step adds them once per
// restock (a marker), so a retry with the same key runs only that step
// again. If Redis fails after MySQL committed the answer is 503 and the
// retry with the same key, or else the reconciler's next repair, finishes
// it (docs/adr/0001, "Unknown outcomes").
func (s *Server) restock(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	key, ok := idempotencyKeyOr400(c)
	if !ok {
		return
	}
	var b restockBody
	if !s.decodeOr400(c, &b) {
		return
	}
	if b.Quantity == nil || *b.Quantity < 1 || *b.Quantity > MaxRestock {
		s.fail(c, order.Errorf(order.ErrInvalidArgument, "quantity must be an integer from 1 to %d", MaxRestock))
		return
	}
	ctx := c.Request.Context()
	rs, created, err := s.db.Restock(ctx, id, key, *b.Quantity)
	if err != nil {
		s.fail(c, err)
		return
	}
	log := s.log.With("request_id", c.GetString(ctxRequestID), "item_id", id, "restock_id", rs.ID, "quantity", rs.Quantity)
	// Where the item's keys are: with the first item of its latest sale.
	tag, err := s.db.ItemTag(ctx, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	item := stockredis.In(tag, id)
	if !rs.Applied {
		res, err := s.intake.Stock.Restock(ctx, item, rs.ID, rs.Quantity)
		if err != nil {
			// MySQL has the units; Redis may or may not (a lost answer).
			// The same key finishes it, or the reconciler's repair does.
			log.Warn("restock recorded in MySQL, Redis step not done; retry with the same key", "err", err)
			s.fail(c, err)
			return
		}
		// Not warmed: the item's stock is not in Redis (or a bucket is
		// missing), and the warm-up that loads it reads MySQL, which has
		// the units. The restock stays pending: the warm-up records the
		// restocks it loads, and a retry with this key or the
		// reconciler's repair finishes any its figure did not include.
		if res.Warmed {
			if err := s.db.MarkRestockApplied(ctx, rs.ID); err != nil {
				// Redis has the units; the record only tells the reconciler
				// it need not finish them (it would add nothing anyway).
				log.Warn("restock applied in Redis but not recorded", "err", err)
			}
		}
		if res.Added > 0 {
			s.intake.ClearSoldOut(id)
		}
		log.Info("item restocked", "new", created, "redis_added", res.Added, "redis_warmed", res.Warmed)
	}
	db, err := s.db.ItemStock(ctx, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	snap, err := s.intake.Stock.Stock(ctx, item)
	if err != nil {
		s.fail(c, err)
		return
	}
	v := RestockView{ItemID: id, RestockID: rs.ID, Quantity: rs.Quantity, Replayed: !created, DBStock: db, InFlight: snap.Inflight}
	if snap.Warmed {
		v.RedisStock = &snap.Stock
	}
	c.JSON(http.StatusOK, v)
}
