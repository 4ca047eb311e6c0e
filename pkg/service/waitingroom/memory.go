package waitingroom

import (
	"context"
	"sync"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/room"
)

// This instance's memory of the rooms it is asked about (Service.views).
// Every memory it keeps of a room belongs to one generation of it (a room
// Redis lost is rebuilt under the next): a state read with another
// generation drops the rest, so no answer from memory outlives the room it
// came from by more than roomPollTTL.

// roomPollTTL is how old a room's state may be when a poll reads it: each
// instance advances each room it is asked about about once a second,
// whatever the number of polls.
const roomPollTTL = time.Second

// maxPlaces bounds the buyers' places one instance keeps per room; past
// it a poll reads Redis.
const maxPlaces = 1 << 20

// roomView is one room: its state (one flight at a time) and the places of
// the buyers this instance answered.
type roomView struct {
	mu      sync.Mutex
	st      room.State
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
	// (Rooms.RoomMembers: earlyRead early joiners and the late ones
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
func (v *roomView) setState(st room.State, err error, at time.Time, from uint64) {
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
func (s *Service) readMembers(ctx context.Context, v *roomView, storeRoom func() room.Room, gen int64) (read []room.Members, atEnd bool) {
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
		m, err := s.rooms.RoomMembers(ctx, storeRoom(), fromEarly, afterSeq, membersChunk)
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
func (v *roomView) addMembers(gen int64, from uint64, read []room.Members, atEnd bool) {
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
	p          room.Place
	afterAdmit bool
}

func (s *Service) view(id int64) *roomView {
	if v, ok := s.views.Load(id); ok {
		return v.(*roomView)
	}
	v, _ := s.views.LoadOrStore(id, &roomView{places: map[string]cachedPlace{}, absent: map[string]absence{}})
	return v.(*roomView)
}

// state is the room's state at most roomPollTTL old: the first poll after
// that advances the room (every instance may), the others wait for it.
func (s *Service) state(ctx context.Context, id int64, storeRoom func() room.Room, now time.Time) (room.State, error) {
	v := s.view(id)
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
		st, err := s.Advance(actx, storeRoom(), now)
		var members []room.Members
		atEnd := false
		if err == nil {
			members, atEnd = s.readMembers(actx, v, storeRoom, st.Gen)
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
		return room.State{}, ctx.Err()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.st, v.err
}

// place is the buyer's place: from memory while nothing it says can have
// changed, else read from Redis (joining first when join is set).
func (s *Service) place(ctx context.Context, id int64, storeRoom func() room.Room, user string, rank func() uint64, join bool,
	code access.Digest, st room.State, now time.Time) (room.Place, error) {
	v := s.view(id)
	v.mu.Lock()
	c, ok := v.places[user]
	ok = ok && c.p.Gen == st.Gen
	v.mu.Unlock()
	if st.Started && st.Lane == 0 && (!ok || c.p.Position == 0) {
		// An early joiner's position, from the frozen early set (not in a
		// room with a lane: the set does not say who is in the lane).
		if pos, found := s.earlyPosition(ctx, v, storeRoom, st, user); found {
			c, ok = cachedPlace{p: room.Place{Joined: true, Position: pos, Gen: st.Gen, Early: st.Early}}, true
			v.keep(user, c)
		}
	}
	if ok && c.p.Joined && (c.p.Position > 0 || !st.Started) && (!turnCame(c.p, st) || c.afterAdmit) {
		return c.p, nil
	}
	if !ok && !join && v.stillAbsent(user, st.Gen) {
		return room.Place{}, nil
	}
	var p room.Place
	var err error
	if join {
		p, err = s.Join(ctx, storeRoom(), user, rank(), code, now)
	} else {
		p, err = s.Look(ctx, storeRoom(), user, now)
		if err == nil && !p.Joined {
			v.rememberAbsent(user, p.Count, p.Gen)
		}
	}
	if err != nil {
		return p, err
	}
	if p.Joined && p.Gen == st.Gen {
		v.keep(user, cachedPlace{p: p, afterAdmit: turnCame(p, st)})
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
func (s *Service) earlyPosition(ctx context.Context, v *roomView, storeRoom func() room.Room, st room.State, user string) (int64, bool) {
	v.mu.Lock()
	if v.early == nil && v.earlyLoading == nil && st.Early > 0 && st.Gen == v.gen {
		wait := make(chan struct{})
		v.earlyLoading = wait
		v.mu.Unlock()
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		early, err := s.rooms.EarlyPositions(lctx, storeRoom(), st.Early)
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
