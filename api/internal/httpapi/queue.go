package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/service/waitingroom"
)

// QueueState is where a buyer stands in a sale's waiting room.
type QueueState string

// The queue's states.
const (
	QueueWaiting  = QueueState(waitingroom.Waiting)
	QueueAdmitted = QueueState(waitingroom.Admitted)
	QueueSoldOut  = QueueState(waitingroom.SoldOut)
	QueueEnded    = QueueState(waitingroom.Ended)
	// QueueExpired: the buyer's admission expired unused; its units went
	// to the next in line.
	QueueExpired = QueueState(waitingroom.Expired)
	// QueueOrdered: the buyer holds an order in the sale (OrderNo): their
	// turn is done, whatever became of the admission since; the order's
	// own status says what is left to do (pay).
	QueueOrdered = QueueState(waitingroom.Ordered)
)

// QueueView is the body of the queue's join and poll.
type QueueView struct {
	State QueueState `json:"state"`
	// Position is the buyer's place in line from 1: null before the start
	// for those who joined before it (their order is drawn at the start).
	Position *int64 `json:"position"`
	// Ahead is how many positions are still to be admitted before the
	// buyer's; ETASeconds how long that takes at the room's pace.
	Ahead      int64 `json:"ahead"`
	ETASeconds int64 `json:"eta_seconds"`
	// PollAfterMS is when to poll again.
	PollAfterMS int64 `json:"poll_after_ms"`
	// Admission is the signed admission, sent as X-Admission with the
	// order, until AdmissionExpiresAt.
	Admission          string     `json:"admission,omitempty"`
	AdmissionExpiresAt *time.Time `json:"admission_expires_at,omitempty"`
	// OrderNo is the order the buyer holds in the sale (state ORDERED).
	OrderNo string `json:"order_no,omitempty"`
	// Paused is true while the operator paused the room's admissions
	// (left out otherwise): the waiter keeps their place.
	Paused bool `json:"paused,omitempty"`
	// Priority is true for a waiter in a code_priority sale's priority lane
	// (left out otherwise): Position and Ahead are the lane's.
	Priority bool `json:"priority,omitempty"`
}

// roomSale is the sale of the path's id with a room, or false after
// answering 404 (no such sale, or one without a room).
func (s *Server) roomSale(c *gin.Context) (activity.Activity, bool) {
	return s.saleOf(c, func(a activity.Activity) bool { return a.Selling() == activity.SellsInRoom }, "sale %d has no waiting room: order directly")
}

// saleOf is the sale of the path's id (this instance's copy) when is
// reports true for it, or false after answering 404: for no such sale, and
// for one is reports false for, with not (formatted with the id).
func (s *Server) saleOf(c *gin.Context, is func(activity.Activity) bool, not string) (activity.Activity, bool) {
	id, ok := pathID(c)
	if !ok {
		return activity.Activity{}, false
	}
	a, err := s.intake.Activity(c.Request.Context(), id)
	if err == nil && !is(a) {
		err = order.Errorf(order.ErrNotFound, not, id)
	}
	if err != nil {
		s.fail(c, err)
		return activity.Activity{}, false
	}
	return a, true
}

// joinQueue puts the buyer in the sale's waiting room (once: joining again
// from anywhere answers the same place) and answers where they stand.
func (s *Server) joinQueue(c *gin.Context) {
	s.queue(c, true)
}

// pollQueue answers where the buyer stands, from this instance's memory
// but for the room's state, read once a second per instance.
func (s *Server) pollQueue(c *gin.Context) {
	s.queue(c, false)
}

// JoinBody is the body of a join: the proof of work a room with
// proof_of_work_bits asks for, and the presale code a code_required sale
// asks for (else no body, or an empty object).
type JoinBody struct {
	Challenge  string `json:"challenge"`
	Solution   string `json:"solution"`
	AccessCode string `json:"access_code,omitempty"`
}

