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
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/room"
)

// grantScale packs an admission's expiry and grant in one score: expiry
// (ms) * grantScale + grant, below 2^53 for any expiry before year 2250.
const grantScale = 1024

// room is the key part of activity's room, beside the sale's other keys.
func (k Keys) room(activity int64, part string) string {
	return k.group() + "room:" + strconv.FormatInt(activity, 10) + ":" + part
}

// roomParts name the room's keys in the order the scripts take them; the
// last three are the priority lane's (room_join.lua).
var roomParts = []string{"early", "late", "seq", "frozen", "adm", "used", "held", "next", "tick", "gen", "ctl",
	"lane", "lnext", "lcode"}

// roomKeys are the room's keys in the order the advance takes them: the
// parts, the sale's codes, then each item's stock.
func (s *Rooms) roomKeys(r room.Room) []string {
	k := s.keys(r.Items[0])
	keys := make([]string, 0, len(roomParts)+1+len(r.Items))
	for _, part := range roomParts {
		keys = append(keys, k.room(r.ActivityID, part))
	}
	keys = append(keys, k.Codes(r.ActivityID))
	for _, it := range r.Items {
		keys = append(keys, s.keys(it).Stock())
	}
	return keys
}

// keysTTL is how long r's keys are to live from now (ms), a minute at
// least.
func keysTTL(r room.Room, now time.Time) int64 {
	return max(r.KeysUntil.Sub(now), time.Minute).Milliseconds()
}

var (
	roomJoinScript    = redis.NewScript(lua.Source("room_join"))
	roomAdvanceScript = redis.NewScript(lua.Source("room_advance"))
)

// roomAttempts is how often a join or look runs when its answer is lost:
// either is idempotent, so running it again is the resolution.
const roomAttempts = 3

// JoinRoom puts user in the room (rank: room.Rank of the sale's seed) and
// returns their place; joining again returns the same place. A new buyer
// with a code (its digest; "" for none) is put in the priority lane too,
// taking one of its uses, or refused (access.ErrCodeInvalid,
// access.ErrCodeUsed, order.ErrNotWarmed when the codes are not loaded)
// and not put in. Joins of one room that arrive together share one run of
// the script (roomJoiner).
func (s *Rooms) JoinRoom(ctx context.Context, r room.Room, user string, rank uint64, code access.Digest, now time.Time) (room.Place, error) {
	return s.joins.join(ctx, placeCall{r: r, user: user, rank: rank, code: code, now: now})
}

// LookRoom returns user's place without joining (Joined false if absent).
func (s *Rooms) LookRoom(ctx context.Context, r room.Room, user string, now time.Time) (room.Place, error) {
	ps, err := s.roomPlaces(ctx, "look", []placeCall{{r: r, user: user, now: now}})
	if err != nil {
		return room.Place{}, err
	}
	return ps[0], nil
}

// placeCall is one buyer's join or look of a room.
type placeCall struct {
	r     room.Room
	user  string
	rank  uint64
	code  access.Digest
	now   time.Time
	reply chan placeAnswer
}

type placeAnswer struct {
	p   room.Place
	err error
}

// roomPlaces runs the place script once for calls, all of one room (one
// sale, one start), and returns each buyer's place in order. A lost
// answer is resolved by running it again: a join or a look is idempotent.
func (s *Rooms) roomPlaces(ctx context.Context, mode string, calls []placeCall) ([]room.Place, error) {
	r := calls[0].r
	all := s.roomKeys(r)
	keys := append(all[:6:6], all[9], s.earlyLogKey(r), all[11], all[13], all[14])
	args := make([]any, 0, 3+4*len(calls))
	args = append(args, r.StartsAt.UnixMilli(), keysTTL(r, calls[0].now), mode)
	for _, c := range calls {
		args = append(args, c.user, c.rank, c.now.UnixMilli(), string(c.code))
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
		return nil, room.ErrLost
	}
	if len(v) != placeValues*len(calls) {
		return nil, unavailable("room "+mode, fmt.Errorf("%d values for %d buyers", len(v), len(calls)))
	}
	out := make([]room.Place, len(calls))
	for i := range calls {
		out[i] = placeOf(v[placeValues*i : placeValues*i+placeValues])
	}
	return out, nil
}

