package httpapi

import (
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/sales"
)

type createItemBody struct {
	Name     string           `json:"name"`
	Stock    *int64           `json:"stock"`
	Price    optional[int64]  `json:"price"`
	Currency optional[string] `json:"currency"`
}

// ItemView is the body of a created item.
type ItemView struct {
	ItemID int64  `json:"item_id"`
	Name   string `json:"name"`
	Stock  int64  `json:"stock"`
	Price
}

// Price is a price's two fields in a body, both left out when there is no
// price: an amount in the currency's minor units and its ISO 4217 code.
type Price struct {
	Price    *int64 `json:"price,omitempty"`
	Currency string `json:"currency,omitempty"`
}

func priceView(m order.Money) Price {
	if !m.Priced() {
		return Price{}
	}
	return Price{Price: &m.Amount, Currency: m.Currency}
}

func (s *Server) createItem(c *gin.Context) {
	var b createItemBody
	if !s.decodeOr400(c, &b) {
		return
	}
	// Characters, not bytes, as the spec's maxLength counts; blank is
	// unicode.IsSpace, the set the spec's pattern names.
	b.Name = strings.TrimSpace(b.Name)
	if b.Name == "" || utf8.RuneCountInString(b.Name) > 200 {
		s.fail(c, order.Errorf(order.ErrInvalidArgument, "name must be 1-200 characters, not all blank"))
		return
	}
	if b.Stock == nil || *b.Stock < 0 || *b.Stock > 1_000_000_000 {
		s.fail(c, order.Errorf(order.ErrInvalidArgument, "stock must be an integer from 0 to 1000000000"))
		return
	}
	if err := refuseNull(field{"price", b.Price}, field{"currency", b.Currency}); err != nil {
		s.fail(c, err)
		return
	}
	price, err := order.OptionalPrice("price", b.Price.ptr(), b.Currency.ptr())
	if err != nil {
		s.fail(c, err)
		return
	}
	it, err := s.sales.CreateItem(c.Request.Context(), b.Name, *b.Stock, price)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, ItemView{ItemID: it.ID, Name: it.Name, Stock: it.Stock, Price: priceView(it.Price)})
}

// timePrecision is what MySQL keeps of a sale's times (DATETIME(3)):
// ends_at must be after starts_at at it, or the row's CHECK refuses them.
const timePrecision = time.Millisecond

type createActivityBody struct {
	ItemID               int64            `json:"item_id"`
	Items                []saleItemBody   `json:"items"`
	StartsAt             time.Time        `json:"starts_at"`
	EndsAt               time.Time        `json:"ends_at"`
	PerUserLimit         optional[int]    `json:"per_user_limit"`
	PaymentWindowSeconds optional[int]    `json:"payment_window_seconds"`
	StockBuckets         optional[int]    `json:"stock_buckets"`
	SalePrice            optional[int64]  `json:"sale_price"`
	Currency             optional[string] `json:"currency"`
	// WaitingRoom left out (or null) is a sale without a room.
	WaitingRoom *waitingRoomBody `json:"waiting_room"`
	// Mode is "first_come" (left out) or "draw", which needs
	// EntriesCloseAt.
	Mode           string     `json:"mode"`
	EntriesCloseAt *time.Time `json:"entries_close_at"`
	// Access is "open" (left out), "code_required" or "code_priority"
	// (a sale with a waiting room only).
	Access string `json:"access"`
}

// saleItemBody is one entry of a sale's items.
type saleItemBody struct {
	ItemID    int64           `json:"item_id"`
	Label     string          `json:"label"`
	SalePrice optional[int64] `json:"sale_price"`
}

// ActivityItemView is one item of a sale in an answer.
type ActivityItemView struct {
	ItemID    int64  `json:"item_id"`
	Label     string `json:"label,omitempty"`
	SalePrice *int64 `json:"sale_price,omitempty"`
	Currency  string `json:"currency,omitempty"`
}

// saleItemsView is the answer's view of a's items.
func saleItemsView(a activity.Activity) []ActivityItemView {
	out := make([]ActivityItemView, 0, len(a.Items))
	for _, it := range a.Items {
		p := priceView(it.SalePrice)
		out = append(out, ActivityItemView{ItemID: it.ItemID, Label: it.Label, SalePrice: p.Price, Currency: p.Currency})
	}
	return out
}

