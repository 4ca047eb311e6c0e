package httpapi

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
)

// EntryBody is the body of POST /api/v1/activities/{id}/entries.
type EntryBody struct {
	// ItemID is the size entered for: required for a sale of several
	// items; left out for a sale of one. null is refused.
	ItemID optional[int64] `json:"item_id,omitzero"`
	// Quantity left out is 1; null is refused.
	Quantity optional[int] `json:"quantity,omitzero"`
}

// The states of an entry, as GET .../entries/me answers them.
const (
	EntryEntered     = "ENTERED"      // before the draw
	EntryWon         = "WON"          // drawn, or an alternate the stock came back to: it has an order
	EntryAlternate   = "ALTERNATE"    // waits, in rank order, for units of its size to come back
	EntryNotSelected = "NOT_SELECTED" // the sale ended without giving it units
)

// EntryView is a buyer's entry.
type EntryView struct {
	EntryID    string    `json:"entry_id"`
	ActivityID int64     `json:"activity_id"`
	ItemID     int64     `json:"item_id"`
	Quantity   int       `json:"quantity"`
	State      string    `json:"state"`
	EnteredAt  time.Time `json:"entered_at"`
	// OrderNo is the order made for a WON entry (once it is made: the
	// consumer does so within seconds of the draw).
	OrderNo string `json:"order_no,omitempty"`
	// AlternateRank is an ALTERNATE's place among its size's alternates
	// still waiting: 1 is next.
	AlternateRank int64 `json:"alternate_rank,omitempty"`
	// Commitment is the draw's, fixed when the sale was made: with the
	// entry id, item and quantity it makes this answer the buyer's receipt
	// (reconciler verify-draw --receipt holds the published record to it).
	Commitment string `json:"commitment"`
}

func entryView(e draw.BuyerEntry, a activity.Activity, now time.Time) EntryView {
	v := EntryView{EntryID: e.ID, ActivityID: e.ActivityID, ItemID: e.ItemID, Quantity: e.Quantity, EnteredAt: e.CreatedAt.UTC(),
		Commitment: a.Draw.Commitment}
	if e.Issued {
		// Only an order whose event reached Kafka: an alternate's number
		// may still be taken back when its reserve is refused.
		v.OrderNo = e.OrderNo
	}
	over := !now.Before(a.EndsAt) || !a.CancelledAt.IsZero()
	switch {
	case e.Issued || e.Outcome == draw.Won:
		v.State = EntryWon
	case over:
		v.State = EntryNotSelected
	case e.Outcome == draw.Alternate:
		v.State, v.AlternateRank = EntryAlternate, e.AlternatesBefore+1
	default:
		v.State = EntryEntered
	}
	return v
}

// drawSale is the path's sale, which must be a draw.
func (s *Server) drawSale(c *gin.Context) (activity.Activity, bool) {
	return s.saleOf(c, func(a activity.Activity) bool { return a.Selling() == activity.SellsByDraw }, "sale %d is not a draw: order it at /api/v1/orders")
}

// enterDraw records the buyer's entry: 201 for a new one, 200 with the
// entry they made before (unchanged) when they entered already, so a
// retry is safe whatever became of the first answer.
func (s *Server) enterDraw(c *gin.Context) {
	a, ok := s.drawSale(c)
	if !ok {
		return
	}
	var b EntryBody
	if c.Request.ContentLength != 0 && !s.decodeOr400(c, &b) {
		return
	}
	if err := refuseNull(field{"quantity", b.Quantity}, field{"item_id", b.ItemID}); err != nil {
		s.fail(c, err)
		return
	}
	q := 1
	if b.Quantity.Set {
		q = b.Quantity.Value
	}
	e, created, err := s.draws.Enter(c.Request.Context(), a, claimsOf(c).UserID, b.ItemID.Value, q)
	if err != nil {
		s.fail(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, entryView(e, a, s.intake.Now()))
}

// myEntry answers the buyer's entry and what became of it.
func (s *Server) myEntry(c *gin.Context) {
	a, ok := s.drawSale(c)
	if !ok {
		return
	}
	e, err := s.draws.Entry(c.Request.Context(), a, claimsOf(c).UserID)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, entryView(e, a, s.intake.Now()))
}

// drawRecords keeps each sale's published draw once it is DRAWN: it never
// changes after.
type drawRecords struct {
	m sync.Map // activity id -> []byte
}

// drawRecord publishes the sale's draw to anyone (no token): the
// commitment, and once drawn everything draw.Verify recomputes.
func (s *Server) drawRecord(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	if b, ok := s.drawRecords.m.Load(id); ok {
		c.Data(http.StatusOK, "application/json; charset=utf-8", b.([]byte))
		return
	}
	a, ok := s.saleOf(c, func(a activity.Activity) bool { return a.Selling() == activity.SellsByDraw }, "sale %d is not a draw")
	if !ok {
		return
	}
	rec, err := s.draws.Record(c.Request.Context(), a)
	if err != nil {
		s.fail(c, err)
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		s.fail(c, err)
		return
	}
	if rec.State == draw.StateDrawn {
		s.drawRecords.m.Store(id, b)
	}
	c.Data(http.StatusOK, "application/json; charset=utf-8", b)
}

// ActivityPageDraw is a draw sale's draw on its page.
type ActivityPageDraw struct {
	State          string    `json:"state"`
	Entries        int64     `json:"entries"`
	Commitment     string    `json:"commitment"`
	EntriesCloseAt time.Time `json:"entries_close_at"`
}

// DrawView is a draw sale's draw in the admin's answers.
type DrawView struct {
	EntriesCloseAt time.Time `json:"entries_close_at"`
	Commitment     string    `json:"commitment"`
}

func drawView(d activity.Draw) *DrawView {
	if !d.On() {
		return nil
	}
	return &DrawView{EntriesCloseAt: d.EntriesCloseAt.UTC(), Commitment: d.Commitment}
}