// placeValues is how many values the place script answers per buyer.
const placeValues = 8

// placeOf reads one buyer's values of the place script's answer; a
// refused code is the place's Refused.
func placeOf(v []int64) room.Place {
	switch v[0] {
	case -7:
		return room.Place{Refused: access.ErrCodeInvalid}
	case -8:
		return room.Place{Refused: access.ErrCodeUsed}
	case -9:
		return room.Place{Refused: order.ErrNotWarmed}
	}
	p := room.Place{Joined: v[0] >= 1, Added: v[0] == 2, Position: max(v[1], 0), Count: max(v[5], 0), Gen: v[6], Early: max(v[2], 0),
		Lane: v[7] >= 0, LanePosition: max(v[7], 0)}
	if v[3] >= 0 {
		p.Admission, p.Grant = time.UnixMilli(v[3]/grantScale).UTC(), int(v[3]%grantScale)
	}
	if v[4] >= 0 {
		p.Used, p.UsedExpires = true, time.UnixMilli(v[4]/grantScale).UTC()
	}
	return p
}

// advanceCap bounds the positions one run admits: the script blocks Redis
// while it runs (about a microsecond per admission).
const advanceCap = 10_000

// AdvanceRoom admits the next positions the rate and the units left allow
// at now, and returns the room's state. It may run on every instance at
// once: it admits by the time it is given, never by how often it runs. A
// lost answer is an error; the next run (its effect is kept) is the
// resolution. seen is the latest room.State the caller had (zero: none): a
// room of its generation older than its At answers room.ErrRewound and
// admits nobody.
func (s *Rooms) AdvanceRoom(ctx context.Context, r room.Room, now time.Time, seen room.State) (room.State, error) {
	c := room.ControlOf(r.Settings)
	v, err := roomAdvanceScript.Run(ctx, s.rdb, s.roomKeys(r), now.UnixMilli(), r.StartsAt.UnixMilli(),
		c.AdmitPerSecond, r.Settings.AdmissionTTL.Milliseconds(), r.GrantMax, keysTTL(r, now), advanceCap, seen.At, seen.Gen,
		flag(c.Paused), flag(c.Passthrough), c.Version).Int64Slice()
	if err != nil {
		return room.State{}, unavailable("room advance", err)
	}
	if len(v) == 1 && v[0] == -1 {
		return room.State{}, room.ErrLost
	}
	if len(v) == 1 && v[0] == -2 {
		return room.State{}, room.ErrRewound
	}
	if len(v) != 15 {
		return room.State{}, unavailable("room advance", errors.New("unexpected answer"))
	}
	return room.State{Started: v[0] == 1, Joined: v[1], Early: max(v[2], 0), Next: v[3], Held: v[4], Left: v[5], Admitted: v[6],
		Gen: v[7], At: v[8], Control: room.Control{AdmitPerSecond: int(v[9]), Paused: v[10] == 1, Passthrough: v[11] == 1, Version: v[12]},
		Lane: v[13], LaneNext: v[14]}, nil
}

// flag is b as the room's scripts take it.
func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

var roomControlScript = redis.NewScript(lua.Source("room_control"))

// ControlRoom writes c as r's room's live settings at now, unless the room
// holds those of c's version or a later one: every advance, on every
// instance, runs with them from then on. A lost answer is resolved by
// sending it again (the version makes it write once).
func (s *Rooms) ControlRoom(ctx context.Context, r room.Room, c room.Control, now time.Time) error {
	keys := s.roomKeys(r)
	var err error
	for range roomAttempts {
		err = roomControlScript.Run(ctx, s.rdb, []string{keys[10], keys[8]}, c.AdmitPerSecond, flag(c.Paused), flag(c.Passthrough),
			c.Version, now.UnixMilli(), keysTTL(r, now)).Err()
		if err == nil || !MayHaveRun(unavailable("room control", err)) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return unavailable("room control", err)
	}
	return nil
}

// earlyChunk is how many early joiners one ZRANGE of EarlyPositions reads.
var earlyChunk int64 = 10_000 // smaller in the tests (export_test.go)