// ActivityView is the body of a created activity.
type ActivityView struct {
	ActivityID int64 `json:"activity_id"`
	// ItemID is the sale's first item (its only one for a sale of one).
	ItemID               int64              `json:"item_id"`
	Items                []ActivityItemView `json:"items"`
	StartsAt             time.Time          `json:"starts_at"`
	EndsAt               time.Time          `json:"ends_at"`
	PerUserLimit         int                `json:"per_user_limit"`
	PaymentWindowSeconds int                `json:"payment_window_seconds,omitempty"`
	StockBuckets         int                `json:"stock_buckets"`
	SalePrice            *int64             `json:"sale_price,omitempty"`
	Currency             string             `json:"currency,omitempty"`
	// WaitingRoom is left out for a sale without one.
	WaitingRoom *WaitingRoomView `json:"waiting_room,omitempty"`
	Mode        string           `json:"mode"`
	// Draw is left out for a first-come sale.
	Draw *DrawView `json:"draw,omitempty"`
	// Access is whom the sale takes (docs/codes.md).
	Access string `json:"access"`
}

func (s *Server) createActivity(c *gin.Context) {
	var b createActivityBody
	if !s.decodeOr400(c, &b) {
		return
	}
	if err := refuseNull(field{"per_user_limit", b.PerUserLimit}, field{"payment_window_seconds", b.PaymentWindowSeconds},
		field{"stock_buckets", b.StockBuckets}, field{"sale_price", b.SalePrice}, field{"currency", b.Currency}); err != nil {
		s.fail(c, err)
		return
	}
	n := sales.NewActivity{Sale: activity.Draft{ItemID: b.ItemID,
		StartsAt: b.StartsAt.Truncate(timePrecision), EndsAt: b.EndsAt.Truncate(timePrecision),
		PerUserLimit: b.PerUserLimit.ptr(), PaymentWindowSeconds: b.PaymentWindowSeconds.ptr(), StockBuckets: b.StockBuckets.ptr(),
		Access: b.Access,
	}, SalePrice: b.SalePrice.ptr(), Currency: b.Currency.ptr(), Mode: b.Mode, EntriesCloseAt: truncated(b.EntriesCloseAt),
		By: claimsOf(c).UserID}
	var err error
	if n.Items, err = pricedItems(b.Items); err != nil {
		s.fail(c, err)
		return
	}
	if b.WaitingRoom != nil {
		r, err := b.WaitingRoom.waitingRoom()
		if err != nil {
			s.fail(c, err)
			return
		}
		n.Room = &r
	}
	a, err := s.sales.Create(c.Request.Context(), n)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, activityView(a))
}

// pricedItems are the items of a sale as the operator listed them (nil
// for none), each with the sale price given for it.
func pricedItems(items []saleItemBody) ([]sales.PricedItem, error) {
	if items == nil {
		return nil, nil
	}
	out := make([]sales.PricedItem, len(items))
	for i, it := range items {
		if it.SalePrice.Null {
			return nil, order.Errorf(order.ErrInvalidArgument, "items[%d].sale_price must not be null: leave it out for the item's own price", i)
		}
		out[i] = sales.PricedItem{ItemID: it.ItemID, Label: it.Label, SalePrice: it.SalePrice.ptr()}
	}
	return out, nil
}

// truncated is t at the precision MySQL keeps (nil: nil).
func truncated(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	at := t.Truncate(timePrecision)
	return &at
}

// warmup loads a sale's stock into Redis now (sales.Warmup).
func (s *Server) warmup(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	w, err := s.sales.Warmup(s.logContext(c), sales.Warmup{ActivityID: id, By: claimsOf(c).UserID})
	if err != nil {
		s.fail(c, err)
		return
	}
	n := w.Units()
	s.log.Info("activity warmed up", "request_id", c.GetString(ctxRequestID), "activity_id", id, "item_id", w.Activity.ItemID, "redis_stock", n)
	c.JSON(http.StatusOK, gin.H{"activity_id": id, "item_id": w.Activity.ItemID, "redis_stock": n})
}

func (s *Server) itemStock(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	db, err := s.sales.ItemStock(ctx, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	tag, err := s.sales.ItemTag(ctx, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	snap, err := s.intake.Stock.Stock(ctx, reservation.In(tag, id))
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
