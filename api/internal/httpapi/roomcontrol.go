package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

// RoomControlBody is the body of PATCH /admin/v1/activities/{id}/room:
// each field left out stays as it is.
type RoomControlBody struct {
	AdmitPerSecond optional[int]  `json:"admit_per_second"`
	Paused         optional[bool] `json:"paused"`
	Passthrough    optional[bool] `json:"passthrough"`
}

// RoomControlView is a room's live control after a PATCH.
type RoomControlView struct {
	ActivityID     int64 `json:"activity_id"`
	AdmitPerSecond int   `json:"admit_per_second"`
	Paused         bool  `json:"paused"`
	Passthrough    bool  `json:"passthrough"`
	// ControlVersion counts the room's changes.
	ControlVersion int64 `json:"control_version"`
	// Changed is false when the room already was as asked (a retry): the
	// request was not recorded again.
	Changed bool `json:"changed"`
}

// controlRoom changes a sale's room during the sale: its rate, a pause or
// a resume, a passthrough (sales.ControlRoom), recorded with the
// operator's subject.
func (s *Server) controlRoom(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	var b RoomControlBody
	if !s.decodeOr400(c, &b) {
		return
	}
	if err := refuseNull(field{"admit_per_second", b.AdmitPerSecond}, field{"paused", b.Paused},
		field{"passthrough", b.Passthrough}); err != nil {
		s.fail(c, err)
		return
	}
	ch := activity.RoomControl{AdmitPerSecond: b.AdmitPerSecond.ptr(), Paused: b.Paused.ptr(), Passthrough: b.Passthrough.ptr()}
	res, err := s.sales.ControlRoom(s.logContext(c), id, ch, claimsOf(c).UserID)
	if err != nil {
		s.fail(c, err)
		return
	}
	r := res.Activity.Room
	c.JSON(http.StatusOK, RoomControlView{ActivityID: id, AdmitPerSecond: r.AdmitPerSecond, Paused: r.Paused,
		Passthrough: r.Passthrough, ControlVersion: r.ControlVersion, Changed: res.Changed})
}

// AuditEntryView is one operator action on a sale.
type AuditEntryView struct {
	ID     int64  `json:"id"`
	Action string `json:"action"`
	// Subject is the operator's token's subject.
	Subject string          `json:"subject"`
	At      time.Time       `json:"at"`
	Detail  json.RawMessage `json:"detail"`
}

// AuditView is a page of a sale's audit, newest first.
type AuditView struct {
	Actions []AuditEntryView `json:"actions"`
	// NextBefore is the before of the next page; left out on the last.
	NextBefore *int64 `json:"next_before,omitempty"`
}

// saleAudit lists the operator actions on a sale, newest first: ?limit
// (default 50) and ?before (an entry's id, for the next page).
func (s *Server) saleAudit(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	limit, before, ok := s.pageOr400(c, activity.MaxAuditPage, "an audit entry's id")
	if !ok {
		return
	}
	es, err := s.sales.Actions(c.Request.Context(), id, before, limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	v := AuditView{Actions: make([]AuditEntryView, len(es))}
	for i, e := range es {
		v.Actions[i] = AuditEntryView{ID: e.ID, Action: string(e.Action), Subject: e.Subject, At: e.At.UTC(), Detail: json.RawMessage(e.Detail)}
	}
	if len(es) == limit {
		next := es[len(es)-1].ID
		v.NextBefore = &next
	}
	c.JSON(http.StatusOK, v)
}

// RoomStateView is a sale's room as GET /admin/v1/activities/{id}/room
// reads it, at most a second old.
type RoomStateView struct {
	ActivityID int64 `json:"activity_id"`
	// Started is false before the sale's start: only Joined counts then.
	Started bool `json:"started"`
	// Joined is every buyer who joined; Admitted the positions let in so
	// far; Waiting those still in line (Joined - Admitted).
	Joined   int64 `json:"joined"`
	Admitted int64 `json:"admitted"`
	Waiting  int64 `json:"waiting"`
	// Held is the units the admissions not yet used hold.
	Held           int64 `json:"held"`
	AdmitPerSecond int   `json:"admit_per_second"`
	Paused         bool  `json:"paused"`
	Passthrough    bool  `json:"passthrough"`
	ControlVersion int64 `json:"control_version"`
}

// roomState answers a sale's room as this instance last read it
// (waitingroom.Service.Room).
func (s *Server) roomState(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	if s.rooms == nil {
		s.fail(c, order.Errorf(activity.ErrNoRoom, "this api runs no waiting rooms"))
		return
	}
	ctx := c.Request.Context()
	a, err := s.sales.Activity(ctx, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	st, err := s.rooms.Room(ctx, a)
	if err != nil {
		s.fail(c, err)
		return
	}
	admitted := min(st.Next, st.Joined)
	c.JSON(http.StatusOK, RoomStateView{ActivityID: id, Started: st.Started, Joined: st.Joined, Admitted: admitted,
		Waiting: st.Joined - admitted, Held: st.Held, AdmitPerSecond: st.Control.AdmitPerSecond, Paused: st.Control.Paused,
		Passthrough: st.Control.Passthrough, ControlVersion: st.Control.Version})
}
