package room

import (
	"errors"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Room is one sale's waiting room as its store (Redis's room scripts)
// sees it: the room's keys share the sale's hash tag, so its scripts read
// the items' stock on a cluster too.
type Room struct {
	ActivityID int64
	// Items are the sale's items, its first one first (the tag).
	Items    []reservation.Item
	StartsAt time.Time
	Settings activity.WaitingRoom
	// GrantMax is the most units one admission holds: the sale's per-user
	// limit.
	GrantMax int
	// KeysUntil is when the room's keys may go (the sale's keys' end).
	KeysUntil time.Time
}

// ErrLost is the room store's answer when the room has no generation in
// Redis: it was never built, or Redis lost it (emptied, restarted empty),
// or a build is under way. Nothing was read or written; the room
// is to be built from its record and the call made again.
var ErrLost = errors.New("the waiting room is not in Redis")

// ErrRewound is an advance's answer when the room's rate clock is older
// than one the caller saw (State.At): Redis came back from an older copy
// of it. Nothing was admitted; the room is to be rebuilt.
var ErrRewound = errors.New("the waiting room in Redis is older than it was")

// Place is a buyer's place in a room.
type Place struct {
	// Joined is false for a buyer who did not join (a look only).
	Joined bool
	// Added is true when this call put the buyer in the room: their join
	// is to be recorded before it is answered.
	Added bool
	// Gen is the room's generation the place belongs to; Early the early
	// joiners' count once the room froze (a late joiner's number in the
	// generation is Position - Early).
	Gen, Early int64
	// Position is the buyer's place in line from 1; 0 before the room
	// froze at the start (an early joiner's position is not known yet).
	Position int64
	// Admission is when the buyer's unused admission expires (zero: none),
	// and Grant the units it holds.
	Admission time.Time
	Grant     int
	// Used is true once an order used the buyer's admission; UsedExpires
	// is when that admission expires (the order's retries need it).
	Used        bool
	UsedExpires time.Time
	// Count is, for a buyer not in the room (Joined false), how many
	// buyers are in it, as State.Joined counts them: while it stays
	// the same, nobody joined since the look, this buyer neither.
	Count int64
	// Lane is true for a buyer in the priority lane (they joined a
	// code_priority sale's room with a valid code), LanePosition their
	// place in it from 1 (0 before the room froze, for an early one).
	Lane         bool
	LanePosition int64
	// Refused is why a join with a code was not let in (the code's
	// error); nothing else is set then.
	Refused error
}

// State is where a room stands after an advance.
type State struct {
	// Started is false before the sale's start (only Joined is set then:
	// the early joiners so far).
	Started bool
	// Joined is every buyer in the room; Early those who came before the
	// start (positions 1..Early).
	Joined, Early int64
	// Next is the last position admitted: every position up to it was
	// admitted once.
	Next int64
	// Held is the units the unused admissions hold; Left the units left to
	// sell over every item, -1 while an item is not warmed.
	Held, Left int64
	// Admitted is how many positions this run let in.
	Admitted int64
	// Gen is the room's generation: a state of another generation than a
	// place remembered says the room was rebuilt since.
	Gen int64
	// At is the room's rate clock (ms) after the advance, 0 before the
	// start: it only ever grows, so the next advance is given it (seen).
	At int64
	// Control is the room's live settings the advance ran with.
	Control Control
	// Lane is how many buyers are in the priority lane, LaneNext how many
	// of them were admitted: the lane goes before the line.
	Lane, LaneNext int64
}

// SoldOut reports whether no unit is left and none is held: no waiter can
// be admitted until units come back.
func (st State) SoldOut() bool { return st.Started && st.Left == 0 }

// Image is a room as its record in MySQL rebuilds it.
type Image struct {
	// Gen is the generation the built room has.
	Gen int64
	// Early are the buyers who joined before the start with their ranks
	// (Rank), Late those who joined after it, in the order they did.
	Early []RankedJoin
	Late  []string
	// Frozen is set when the room is built from its start on: the early
	// joiners then hold positions 1..len(Early).
	Frozen bool
	// Next is the last position taken as admitted: the leading positions
	// whose buyers' turn is done.
	Next int64
	// Control is the room's live settings as MySQL has them: the build
	// writes them unless Redis holds a later version.
	Control Control
	// Lane is the priority lane in its order, LaneNext how many of its
	// leading members are taken as admitted.
	Lane     []LaneMember
	LaneNext int64
}

// LaneMember is a buyer in the priority lane as the build writes them:
// Score orders the lane (an early member's rank / 2^53, below 1, exactly;
// a late one's sequence number), Holds the digest of the code whose use
// their place still holds ("" once an order took it over).
type LaneMember struct {
	UserID string
	Score  string
	Holds  access.Digest
}

// RankedJoin is an early joiner and their rank.
type RankedJoin struct {
	UserID string
	Rank   uint64
}

// Members is one read of a room's members, from the early joiners'
// position and the late joiners' sequence number given.
type Members struct {
	Gen         int64
	Early, Late []string
	// LastSeq is the highest sequence number read (afterSeq when none).
	LastSeq int64
	// AtEnd: both were read to their end.
	AtEnd bool
}
