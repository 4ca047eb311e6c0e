package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/service/sales"
)

// activityView is the answer's view of a.
func activityView(a activity.Activity) ActivityView {
	sale := priceView(a.SalePrice)
	return ActivityView{ActivityID: a.ID, ItemID: a.ItemID, Items: saleItemsView(a), StartsAt: a.StartsAt.UTC(),
		EndsAt: a.EndsAt.UTC(), PerUserLimit: a.PerUserLimit, PaymentWindowSeconds: int(a.PaymentWindow / time.Second),
		StockBuckets: a.StockBuckets, SalePrice: sale.Price, Currency: sale.Currency, WaitingRoom: waitingRoomView(a.Room),
		Mode: a.Mode(), Draw: drawView(a.Draw), Access: string(a.AccessMode())}
}

// CancelledView is the body of a cancelled sale.
type CancelledView struct {
	ActivityView
	Cancelled bool `json:"cancelled"`
	// OrdersClosed is how many CREATED orders this request closed.
	OrdersClosed int `json:"orders_closed"`
}

// endActivity ends a running sale now, by the shared clock (sales.End).
func (s *Server) endActivity(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	a, err := s.sales.End(s.logContext(c), id, claimsOf(c).UserID)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("activity ended", "request_id", c.GetString(ctxRequestID), "activity_id", id, "item_id", a.ItemID,
		"ends_at", a.EndsAt.UTC())
	c.JSON(http.StatusOK, activityView(a))
}

// cancelActivity ends the sale now and closes its unpaid orders
// (sales.Cancel).
func (s *Server) cancelActivity(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	a, closed, err := s.sales.Cancel(s.logContext(c), id, claimsOf(c).UserID)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("activity cancelled", "request_id", c.GetString(ctxRequestID), "activity_id", id, "item_id", a.ItemID,
		"orders_closed", closed)
	c.JSON(http.StatusOK, CancelledView{ActivityView: activityView(a), Cancelled: true, OrdersClosed: closed})
}

type patchActivityBody struct {
	StartsAt     optional[time.Time] `json:"starts_at"`
	EndsAt       optional[time.Time] `json:"ends_at"`
	PerUserLimit optional[int]       `json:"per_user_limit"`
	StockBuckets optional[int]       `json:"stock_buckets"`
	Items        []saleItemBody      `json:"items"`
	// Currency is that of the items' sale prices (default: each item's).
	Currency optional[string] `json:"currency"`
	// WaitingRoom sets the sale's room (its seed stays once drawn).
	WaitingRoom *waitingRoomBody `json:"waiting_room"`
	// Access sets whom the sale takes (access.ParseMode).
	Access optional[string] `json:"access"`
}

// patchActivity changes a sale's settings (sales.Change).
func (s *Server) patchActivity(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	var b patchActivityBody
	if !s.decodeOr400(c, &b) {
		return
	}
	if err := refuseNull(field{"starts_at", b.StartsAt}, field{"ends_at", b.EndsAt}, field{"per_user_limit", b.PerUserLimit},
		field{"stock_buckets", b.StockBuckets}, field{"currency", b.Currency}, field{"access", b.Access}); err != nil {
		s.fail(c, err)
		return
	}
	for _, t := range []*optional[time.Time]{&b.StartsAt, &b.EndsAt} {
		t.Value = t.Value.Truncate(timePrecision)
	}
	ch := sales.Change{Change: activity.Change{StartsAt: b.StartsAt.ptr(), EndsAt: b.EndsAt.ptr(),
		PerUserLimit: b.PerUserLimit.ptr(), StockBuckets: b.StockBuckets.ptr()}, Currency: b.Currency.ptr(), By: claimsOf(c).UserID}
	if b.Access.Set {
		mode, err := access.ParseMode(b.Access.Value)
		if err != nil {
			s.fail(c, err)
			return
		}
		ch.Access = &mode
	}
	var err error
	if ch.Items, err = pricedItems(b.Items); err != nil {
		s.fail(c, err)
		return
	}
	if b.WaitingRoom != nil {
		r, err := b.WaitingRoom.waitingRoom()
		if err != nil {
			s.fail(c, err)
			return
		}
		ch.Room = &r
	}
	a, err := s.sales.Change(c.Request.Context(), id, ch)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("activity changed", "request_id", c.GetString(ctxRequestID), "activity_id", id,
		"starts_at", a.StartsAt.UTC(), "ends_at", a.EndsAt.UTC(), "per_user_limit", a.PerUserLimit, "stock_buckets", a.StockBuckets)
	c.JSON(http.StatusOK, activityView(a))
}
