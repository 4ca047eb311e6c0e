package stockredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Room is one sale's waiting room as its scripts see it (lua/room_*.lua).
// Its keys share the sale's hash tag, so its scripts read the items' stock
// on a cluster too.
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

// grantScale packs an admission's expiry and grant in one score: expiry
// (ms) * grantScale + grant, below 2^53 for any expiry before year 2250.
const grantScale = 1024

// room is the key part of activity's room, beside the sale's other keys.
func (k Keys) room(activity int64, part string) string {
	return k.group() + "room:" + strconv.FormatInt(activity, 10) + ":" + part
}

// roomParts name the room's keys in the order the scripts take them.
var roomParts = []string{"early", "late", "seq", "frozen", "adm", "used", "held", "next", "tick", "gen"}

// ErrRoomLost is the room scripts' answer when the room has no generation
// in Redis: it was never built, or Redis lost it (emptied, restarted
// empty), or a build is under way. Nothing was read or written; the room
// is to be built from MySQL (BuildRoom) and the call made again.
var ErrRoomLost = errors.New("the waiting room is not in Redis")

// ErrRoomRewound is AdvanceRoom's answer when the room's rate clock is
// older than one the caller saw (RoomState.At): Redis came back from an
// older copy of it. Nothing was admitted; the room is to be rebuilt.
var ErrRoomRewound = errors.New("the waiting room in Redis is older than it was")

// roomKeys are the room's keys in the order the scripts take them.
func (s *Rooms) roomKeys(r Room) []string {
	k := s.keys(r.Items[0])
	keys := make([]string, 0, len(roomParts)+len(r.Items))
	for _, part := range roomParts {
		keys = append(keys, k.room(r.ActivityID, part))
	}
	for _, it := range r.Items {
		keys = append(keys, s.keys(it).Stock())
	}
	return keys
}

func (r Room) keysTTL(now time.Time) int64 {
	return max(r.KeysUntil.Sub(now), time.Minute).Milliseconds()
}

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
	// buyers are in it, as RoomState.Joined counts them: while it stays
	// the same, nobody joined since the look, this buyer neither.
	Count int64
}

var (
	roomJoinScript    = redis.NewScript(lua.Source("room_join"))
	roomAdvanceScript = redis.NewScript(lua.Source("room_advance"))
)

// roomAttempts is how often a join or look runs when its answer is lost:
// either is idempotent, so running it again is the resolution.
const roomAttempts = 3

// JoinRoom puts user in the room (rank: room.Rank of the sale's seed) and
// returns their place; joining again returns the same place. Joins of one
// room that arrive together share one run of the script (roomJoiner).
func (s *Rooms) JoinRoom(ctx context.Context, r Room, user string, rank uint64, now time.Time) (Place, error) {
	return s.joins.join(ctx, placeCall{r: r, user: user, rank: rank, now: now})
}

// LookRoom returns user's place without joining (Joined false if absent).
func (s *Rooms) LookRoom(ctx context.Context, r Room, user string, now time.Time) (Place, error) {
	ps, err := s.roomPlaces(ctx, "look", []placeCall{{r: r, user: user, now: now}})
	if err != nil {
		return Place{}, err
	}
	return ps[0], nil
}

// placeCall is one buyer's join or look of a room.
type placeCall struct {
	r     Room
	user  string
	rank  uint64
	now   time.Time
	reply chan placeAnswer
}

type placeAnswer struct {
	p   Place
	err error
}

// roomPlaces runs the place script once for calls, all of one room (one
// sale, one start), and returns each buyer's place in order. A lost
// answer is resolved by running it again: a join or a look is idempotent.
func (s *Rooms) roomPlaces(ctx context.Context, mode string, calls []placeCall) ([]Place, error) {
	r := calls[0].r
	all := s.roomKeys(r)
	keys := append(all[:6:6], all[9], s.earlyLogKey(r))
	args := make([]any, 0, 3+3*len(calls))
	args = append(args, r.StartsAt.UnixMilli(), r.keysTTL(calls[0].now), mode)
	for _, c := range calls {
		args = append(args, c.user, c.rank, c.now.UnixMilli())
	}
	var v []int64
	var err error
	for range roomAttempts {
		v, err = roomJoinScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
		if err == nil || !MayHaveRun(unavailable("room "+mode, err)) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, unavailable("room "+mode, err)
	}
	if len(v) == 1 && v[0] == -1 {
		return nil, ErrRoomLost
	}
	if len(v) != 7*len(calls) {
		return nil, unavailable("room "+mode, fmt.Errorf("%d values for %d buyers", len(v), len(calls)))
	}
	out := make([]Place, len(calls))
	for i := range calls {
		out[i] = placeOf(v[7*i : 7*i+7])
	}
	return out, nil
}

