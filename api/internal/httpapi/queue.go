package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/api/internal/intake"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/service/waitingroom"
)

// QueueState is where a buyer stands in a sale's waiting room.
type QueueState string

// The queue's states.
const (
	QueueWaiting  QueueState = "WAITING"
	QueueAdmitted QueueState = "ADMITTED"
	QueueSoldOut  QueueState = "SOLD_OUT"
	QueueEnded    QueueState = "ENDED"
	// QueueExpired: the buyer's admission expired unused; its units went
	// to the next in line.
	QueueExpired QueueState = "EXPIRED"
	// QueueOrdered: the buyer holds an order in the sale (OrderNo): their
	// turn is done, whatever became of the admission since; the order's
	// own status says what is left to do (pay).
	QueueOrdered QueueState = "ORDERED"
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
}

// roomPollTTL is how old a room's state may be when a poll reads it: each
// instance advances each room it is asked about about once a second,
// whatever the number of polls.
const roomPollTTL = time.Second

// maxPlaces bounds the buyers' places one instance keeps per room; past
// it a poll reads Redis.
const maxPlaces = 1 << 20

// rooms is this instance's view of the rooms it is asked about. Every
// memory it keeps of a room belongs to one generation of it (a room Redis
// lost is rebuilt under the next, waitingroom): a state read with another
// generation drops the rest, so no answer from memory outlives the room
// it came from by more than roomPollTTL.
type rooms struct {
	stock intake.Stock
	svc   *waitingroom.Service
	m     sync.Map // activity id -> *roomView
}

// roomView is one room: its state (one flight at a time) and the places of
// the buyers this instance answered.
type roomView struct {
	mu      sync.Mutex
	st      stockredis.RoomState
	at      time.Time     // when st was read; zero: never
	loading chan struct{} // closed when the advance under way ends
	err     error
	places  map[string]cachedPlace
	// advances counts the advances started; stFrom is the one st came
	// from (an absence is known only from a state read after its look).
	advances, stFrom uint64
	// gen is the room's generation the places, absences and early
	// positions below were read in.
	gen int64
	// absent are buyers a look found not in the room, with how many were
	// in it then (Place.Count) and the advances started by then.
	absent map[string]absence

	// members is every buyer in the room, read once a look found someone
	// absent (tracking): each state read then reads who joined since
	// (stockredis.RoomMembers: earlyRead early joiners and the late ones
	// up to sequence lateSeq so far). membersFrom is the advance whose
	// state they are complete for (0: none): a buyer not among them had
	// not joined when that state was read, on any instance, so a busy room
	// answers strangers from memory too.
	members     map[string]struct{}
	tracking    bool
	tooMany     bool // more than maxPlaces: not tracked in this generation
	earlyRead   int64
	lateSeq     int64
	membersFrom uint64

	// early is every early joiner's position, read once after the start
	// (the early set is frozen then): their first polls after the start
	// need no Redis read of their own. earlyLoading is closed when the
	// read under way ends.
	early        map[string]int64
	earlyLoading chan struct{}
}

// setState records st, read from the advance started as the from-th, and
// forgets what this instance remembered of another generation of the
// room. v.mu is held.
func (v *roomView) setState(st stockredis.RoomState, err error, at time.Time, from uint64) {
	v.st, v.err, v.at, v.stFrom = st, err, at, from
	if err == nil && st.Gen != v.gen {
		v.gen = st.Gen
		v.places = map[string]cachedPlace{}
		v.absent = map[string]absence{}
		v.early = nil
		v.members, v.earlyRead, v.lateSeq, v.membersFrom, v.tooMany = nil, 0, 0, 0, false
	}
}

// membersChunk is how many early and late joiners one RoomMembers call
// reads; membersPerRead bounds what one state read adds (a room joined by
// more in a second is caught up over the next reads, strangers' polls
// looking meanwhile).
const (
	membersChunk   = 10_000
	membersPerRead = 50_000
)

// readMembers reads, right after a state read of generation gen, who
// joined the room since this instance last read its members (everyone, for
// a new generation), when it tracks them; atEnd when it read up to now.
func (rs *rooms) readMembers(ctx context.Context, v *roomView, room func() stockredis.Room, gen int64) (read []stockredis.RoomMembers, atEnd bool) {
	v.mu.Lock()
	tracking, fromEarly, afterSeq := v.tracking, v.earlyRead, v.lateSeq
	if gen != v.gen {
		fromEarly, afterSeq = 0, 0
	}
	v.mu.Unlock()
	if !tracking {
		return nil, false
	}
	for n := 0; n < membersPerRead; {
		m, err := rs.stock.RoomMembers(ctx, room(), fromEarly, afterSeq, membersChunk)
		if err != nil || m.Gen != gen {
			return read, false
		}
		read = append(read, m)
		fromEarly += int64(len(m.Early))
		afterSeq = m.LastSeq
		n += len(m.Early) + len(m.Late)
		if m.AtEnd {
			return read, true
		}
	}
	return read, false
}

