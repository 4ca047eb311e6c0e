package httpapi

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Order list pages.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// OrderList is the body of GET /api/v1/orders.
type OrderList struct {
	Orders []OrderView `json:"orders"`
	// NextCursor fetches the next (older) page; null on the last page.
	NextCursor *string `json:"next_cursor"`
}

// cursorPrefix versions the cursor's format; the cursor is opaque to
// clients: base64url of "o1:<row id>", the id the next page starts below.
const cursorPrefix = "o1:"

func encodeCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(id, 10)))
}

func decodeCursor(s string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(string(b), cursorPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != rest {
		return 0, false
	}
	return id, true
}

// listParams are the list's query parameters; any other is refused.
var listParams = map[string]bool{"limit": true, "cursor": true, "activity_id": true, "status": true}

// listQuery reads and checks the list's query parameters.
func listQuery(c *gin.Context) (f order.Filter, before int64, limit int, err error) {
	limit = DefaultPageSize
	// A misspelt filter must not widen the list, nor a repeated one
	// leave the reader guessing which counts.
	for k, vs := range c.Request.URL.Query() {
		if !listParams[k] {
			return f, 0, 0, order.Errorf(order.ErrInvalidArgument, "unknown query parameter %q", strings.ToValidUTF8(k, ""))
		}
		if len(vs) > 1 {
			return f, 0, 0, order.Errorf(order.ErrInvalidArgument, "query parameter %q given twice", k)
		}
	}
	if v, ok := c.GetQuery("limit"); ok {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > MaxPageSize {
			return f, 0, 0, order.Errorf(order.ErrInvalidArgument, "limit must be an integer from 1 to %d", MaxPageSize)
		}
		limit = n
	}
	if v, ok := c.GetQuery("cursor"); ok {
		if before, ok = decodeCursor(v); !ok {
			return f, 0, 0, order.Errorf(order.ErrInvalidArgument, "cursor is not one this API gave (pass next_cursor as it is)")
		}
	}
	if v, ok := c.GetQuery("activity_id"); ok {
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 1 {
			return f, 0, 0, order.Errorf(order.ErrInvalidArgument, "activity_id must be a positive integer")
		}
		f.ActivityID = n
	}
	if v, ok := c.GetQuery("status"); ok {
		switch st := order.Status(v); st {
		case order.Created, order.Paid, order.Closed, order.Failed:
			f.Status = st
		default:
			return f, 0, 0, order.Errorf(order.ErrInvalidArgument, "status must be one of CREATED, PAID, CLOSED, FAILED")
		}
	}
	return f, before, limit, nil
}

// listOrders answers the caller's own orders, newest first, a page at a
// time (keyset pagination on the row id).
func (s *Server) listOrders(c *gin.Context) {
	f, before, limit, err := listQuery(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	rows, more, err := s.lifecycle.UserOrders(c.Request.Context(), claimsOf(c).UserID, f, before, limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := OrderList{Orders: make([]OrderView, len(rows))}
	for i, r := range rows {
		out.Orders[i] = orderView(r.Order)
	}
	if more {
		next := encodeCursor(rows[len(rows)-1].ID)
		out.NextCursor = &next
	}
	c.JSON(http.StatusOK, out)
}

// ActivitySummary is the body of GET /admin/v1/activities/{id}/summary.
type ActivitySummary struct {
	ActivityID int64 `json:"activity_id"`
	ItemID     int64 `json:"item_id"`
	// Orders counts the activity's MySQL orders by status (every status,
	// zero included); PENDING ones are InFlight.
	Orders    map[order.Status]int64 `json:"orders"`
	UnitsSold int64                  `json:"units_sold"`
	UnitsPaid int64                  `json:"units_paid"`
	// The stock of the sale's items: units in reservations not yet
	// confirmed or released, Redis stock (null before warm-up) and MySQL
	// stock.
	InFlight   int64  `json:"in_flight"`
	RedisStock *int64 `json:"redis_stock"`
	DBStock    int64  `json:"db_stock"`
	// RevenuePaid sums the amounts of the PAID orders, in Currency; both
	// are left out when the sale has no price.
	RevenuePaid *int64 `json:"revenue_paid,omitempty"`
	Currency    string `json:"currency,omitempty"`
	// RefundsNeeded counts the provider payments for the sale's orders
	// that arrived when the order could not be paid any more (owed back).
	RefundsNeeded int64 `json:"refunds_needed"`
	// Items are the figures of each of the sale's items (the totals above
	// add them up; redis_stock is null unless every item is warmed).
	Items []ItemSummary `json:"items"`
}

// ItemSummary is ActivitySummary's figures for one item of the sale.
type ItemSummary struct {
	ItemID     int64                  `json:"item_id"`
	Label      string                 `json:"label,omitempty"`
	Orders     map[order.Status]int64 `json:"orders"`
	UnitsSold  int64                  `json:"units_sold"`
	UnitsPaid  int64                  `json:"units_paid"`
	InFlight   int64                  `json:"in_flight"`
	RedisStock *int64                 `json:"redis_stock"`
	DBStock    int64                  `json:"db_stock"`
}

// activitySummary answers how an activity's sale went, from MySQL and
// Redis: per item, and in total.
func (s *Server) activitySummary(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	act, err := s.sales.Activity(ctx, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	out, err := s.summarize(ctx, act)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

// summarize adds up act's orders by status and reads its items' stock in
// MySQL and Redis: the summary's figures, and the sale list's.
func (s *Server) summarize(ctx context.Context, act activity.Activity) (ActivitySummary, error) {
	tally, err := s.sales.Tally(ctx, act.ID)
	if err != nil {
		return ActivitySummary{}, err
	}
	refunds, err := s.lifecycle.RefundsNeeded(ctx, act.ID)
	if err != nil {
		return ActivitySummary{}, err
	}
	out := ActivitySummary{ActivityID: act.ID, ItemID: act.ItemID, Orders: map[order.Status]int64{}, RefundsNeeded: refunds,
		Items: make([]ItemSummary, 0, len(act.Items))}
	var revenue int64
	warmed := true
	for _, it := range act.Items {
		dbStock, err := s.sales.ItemStock(ctx, it.ItemID)
		if err != nil {
			return ActivitySummary{}, err
		}
		snap, err := s.intake.Stock.Stock(ctx, reservation.In(act.ItemID, it.ItemID))
		if err != nil {
			return ActivitySummary{}, err
		}
		t := tally[it.ItemID]
		is := ItemSummary{ItemID: it.ItemID, Label: it.Label, Orders: map[order.Status]int64{},
			InFlight: snap.Inflight, DBStock: dbStock}
		for _, st := range []order.Status{order.Created, order.Paid, order.Closed, order.Failed} {
			is.Orders[st] = t[st].Orders
			out.Orders[st] += t[st].Orders
		}
		is.UnitsSold = t[order.Created].Units + t[order.Paid].Units
		is.UnitsPaid = t[order.Paid].Units
		if snap.Warmed {
			is.RedisStock = &snap.Stock
		}
		warmed = warmed && snap.Warmed
		revenue += t[order.Paid].Amount
		out.UnitsSold += is.UnitsSold
		out.UnitsPaid += is.UnitsPaid
		out.InFlight += is.InFlight
		out.DBStock += is.DBStock
		out.Items = append(out.Items, is)
	}
	if warmed {
		var total int64
		for _, is := range out.Items {
			total += *is.RedisStock
		}
		out.RedisStock = &total
	}
	if act.SalePrice.Priced() {
		out.RevenuePaid, out.Currency = &revenue, act.SalePrice.Currency
	}
	return out, nil
}
