package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/service/sales"
)

// SaleListEntry is one sale in GET /admin/v1/activities: what an operator
// scans a list of drops for.
type SaleListEntry struct {
	ActivityID int64 `json:"activity_id"`
	// Name is the sale's first item's name.
	Name        string             `json:"name"`
	Items       []ActivityItemView `json:"items"`
	StartsAt    time.Time          `json:"starts_at"`
	EndsAt      time.Time          `json:"ends_at"`
	Mode        string             `json:"mode"`
	WaitingRoom bool               `json:"waiting_room"`
	Access      string             `json:"access"`
	// State is the sale page's (UPCOMING, LIVE, SOLD_OUT, ENDED) at the
	// shared clock; Cancelled says an ENDED sale was cancelled.
	State     ActivityState `json:"state"`
	Cancelled bool          `json:"cancelled"`
	// UnitsLeft is what Redis can still reserve once every item is warmed,
	// MySQL's stock before.
	UnitsLeft int64 `json:"units_left"`
	// Orders counts the sale's MySQL orders by status, as its summary does.
	Orders      map[order.Status]int64 `json:"orders"`
	RevenuePaid *int64                 `json:"revenue_paid,omitempty"`
	Currency    string                 `json:"currency,omitempty"`
}

// SaleList is a page of sales, newest first.
type SaleList struct {
	Activities []SaleListEntry `json:"activities"`
	// NextBefore is the before of the next page; left out on the last.
	NextBefore *int64 `json:"next_before,omitempty"`
}

// listActivities lists the sales, newest first: ?limit (default 50, at
// most sales.MaxListPage) and ?before (a sale's id, for the next page),
// each with its summary's figures.
func (s *Server) listActivities(c *gin.Context) {
	limit, before, ok := s.pageOr400(c, sales.MaxListPage, "a sale's id")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	acts, next, err := s.sales.List(ctx, before, limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	now := s.salePages.now()
	out := SaleList{Activities: make([]SaleListEntry, 0, len(acts))}
	for _, a := range acts {
		sum, err := s.summarize(ctx, a)
		if errors.Is(err, order.ErrNotFound) {
			continue // its items' rows are gone, as sales.List says
		}
		if err != nil {
			s.fail(c, err)
			return
		}
		left := sum.DBStock
		if sum.RedisStock != nil {
			left = max(*sum.RedisStock, 0)
		}
		out.Activities = append(out.Activities, SaleListEntry{ActivityID: a.ID, Name: a.Name, Items: saleItemsView(a),
			StartsAt: a.StartsAt.UTC(), EndsAt: a.EndsAt.UTC(), Mode: a.Mode(), WaitingRoom: a.Room.On(),
			Access: string(a.AccessMode()), State: saleState(a, left, now), Cancelled: !a.CancelledAt.IsZero(),
			UnitsLeft: left, Orders: sum.Orders, RevenuePaid: sum.RevenuePaid, Currency: sum.Currency})
	}
	if next != 0 {
		out.NextBefore = &next
	}
	c.JSON(http.StatusOK, out)
}