// addMembers adds what readMembers read after the state read of the
// from-th advance (generation gen) to the view's members. v.mu is held.
func (v *roomView) addMembers(gen int64, from uint64, read []stockredis.RoomMembers, atEnd bool) {
	if gen != v.gen || !v.tracking || len(read) == 0 {
		return
	}
	if v.members == nil {
		v.members = map[string]struct{}{}
	}
	for _, m := range read {
		for _, u := range m.Early {
			v.members[u] = struct{}{}
		}
		for _, u := range m.Late {
			v.members[u] = struct{}{}
		}
		v.earlyRead += int64(len(m.Early))
		v.lateSeq = m.LastSeq
	}
	v.membersFrom = 0
	if atEnd {
		v.membersFrom = from
	}
	if len(v.members) > maxPlaces {
		// Too many to keep: strangers' polls look, as before.
		v.tracking, v.tooMany, v.members, v.membersFrom = false, true, nil, 0
	}
}

// absence is a look that found a buyer not in the room: count buyers were
// in it, and advances advances had started when its answer came.
type absence struct {
	count    int64
	advances uint64
}

// cachedPlace is a buyer's place as last read, and whether it was read
// after their position was admitted (the admission, or its absence, is
// then known for good).
type cachedPlace struct {
	p          stockredis.Place
	afterAdmit bool
}

func (rs *rooms) view(id int64) *roomView {
	if v, ok := rs.m.Load(id); ok {
		return v.(*roomView)
	}
	v, _ := rs.m.LoadOrStore(id, &roomView{places: map[string]cachedPlace{}, absent: map[string]absence{}})
	return v.(*roomView)
}