// errAnswered is a join body's decoding failure, already answered.
var errAnswered = errors.New("answered")

func (s *Server) queue(c *gin.Context, join bool) {
	a, ok := s.roomSale(c)
	if !ok {
		return
	}
	work := func() (waitingroom.Work, error) {
		var b JoinBody
		if c.Request.ContentLength != 0 && !s.decodeOr400(c, &b) {
			return waitingroom.Work{}, errAnswered
		}
		return waitingroom.Work{Challenge: b.Challenge, Solution: b.Solution, AccessCode: b.AccessCode, Addr: addrKey(c)}, nil
	}
	st, err := s.rooms.Queue(c.Request.Context(), a, claimsOf(c).UserID, join, work)
	switch {
	case errors.Is(err, errAnswered):
	case err != nil:
		s.fail(c, err)
	default:
		c.Data(http.StatusOK, "application/json; charset=utf-8", queueView(st).appendJSON(nil))
	}
}

// queueView is the answer's view of st.
func queueView(st waitingroom.Standing) QueueView {
	v := QueueView{State: QueueState(st.State), Ahead: st.Ahead, ETASeconds: st.ETASeconds, PollAfterMS: st.PollAfterMS,
		Admission: st.Admission, OrderNo: st.OrderNo, Paused: st.Paused,
		Priority: st.Priority}
	if st.Position > 0 {
		pos := st.Position
		v.Position = &pos
	}
	if !st.AdmissionExpires.IsZero() {
		exp := st.AdmissionExpires
		v.AdmissionExpiresAt = &exp
	}
	return v
}

// appendJSON is v as encoding/json writes it, without its reflection: the
// crowd polls this answer. Every string in it is a state, a token of
// base64url and dots, or a time, none needing escapes.
func (v QueueView) appendJSON(b []byte) []byte {
	b = append(b, `{"state":"`...)
	b = append(b, v.State...)
	b = append(b, `","position":`...)
	if v.Position == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *v.Position, 10)
	}
	b = append(b, `,"ahead":`...)
	b = strconv.AppendInt(b, v.Ahead, 10)
	b = append(b, `,"eta_seconds":`...)
	b = strconv.AppendInt(b, v.ETASeconds, 10)
	b = append(b, `,"poll_after_ms":`...)
	b = strconv.AppendInt(b, v.PollAfterMS, 10)
	if v.Admission != "" {
		b = append(b, `,"admission":"`...)
		b = append(b, v.Admission...)
		b = append(b, '"')
	}
	if v.AdmissionExpiresAt != nil {
		b = append(b, `,"admission_expires_at":"`...)
		b = v.AdmissionExpiresAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if v.OrderNo != "" {
		// An order number: letters, digits and '-'.
		b = append(b, `,"order_no":"`...)
		b = append(b, v.OrderNo...)
		b = append(b, '"')
	}
	if v.Paused {
		b = append(b, `,"paused":true`...)
	}
	if v.Priority {
		b = append(b, `,"priority":true`...)
	}
	return append(b, '}')
}

// ChallengeView is the body of the queue's challenge.
type ChallengeView struct {
	Challenge string    `json:"challenge"`
	Bits      int       `json:"bits"`
	ExpiresAt time.Time `json:"expires_at"`
}

// queueChallenge gives the buyer a proof-of-work challenge for joining the
// sale's room: find a solution whose room.Work has Bits leading zero bits
// and join with both. Signed, so nothing is kept.
func (s *Server) queueChallenge(c *gin.Context) {
	a, ok := s.roomSale(c)
	if !ok {
		return
	}
	now := s.intake.Now()
	c.JSON(http.StatusOK, ChallengeView{Challenge: room.NewChallenge(a.Room.Key[:], a.ID, claimsOf(c).UserID, now),
		Bits: a.Room.ProofOfWorkBits, ExpiresAt: now.Add(room.ChallengeTTL).UTC()})
}
