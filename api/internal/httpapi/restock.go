package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

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
// Idempotency-Key (sales.Restock). If Redis fails after MySQL committed the
// answer is 503 and the retry with the same key, or else the reconciler's
// next repair, finishes it (docs/adr/0001, "Unknown outcomes").
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
	r, err := s.sales.Restock(s.logContext(c), id, key, *b.Quantity)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, RestockView{ItemID: id, RestockID: r.Restock.ID, Quantity: r.Restock.Quantity, Replayed: r.Replayed,
		DBStock: r.DBStock, RedisStock: r.RedisStock, InFlight: r.InFlight})
}