// state is the room's state at most roomPollTTL old: the first poll after
// that advances the room (every instance may), the others wait for it.
func (rs *rooms) state(ctx context.Context, id int64, room func() stockredis.Room, now time.Time) (stockredis.RoomState, error) {
	v := rs.view(id)
	v.mu.Lock()
	if !v.at.IsZero() && now.Sub(v.at) < roomPollTTL && v.err == nil {
		st := v.st
		v.mu.Unlock()
		return st, nil
	}
	wait := v.loading
	if wait == nil {
		wait = make(chan struct{})
		v.loading = wait
		v.advances++
		from := v.advances
		v.mu.Unlock()
		// Its own context: one poll giving up does not fail the others.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		st, err := rs.svc.Advance(actx, room(), now)
		var members []stockredis.RoomMembers
		atEnd := false
		if err == nil {
			members, atEnd = rs.readMembers(actx, v, room, st.Gen)
		}
		cancel()
		v.mu.Lock()
		v.setState(st, err, now, from)
		if err == nil {
			v.addMembers(st.Gen, from, members, atEnd)
		}
		v.loading = nil
		close(wait)
		v.mu.Unlock()
	} else {
		v.mu.Unlock()
	}
	select {
	case <-wait:
	case <-ctx.Done():
		return stockredis.RoomState{}, ctx.Err()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.st, v.err
}

// place is the buyer's place: from memory while nothing it says can have
// changed, else read from Redis (joining first when join is set).
func (rs *rooms) place(ctx context.Context, id int64, room func() stockredis.Room, user string, rank func() uint64, join bool,
	st stockredis.RoomState, now time.Time) (stockredis.Place, error) {
	v := rs.view(id)
	v.mu.Lock()
	c, ok := v.places[user]
	ok = ok && c.p.Gen == st.Gen
	v.mu.Unlock()
	if st.Started && (!ok || c.p.Position == 0) {
		// An early joiner's position, from the frozen early set.
		if pos, found := rs.earlyPosition(ctx, v, room, st, user); found {
			c, ok = cachedPlace{p: stockredis.Place{Joined: true, Position: pos, Gen: st.Gen, Early: st.Early}}, true
			v.keep(user, c)
		}
	}
	admitted := c.p.Position > 0 && c.p.Position <= st.Next
	if ok && c.p.Joined && (c.p.Position > 0 || !st.Started) && (!admitted || c.afterAdmit) {
		return c.p, nil
	}
	if !ok && !join && v.stillAbsent(user, st.Gen) {
		return stockredis.Place{}, nil
	}
	var p stockredis.Place
	var err error
	if join {
		p, err = rs.svc.Join(ctx, room(), user, rank(), now)
	} else {
		p, err = rs.svc.Look(ctx, room(), user, now)
		if err == nil && !p.Joined {
			v.rememberAbsent(user, p.Count, p.Gen)
		}
	}
	if err != nil {
		return p, err
	}
	if p.Joined && p.Gen == st.Gen {
		v.keep(user, cachedPlace{p: p, afterAdmit: p.Position > 0 && p.Position <= st.Next})
	}
	return p, nil
}

// stillAbsent reports whether user, whom a look found not in the room, is
// still not in it as far as the room's state says: a state read by an
// advance started after that look counts as many buyers as the look did,
// so nobody joined in between, on any instance. A buyer who has not joined
// then costs no Redis call; one who joined on another instance since the
// last advance started (at most about roomPollTTL ago) is told to join,
// which answers their place.
func (v *roomView) stillAbsent(user string, gen int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err == nil && v.gen == gen && v.membersFrom != 0 && v.membersFrom == v.stFrom {
		// Every member as of the last state read is known.
		_, in := v.members[user]
		return !in
	}
	a, ok := v.absent[user]
	return ok && v.err == nil && v.gen == gen && v.stFrom > a.advances && v.st.Joined == a.count
}

// rememberAbsent remembers that a look that has just answered found user
// not in the room of count buyers (up to maxPlaces buyers): only an
// advance started from now on ran after it in Redis.
func (v *roomView) rememberAbsent(user string, count, gen int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if gen != v.gen {
		return
	}
	v.tracking = !v.tooMany // from the next state read on
	if _, ok := v.absent[user]; ok || len(v.absent) < maxPlaces {
		v.absent[user] = absence{count: count, advances: v.advances}
	}
}

// keep remembers user's place, up to maxPlaces buyers, when it is of the
// generation the view holds.
func (v *roomView) keep(user string, c cachedPlace) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if c.p.Gen != v.gen {
		return
	}
	delete(v.absent, user)
	if len(v.places) < maxPlaces {
		v.places[user] = c
	}
}

// earlyPosition is user's position among the early joiners, from the
// frozen early set this instance reads once (one flight); false when the
// user is not an early joiner, or the read failed (the caller then reads
// the user's place alone).
func (rs *rooms) earlyPosition(ctx context.Context, v *roomView, room func() stockredis.Room, st stockredis.RoomState, user string) (int64, bool) {
	v.mu.Lock()
	if v.early == nil && v.earlyLoading == nil && st.Early > 0 && st.Gen == v.gen {
		wait := make(chan struct{})
		v.earlyLoading = wait
		v.mu.Unlock()
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		early, err := rs.stock.EarlyPositions(lctx, room(), st.Early)
		cancel()
		v.mu.Lock()
		// Kept only if the room is still of the generation it was read
		// in (a rebuild meanwhile drops it with the rest).
		if err == nil && st.Gen == v.gen {
			v.early = early
		}
		v.earlyLoading = nil
		close(wait)
	}
	wait := v.earlyLoading
	v.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return 0, false
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if st.Gen != v.gen {
		return 0, false
	}
	pos, ok := v.early[user]
	return pos, ok
}

// storeRoom is the sale's room as its scripts see it.
func (s *Server) storeRoom(a order.Activity) stockredis.Room {
	return waitingroom.StoreRoom(a, s.intake.PaymentWindow)
}

// roomSale is the sale of the path's id with a room, or false after
// answering 404 (no such sale, or one without a room).
func (s *Server) roomSale(c *gin.Context) (order.Activity, bool) {
	return s.saleOf(c, func(a order.Activity) bool { return a.Room.On() }, "sale %d has no waiting room: order directly")
}