// placeOf reads one buyer's seven values of the place script's answer.
func placeOf(v []int64) Place {
	p := Place{Joined: v[0] >= 1, Added: v[0] == 2, Position: max(v[1], 0), Count: max(v[5], 0), Gen: v[6], Early: max(v[2], 0)}
	if v[3] >= 0 {
		p.Admission, p.Grant = time.UnixMilli(v[3]/grantScale).UTC(), int(v[3]%grantScale)
	}
	if v[4] >= 0 {
		p.Used, p.UsedExpires = true, time.UnixMilli(v[4]/grantScale).UTC()
	}
	return p
}

// RoomState is where a room stands after an advance.
type RoomState struct {
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
}

// SoldOut reports whether no unit is left and none is held: no waiter can
// be admitted until units come back.
func (st RoomState) SoldOut() bool { return st.Started && st.Left == 0 }

// advanceCap bounds the positions one run admits: the script blocks Redis
// while it runs (about a microsecond per admission).
const advanceCap = 10_000

// AdvanceRoom admits the next positions the rate and the units left allow
// at now, and returns the room's state. It may run on every instance at
// once: it admits by the time it is given, never by how often it runs. A
// lost answer is an error; the next run (its effect is kept) is the
// resolution. seen is the latest RoomState the caller had (zero: none): a
// room of its generation older than its At answers ErrRoomRewound and
// admits nobody.
func (s *Rooms) AdvanceRoom(ctx context.Context, r Room, now time.Time, seen RoomState) (RoomState, error) {
	v, err := roomAdvanceScript.Run(ctx, s.rdb, s.roomKeys(r), now.UnixMilli(), r.StartsAt.UnixMilli(),
		r.Settings.AdmitPerSecond, r.Settings.AdmissionTTL.Milliseconds(), r.GrantMax, r.keysTTL(now), advanceCap, seen.At, seen.Gen).Int64Slice()
	if err != nil {
		return RoomState{}, unavailable("room advance", err)
	}
	if len(v) == 1 && v[0] == -1 {
		return RoomState{}, ErrRoomLost
	}
	if len(v) == 1 && v[0] == -2 {
		return RoomState{}, ErrRoomRewound
	}
	if len(v) != 9 {
		return RoomState{}, unavailable("room advance", errors.New("unexpected answer"))
	}
	return RoomState{Started: v[0] == 1, Joined: v[1], Early: max(v[2], 0), Next: v[3], Held: v[4], Left: v[5], Admitted: v[6],
		Gen: v[7], At: v[8]}, nil
}

// earlyChunk is how many early joiners one ZRANGE of EarlyPositions reads.
var earlyChunk int64 = 10_000 // smaller in the tests (export_test.go)

// EarlyPositions returns every early joiner's position once the room has
// frozen (early is RoomState.Early): the early set no longer changes, so an
// api instance reads it once and answers those buyers' polls from memory.
// It reads in chunks, each a short command; a lost answer is an error and
// the next call reads again (it writes nothing).
func (s *Rooms) EarlyPositions(ctx context.Context, r Room, early int64) (map[string]int64, error) {
	key := s.roomKeys(r)[0]
	out := make(map[string]int64, early)
	for from := int64(0); from < early; from += earlyChunk {
		users, err := s.rdb.ZRange(ctx, key, from, min(from+earlyChunk, early)-1).Result()
		if err != nil {
			return nil, unavailable("room early positions", err)
		}
		for i, u := range users {
			out[u] = from + int64(i) + 1
		}
		if int64(len(users)) < min(earlyChunk, early-from) {
			return nil, unavailable("room early positions", errors.New("the early joiners changed after the freeze"))
		}
	}
	return out, nil
}

// RoomImage is a room as its record in MySQL rebuilds it.
type RoomImage struct {
	// Gen is the generation the built room has.
	Gen int64
	// Early are the buyers who joined before the start with their ranks
	// (room.Rank), Late those who joined after it, in the order they did.
	Early []RankedJoin
	Late  []string
	// Frozen is set when the room is built from its start on: the early
	// joiners then hold positions 1..len(Early).
	Frozen bool
	// Next is the last position taken as admitted: the leading positions
	// whose buyers' turn is done.
	Next int64
}

// RankedJoin is an early joiner and their rank.
type RankedJoin struct {
	UserID string
	Rank   uint64
}

var roomBuildScript = redis.NewScript(lua.Source("room_build"))

// roomBuildChunk is how many members one add of a build writes.
const roomBuildChunk = 2000

