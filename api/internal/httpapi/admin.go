package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
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
	it, err := s.db.Activities.CreatePricedItem(c.Request.Context(), b.Name, *b.Stock, price)
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
}

// saleItemBody is one entry of a sale's items.
type saleItemBody struct {
	ItemID    int64           `json:"item_id"`
	Label     string          `json:"label"`
	SalePrice optional[int64] `json:"sale_price"`
}

// SaleItemView is one item of a sale in an answer.
type SaleItemView struct {
	ItemID    int64  `json:"item_id"`
	Label     string `json:"label,omitempty"`
	SalePrice *int64 `json:"sale_price,omitempty"`
	Currency  string `json:"currency,omitempty"`
}

// saleItemsView is the answer's view of a's items.
func saleItemsView(a order.Activity) []SaleItemView {
	out := make([]SaleItemView, 0, len(a.Items))
	for _, it := range a.Items {
		p := priceView(it.SalePrice)
		out = append(out, SaleItemView{ItemID: it.ItemID, Label: it.Label, SalePrice: p.Price, Currency: p.Currency})
	}
	return out
}

// ActivityView is the body of a created activity.
type ActivityView struct {
	ActivityID int64 `json:"activity_id"`
	// ItemID is the sale's first item (its only one for a sale of one).
	ItemID               int64          `json:"item_id"`
	Items                []SaleItemView `json:"items"`
	StartsAt             time.Time      `json:"starts_at"`
	EndsAt               time.Time      `json:"ends_at"`
	PerUserLimit         int            `json:"per_user_limit"`
	PaymentWindowSeconds int            `json:"payment_window_seconds,omitempty"`
	StockBuckets         int            `json:"stock_buckets"`
	SalePrice            *int64         `json:"sale_price,omitempty"`
	Currency             string         `json:"currency,omitempty"`
	// WaitingRoom is left out for a sale without one.
	WaitingRoom *WaitingRoomView `json:"waiting_room,omitempty"`
	Mode        string           `json:"mode"`
	// Draw is left out for a first-come sale.
	Draw *DrawView `json:"draw,omitempty"`
}

func (s *Server) createActivity(c *gin.Context) {
	var b createActivityBody
	if !s.decodeOr400(c, &b) {
		return
	}
	if err := refuseNull(field{"per_user_limit", b.PerUserLimit}, field{"payment_window_seconds", b.PaymentWindowSeconds},
		field{"stock_buckets", b.StockBuckets}); err != nil {
		s.fail(c, err)
		return
	}
	ns := order.NewSale{ItemID: b.ItemID,
		StartsAt: b.StartsAt.Truncate(timePrecision), EndsAt: b.EndsAt.Truncate(timePrecision),
		PerUserLimit: b.PerUserLimit.ptr(), PaymentWindowSeconds: b.PaymentWindowSeconds.ptr(), StockBuckets: b.StockBuckets.ptr(),
	}
	if b.Items != nil {
		ns.Items = make([]order.NewSaleItem, len(b.Items))
		for i, it := range b.Items {
			ns.Items[i] = order.NewSaleItem{ItemID: it.ItemID, Label: it.Label}
		}
	}
	a, err := ns.Activity(s.intake.Now())
	if err != nil {
		s.fail(c, err)
		return
	}
	if b.WaitingRoom != nil {
		if a.Room, err = b.WaitingRoom.waitingRoom(); err == nil {
			err = a.CheckRoom()
		}
		if err != nil {
			s.fail(c, err)
			return
		}
	}
	if err := s.saleDraw(&a, b.Mode, b.EntriesCloseAt); err != nil {
		s.fail(c, err)
		return
	}
	if err := refuseNull(field{"sale_price", b.SalePrice}, field{"currency", b.Currency}); err != nil {
		s.fail(c, err)
		return
	}
	ctx := c.Request.Context()
	if b.Items != nil {
		if b.SalePrice.Set {
			s.fail(c, order.Errorf(order.ErrInvalidArgument, "a sale of items takes each item's sale_price in items, not one sale_price"))
			return
		}
		if a.Items, err = s.saleItems(ctx, b.Items, b.Currency.ptr()); err != nil {
			s.fail(c, err)
			return
		}
	} else if a.SalePrice, err = s.salePrice(ctx, "sale_price", b.ItemID, b.SalePrice.ptr(), b.Currency.ptr()); err != nil {
		s.fail(c, err)
		return
	}
	// Redis first: the layout its keys have now (a lost answer is a 503,
	// never "no keys"); MySQL then checks the items' other sales with the
	// items' rows locked.
	live := map[int64]order.Layout{}
	for _, id := range a.ItemIDs() {
		l, err := s.intake.Stock.Layout(ctx, stockredis.In(a.ItemID, id))
		if err != nil {
			s.fail(c, err)
			return
		}
		live[id] = l
	}
	a, err = s.db.Activities.CreateSale(ctx, a, s.keyGuard(live))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, activityView(a))
}

