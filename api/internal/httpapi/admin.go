package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/order"
)

type createItemBody struct {
	Name  string `json:"name"`
	Stock *int64 `json:"stock"`
}

func (s *Server) createItem(c *gin.Context) {
	var b createItemBody
	if !s.decodeOr400(c, &b) {
		return
	}
	b.Name = strings.TrimSpace(b.Name)
	if b.Name == "" || len(b.Name) > 200 {
		s.fail(c, order.Errorf(order.ErrInvalidArgument, "name must be 1-200 characters"))
		return
	}
	if b.Stock == nil || *b.Stock < 0 || *b.Stock > 1_000_000_000 {
		s.fail(c, order.Errorf(order.ErrInvalidArgument, "stock must be an integer from 0 to 1000000000"))
		return
	}
	it, err := s.db.CreateItem(c.Request.Context(), b.Name, *b.Stock)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"item_id": it.ID, "name": it.Name, "stock": it.Stock})
}

type createActivityBody struct {
	ItemID               int64     `json:"item_id"`
	StartsAt             time.Time `json:"starts_at"`
	EndsAt               time.Time `json:"ends_at"`
	PerUserLimit         *int      `json:"per_user_limit"`
	PaymentWindowSeconds *int      `json:"payment_window_seconds"`
	StockBuckets         *int      `json:"stock_buckets"`
}

// ActivityView is the body of a created activity.
type ActivityView struct {
	ActivityID           int64     `json:"activity_id"`
	ItemID               int64     `json:"item_id"`
	StartsAt             time.Time `json:"starts_at"`
	EndsAt               time.Time `json:"ends_at"`
	PerUserLimit         int       `json:"per_user_limit"`
	PaymentWindowSeconds int       `json:"payment_window_seconds,omitempty"`
	StockBuckets         int       `json:"stock_buckets"`
}

func (s *Server) createActivity(c *gin.Context) {
	var b createActivityBody
	if !s.decodeOr400(c, &b) {
		return
	}
	limit := 1
	if b.PerUserLimit != nil {
		limit = *b.PerUserLimit
	}
	buckets := 1
	if b.StockBuckets != nil {
		buckets = *b.StockBuckets
	}
	var problem string
	switch {
	case b.ItemID <= 0:
		problem = "item_id must be a positive integer"
	case b.StartsAt.IsZero() || b.EndsAt.IsZero():
		problem = "starts_at and ends_at are required (RFC 3339)"
	case !b.EndsAt.After(b.StartsAt):
		problem = "ends_at must be after starts_at"
	case limit < 1 || limit > order.MaxQuantity:
		problem = fmt.Sprintf("per_user_limit must be from 1 to %d", order.MaxQuantity)
	case b.PaymentWindowSeconds != nil && (*b.PaymentWindowSeconds < 1 || *b.PaymentWindowSeconds > 7*24*3600):
		problem = "payment_window_seconds must be from 1 to 604800"
	case buckets < 1 || buckets > order.MaxStockBuckets:
		problem = fmt.Sprintf("stock_buckets must be from 1 to %d", order.MaxStockBuckets)
	}
	if problem != "" {
		s.fail(c, order.Errorf(order.ErrInvalidArgument, "%s", problem))
		return
	}
	a := order.Activity{ItemID: b.ItemID, StartsAt: b.StartsAt, EndsAt: b.EndsAt, PerUserLimit: limit, StockBuckets: buckets}
	if b.PaymentWindowSeconds != nil {
		a.PaymentWindow = time.Duration(*b.PaymentWindowSeconds) * time.Second
	}
	a, err := s.db.CreateActivity(c.Request.Context(), a)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, ActivityView{ActivityID: a.ID, ItemID: a.ItemID, StartsAt: a.StartsAt.UTC(),
		EndsAt: a.EndsAt.UTC(), PerUserLimit: a.PerUserLimit, PaymentWindowSeconds: int(a.PaymentWindow / time.Second),
		StockBuckets: a.StockBuckets})
}

func (s *Server) warmup(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	act, n, err := s.intake.Warmup(c.Request.Context(), s.db, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("activity warmed up", "request_id", c.GetString(ctxRequestID), "activity_id", id, "item_id", act.ItemID, "redis_stock", n)
	c.JSON(http.StatusOK, gin.H{"activity_id": id, "item_id": act.ItemID, "redis_stock": n})
}

func (s *Server) itemStock(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	db, err := s.db.ItemStock(ctx, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	snap, err := s.intake.Stock.Stock(ctx, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	body := gin.H{"item_id": id, "db_stock": db, "redis_stock": nil, "in_flight": snap.Inflight}
	if snap.Warmed {
		body["redis_stock"] = snap.Stock
	}
	c.JSON(http.StatusOK, body)
}