// BeginRoomBuild starts a build of r's room under token: the room loses its
// generation and keys, so every join, look and advance answers ErrRoomLost
// until FinishRoomBuild with the same token (or another build) commits.
// A lost answer is resolved by calling it again.
func (s *Rooms) BeginRoomBuild(ctx context.Context, r Room, token string, life time.Duration) error {
	if err := roomBuildScript.Run(ctx, s.rdb, s.roomBuildKeys(r), "begin", token, life.Milliseconds()).Err(); err != nil {
		return unavailable("room build", err)
	}
	return nil
}

// FinishRoomBuild writes img as r's room under token and gives it its
// generation last. It answers ErrRoomLost when another build began since
// (this one then wrote nothing more). Every step may run again after a
// lost answer: it writes the same members and values.
func (s *Rooms) FinishRoomBuild(ctx context.Context, r Room, token string, img RoomImage, now time.Time) error {
	keys := s.roomBuildKeys(r)
	run := func(args ...any) error {
		ok, err := roomBuildScript.Run(ctx, s.rdb, keys, args...).Int64()
		if err != nil {
			return unavailable("room build", err)
		}
		if ok != 1 {
			return fmt.Errorf("%w: another build of the room began", ErrRoomLost)
		}
		return nil
	}
	for chunk := range slices.Chunk(img.Early, roomBuildChunk) {
		args := []any{"add", token, "early"}
		for _, j := range chunk {
			args = append(args, j.Rank, j.UserID)
		}
		if err := run(args...); err != nil {
			return err
		}
	}
	for from := 0; from < len(img.Late); from += roomBuildChunk {
		args := []any{"add", token, "late"}
		for i, u := range img.Late[from:min(from+roomBuildChunk, len(img.Late))] {
			args = append(args, from+i+1, u)
		}
		if err := run(args...); err != nil {
			return err
		}
	}
	frozen := -1
	if img.Frozen {
		frozen = len(img.Early)
	}
	return run("commit", token, img.Gen, len(img.Late), frozen, img.Next, now.UnixMilli(), r.keysTTL(now))
}

func (s *Rooms) roomBuildKeys(r Room) []string {
	keys := s.roomKeys(r)[:len(roomParts)]
	return append(keys, s.keys(r.Items[0]).room(r.ActivityID, "building"), s.earlyLogKey(r))
}

// earlyLogKey is the list of r's early joiners in the order they joined
// (room_join); the advance never reads it.
func (s *Rooms) earlyLogKey(r Room) string {
	return s.keys(r.Items[0]).room(r.ActivityID, "earlylog")
}

// RoomMembers is who joined r's room since a caller's last read: the
// early joiners from the fromEarly-th (0-based) of the early log on, and
// the late joiners whose sequence number is above afterSeq, in the order
// they joined, at most limit of each; and the room's generation they were
// read in (0: the room has none, nothing was read). One MULTI, so the
// three are of one moment. A caller that read both to their end after a
// state read knows every buyer that state counts; a lost answer is read
// again (it writes nothing).
func (s *Rooms) RoomMembers(ctx context.Context, r Room, fromEarly, afterSeq, limit int64) (RoomMembers, error) {
	keys := s.roomKeys(r)
	var early *redis.StringSliceCmd
	var late *redis.ZSliceCmd
	var gen *redis.StringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		gen = p.Get(ctx, keys[9])
		early = p.LRange(ctx, s.earlyLogKey(r), fromEarly, fromEarly+limit-1)
		late = p.ZRangeByScoreWithScores(ctx, keys[1], &redis.ZRangeBy{Min: "(" + strconv.FormatInt(afterSeq, 10), Max: "+inf", Count: limit})
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return RoomMembers{}, unavailable("room members", err)
	}
	g, err := gen.Int64()
	if errors.Is(err, redis.Nil) {
		return RoomMembers{}, nil
	}
	if err != nil {
		return RoomMembers{}, unavailable("room members", err)
	}
	m := RoomMembers{Gen: g, Early: early.Val(), LastSeq: afterSeq}
	for _, z := range late.Val() {
		m.Late = append(m.Late, z.Member.(string))
		m.LastSeq = int64(z.Score)
	}
	m.AtEnd = int64(len(m.Early)) < limit && int64(len(m.Late)) < limit
	return m, nil
}

// RoomMembers is one read of RoomMembers.
type RoomMembers struct {
	Gen         int64
	Early, Late []string
	// LastSeq is the highest sequence number read (afterSeq when none).
	LastSeq int64
	// AtEnd: both were read to their end.
	AtEnd bool
}

// RoomGen returns r's room's generation in Redis, false when it has none.
func (s *Rooms) RoomGen(ctx context.Context, r Room) (int64, bool, error) {
	g, err := s.rdb.Get(ctx, s.roomKeys(r)[9]).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, unavailable("room generation", err)
	}
	return g, true, nil
}