// saleItems are the items of a sale as the operator listed them (already
// checked by order.CheckSaleItems), each with the sale price given for it
// in currency (or its item's).
func (s *Server) saleItems(ctx context.Context, items []saleItemBody, currency *string) ([]order.SaleItem, error) {
	out := make([]order.SaleItem, len(items))
	for i, it := range items {
		if it.SalePrice.Null {
			return nil, order.Errorf(order.ErrInvalidArgument, "items[%d].sale_price must not be null: leave it out for the item's own price", i)
		}
		price, err := s.salePrice(ctx, fmt.Sprintf("items[%d].sale_price", i), it.ItemID, it.SalePrice.ptr(), currency)
		if err != nil {
			return nil, err
		}
		out[i] = order.SaleItem{ItemID: it.ItemID, Label: it.Label, SalePrice: price}
	}
	return out, nil
}

// salePrice is the sale price the operator gave for item (field names it
// in errors), in currency or else the item's: zero when none was given.
func (s *Server) salePrice(ctx context.Context, field string, item int64, price *int64, currency *string) (order.Money, error) {
	if price != nil && currency == nil {
		// The sale is priced in the item's currency unless told otherwise.
		it, err := s.db.Activities.Item(ctx, item)
		if err != nil {
			return order.Money{}, err
		}
		if !it.Price.Priced() {
			return order.Money{}, order.Errorf(order.ErrInvalidArgument, "item %d has no price: give %s a currency", item, field)
		}
		currency = &it.Price.Currency
	}
	return order.OptionalPrice(field, price, currency)
}

// keyGuard is what a change of a sale is checked against: live, the layout
// Redis holds for each item (read just before), and how long each sale's
// keys live, by the rule the intake gives them their lifetimes with.
func (s *Server) keyGuard(live map[int64]order.Layout) orderdb.KeyGuard {
	return orderdb.KeyGuard{Live: live, Now: s.intake.Now(), KeysUntil: func(a order.Activity) time.Time {
		return a.KeysLiveUntil(s.intake.PaymentWindow)
	}}
}

func (s *Server) warmup(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	// This instance's copy of the sale may predate a change of the end or
	// bucket count for up to order.SettingsGuard: until then a warm-up
	// would lay out or time the keys by the old settings. Nothing written.
	if recent, err := s.db.Activities.KeySettingsChangedWithin(c.Request.Context(), id, order.SettingsGuard); err != nil || recent {
		if err == nil {
			err = fmt.Errorf("warm-up of activity %d: its end or bucket count changed less than %s ago; retry: %w",
				id, order.SettingsGuard, order.ErrUnavailable)
		}
		s.fail(c, err)
		return
	}
	act, n, err := s.intake.Warmup(c.Request.Context(), s.db.Restocks, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	// Recorded only if the sale still has the end and bucket count the
	// warm-up used: a copy older than a change of them laid out or timed
	// the keys by the old ones.
	marked, err := s.db.Activities.MarkWarmedAsOf(c.Request.Context(), act)
	switch {
	case err != nil:
		// The consumer's schedule then warms it once more (idempotent).
		s.log.Warn("warm-up not recorded", "request_id", c.GetString(ctxRequestID), "activity_id", id, "err", err)
	case !marked:
		s.fail(c, fmt.Errorf("warm-up of activity %d: the sale changed while it warmed up from an older copy; not recorded, retry: %w",
			id, order.ErrUnavailable))
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
	db, err := s.db.Activities.ItemStock(ctx, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	tag, err := s.db.Activities.ItemTag(ctx, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	snap, err := s.intake.Stock.Stock(ctx, stockredis.In(tag, id))
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

// patchGuard is keyGuard for a change of activity id's bucket count or
// items (nil: unchanged): the layout Redis holds now for each item the sale
// will have, under the tag it will have.
func (s *Server) patchGuard(ctx context.Context, id int64, items []order.SaleItem) (orderdb.KeyGuard, error) {
	a, err := s.db.Activities.Activity(ctx, id)
	if err != nil {
		return orderdb.KeyGuard{}, err
	}
	if items != nil {
		a.ItemID, a.Items = items[0].ItemID, items
	}
	live := map[int64]order.Layout{}
	for _, id := range a.ItemIDs() {
		l, err := s.intake.Stock.Layout(ctx, stockredis.In(a.ItemID, id))
		if err != nil {
			return orderdb.KeyGuard{}, err
		}
		live[id] = l
	}
	return s.keyGuard(live), nil
}