// saleOf is the sale of the path's id (this instance's copy) when is
// reports true for it, or false after answering 404: for no such sale, and
// for one is reports false for, with not (formatted with the id).
func (s *Server) saleOf(c *gin.Context, is func(order.Activity) bool, not string) (order.Activity, bool) {
	id, ok := pathID(c)
	if !ok {
		return order.Activity{}, false
	}
	a, err := s.intake.Activity(c.Request.Context(), id)
	if err == nil && !is(a) {
		err = order.Errorf(order.ErrNotFound, not, id)
	}
	if err != nil {
		s.fail(c, err)
		return order.Activity{}, false
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
// proof_of_work_bits asks for (else no body, or an empty object).
type JoinBody struct {
	Challenge string `json:"challenge"`
	Solution  string `json:"solution"`
}

func (s *Server) queue(c *gin.Context, join bool) {
	a, ok := s.roomSale(c)
	if !ok {
		return
	}
	now, user := s.intake.Now(), claimsOf(c).UserID
	if !now.Before(a.EndsAt) {
		c.JSON(http.StatusOK, QueueView{State: QueueEnded})
		return
	}
	if join {
		if now.Before(a.Room.OpensAt) {
			s.fail(c, order.Errorf(order.ErrActivityNotActive, "the waiting room opens at %s", a.Room.OpensAt.UTC().Format(time.RFC3339)))
			return
		}
		var b JoinBody
		if c.Request.ContentLength != 0 && !s.decodeOr400(c, &b) {
			return
		}
		if a.Room.ProofOfWorkBits > 0 {
			if err := room.CheckWork(a.Room.Key[:], b.Challenge, b.Solution, a.ID, user, a.Room.ProofOfWorkBits, now); err != nil {
				s.fail(c, err)
				return
			}
		}
	}
	ctx := c.Request.Context()
	// Built only when Redis is read: most polls are answered from memory.
	storeRoom := func() stockredis.Room { return s.storeRoom(a) }
	st, err := s.rooms.state(ctx, a.ID, storeRoom, now)
	if err != nil {
		s.fail(c, err)
		return
	}
	p, err := s.rooms.place(ctx, a.ID, storeRoom, user, func() uint64 { return room.Rank(a.Room.Seed, user) }, join, st, now)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !p.Joined {
		s.fail(c, order.Errorf(order.ErrNotFound, "you are not in this sale's queue: join it first (POST)"))
		return
	}
	var held string
	if (p.Position > 0 && p.Position <= st.Next) || !p.Admission.IsZero() || p.Used {
		// Only a buyer let in can hold an order: one shared read for
		// them, none for the waiters. Not kept: the order may yet be
		// given back (a 503's release returns the admission).
		if held, err = s.intake.HeldOrder(ctx, a, user); err != nil {
			s.fail(c, err)
			return
		}
	}
	c.Data(http.StatusOK, "application/json; charset=utf-8", queueView(a, user, p, st, held, now).appendJSON(nil))
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
	return append(b, '}')
}

// queueView is what the buyer at p, holding the order held ("" for none),
// is told at now.
func queueView(a order.Activity, user string, p stockredis.Place, st stockredis.RoomState, held string, now time.Time) QueueView {
	v := QueueView{State: QueueWaiting}
	if p.Position > 0 {
		pos := p.Position
		v.Position = &pos
	}
	expires := p.Admission
	if p.Used {
		expires = p.UsedExpires // the order's retries need it
	}
	rate := int64(a.Room.AdmitPerSecond)
	switch {
	case held != "":
		// Their turn is done: a retry of the order needs its key only.
		v.State, v.OrderNo, v.PollAfterMS = QueueOrdered, held, 0
	case !expires.IsZero() && now.Before(expires):
		v.State, v.PollAfterMS = QueueAdmitted, 5000
		v.Admission = room.Sign(a.Room.Key[:], room.Admission{ActivityID: a.ID, UserID: user, Expires: expires})
		v.AdmissionExpiresAt = &expires
	case !expires.IsZero() || (p.Position > 0 && p.Position <= st.Next):
		v.State, v.PollAfterMS = QueueExpired, 0
	case st.SoldOut():
		// Units may still come back (an unpaid order closed, a cancel):
		// the waiter keeps their place and polls slowly.
		v.State, v.PollAfterMS = QueueSoldOut, 5000
	case !st.Started:
		v.ETASeconds = int64(a.StartsAt.Sub(now).Round(time.Second) / time.Second)
		v.PollAfterMS = min(max(a.StartsAt.Sub(now).Milliseconds()/2, 500), 5000)
	default:
		v.Ahead = max(p.Position-st.Next-1, 0)
		v.ETASeconds = (v.Ahead + rate - 1) / rate
		// Close to the front: every second; far back: up to every 10 s.
		v.PollAfterMS = min(max(v.ETASeconds*1000/4, 1000), 10000)
	}
	return v
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