// EarlyPositions returns every early joiner's position once the room has
// frozen (early is room.State.Early): the early set no longer changes, so an
// api instance reads it once and answers those buyers' polls from memory.
// It reads in chunks, each a short command; a lost answer is an error and
// the next call reads again (it writes nothing).
func (s *Rooms) EarlyPositions(ctx context.Context, r room.Room, early int64) (map[string]int64, error) {
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

var roomBuildScript = redis.NewScript(lua.Source("room_build"))

// roomBuildChunk is how many members one add of a build writes.
const roomBuildChunk = 2000

// BeginRoomBuild starts a build of r's room under token: the room loses its
// generation and keys, so every join, look and advance answers room.ErrLost
// until FinishRoomBuild with the same token (or another build) commits.
// A lost answer is resolved by calling it again.
func (s *Rooms) BeginRoomBuild(ctx context.Context, r room.Room, token string, life time.Duration) error {
	if err := roomBuildScript.Run(ctx, s.rdb, s.roomBuildKeys(r), "begin", token, life.Milliseconds()).Err(); err != nil {
		return unavailable("room build", err)
	}
	return nil
}

// FinishRoomBuild writes img as r's room under token and gives it its
// generation last. It answers room.ErrLost when another build began since
// (this one then wrote nothing more). Every step may run again after a
// lost answer: it writes the same members and values.
func (s *Rooms) FinishRoomBuild(ctx context.Context, r room.Room, token string, img room.Image, now time.Time) error {
	keys := s.roomBuildKeys(r)
	run := func(args ...any) error {
		ok, err := roomBuildScript.Run(ctx, s.rdb, keys, args...).Int64()
		if err != nil {
			return unavailable("room build", err)
		}
		if ok != 1 {
			return fmt.Errorf("%w: another build of the room began", room.ErrLost)
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
	for chunk := range slices.Chunk(img.Lane, roomBuildChunk) {
		args := []any{"add", token, "lane"}
		for _, m := range chunk {
			args = append(args, m.Score, m.UserID, string(m.Holds))
		}
		if err := run(args...); err != nil {
			return err
		}
	}
	frozen := -1
	if img.Frozen {
		frozen = len(img.Early)
	}
	c := img.Control
	return run("commit", token, img.Gen, len(img.Late), frozen, img.Next, now.UnixMilli(), keysTTL(r, now),
		c.AdmitPerSecond, flag(c.Paused), flag(c.Passthrough), c.Version, img.LaneNext)
}

// roomBuildKeys are r's room's keys as room_build takes them: the parts
// up to ctl, the build's token, the early log, then the lane's.
func (s *Rooms) roomBuildKeys(r room.Room) []string {
	keys := s.roomKeys(r)
	return append(keys[:11:11], s.keys(r.Items[0]).room(r.ActivityID, "building"), s.earlyLogKey(r), keys[11], keys[12], keys[13])
}

// earlyLogKey is the list of r's early joiners in the order they joined
// (room_join); the advance never reads it.
func (s *Rooms) earlyLogKey(r room.Room) string {
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
func (s *Rooms) RoomMembers(ctx context.Context, r room.Room, fromEarly, afterSeq, limit int64) (room.Members, error) {
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
		return room.Members{}, unavailable("room members", err)
	}
	g, err := gen.Int64()
	if errors.Is(err, redis.Nil) {
		return room.Members{}, nil
	}
	if err != nil {
		return room.Members{}, unavailable("room members", err)
	}
	m := room.Members{Gen: g, Early: early.Val(), LastSeq: afterSeq}
	for _, z := range late.Val() {
		m.Late = append(m.Late, z.Member.(string))
		m.LastSeq = int64(z.Score)
	}
	m.AtEnd = int64(len(m.Early)) < limit && int64(len(m.Late)) < limit
	return m, nil
}

// RoomGen returns r's room's generation in Redis, false when it has none.
func (s *Rooms) RoomGen(ctx context.Context, r room.Room) (int64, bool, error) {
	g, err := s.rdb.Get(ctx, s.roomKeys(r)[9]).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, unavailable("room generation", err)
	}
	return g, true, nil
}
