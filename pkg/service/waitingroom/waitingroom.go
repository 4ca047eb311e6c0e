// Package waitingroom keeps a sale's waiting room whole when Redis loses
// it. Redis holds the room (lua/room_*.lua) and answers every join, look
// and advance; MySQL holds its record (room_joins, 0017): every join that
// put a buyer in the room is written there before the buyer hears their
// place. A room Redis lost (emptied, restarted empty, brought back from an
// older copy) is rebuilt from that record under a new generation, so
// everyone told a place keeps it relative to the others and nobody who
// joined after the loss goes ahead of them (ADR 0005, "Losing the room").
//
// How a loss is seen: the room's generation key goes with the rest of the
// room, and every room script answers room.ErrLost without it,
// so the first join, look or advance after an emptying starts a rebuild. A
// room brought back from an older copy keeps a generation; the consumer's
// data-loss watch rebuilds every live room when it sees such a loss
// (RebuildAll), and a join that hands out a place MySQL holds for another
// buyer starts one too.
package waitingroom

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/foundation/batch"
)

// Rooms is Redis as the room uses it (*stockredis.Store).
type Rooms interface {
	JoinRoom(ctx context.Context, r room.Room, user string, rank uint64, code access.Digest, now time.Time) (room.Place, error)
	LookRoom(ctx context.Context, r room.Room, user string, now time.Time) (room.Place, error)
	AdvanceRoom(ctx context.Context, r room.Room, now time.Time, seen room.State) (room.State, error)
	BeginRoomBuild(ctx context.Context, r room.Room, token string, life time.Duration) error
	FinishRoomBuild(ctx context.Context, r room.Room, token string, img room.Image, now time.Time) error
	RoomGen(ctx context.Context, r room.Room) (int64, bool, error)
	EarlyPositions(ctx context.Context, r room.Room, early int64) (map[string]int64, error)
	RoomMembers(ctx context.Context, r room.Room, fromEarly, afterSeq, limit int64) (room.Members, error)
	ControlRoom(ctx context.Context, r room.Room, c room.Control, now time.Time) error
}

// Records is MySQL as the room uses it (*orderdb.DB).
type Records interface {
	RecordRoomJoins(ctx context.Context, activity int64, joins []room.Join, match []room.JoinMatch) ([]error, error)
	RoomRebuild(ctx context.Context, activity int64, now func() time.Time,
		build func(gen int64, builtAt time.Time, live room.Control, read func() ([]room.Join, map[string]bool, error)) (int64, error)) error
	RoomGeneration(ctx context.Context, activity int64) (int64, error)
}

// RecordDeadline is the longest a join may take from its call to Redis to
// its record's commit and still be answered; past it the join answers
// unavailable (the buyer joins again and hears their place then). A
// rebuild reads the record RecordDeadline + recordMargin after it took the
// room's generation away, so every join answered from the old room is in
// what it reads.
const RecordDeadline = 2 * time.Second

const recordMargin = 500 * time.Millisecond

// Service is the waiting room's use cases.
type Service struct {
	rooms   Rooms
	records Records
	log     *slog.Logger
	now     func() time.Time

	// writes are the joins waiting for their record.
	writes chan *pending
	// views are this instance's memory of each room it was asked about
	// (activity id -> *roomView, memory.go).
	views sync.Map
	// signers sign each room's admissions (activity id -> *room.Signer,
	// standing.go): its key derived once, not on every admitted poll.
	signers sync.Map

	// PaymentWindow is the orders' payment window (the room's keys live
	// as long as the sale's); HeldOrder the number of the order a buyer
	// holds in a sale ("" for none). Queue needs both.
	PaymentWindow time.Duration
	HeldOrder     func(ctx context.Context, a activity.Activity, user string) (string, error)

	mu         sync.Mutex
	rebuilding map[int64]bool
	// making is the first build of a room under way on this instance:
	// other calls wait for it instead of queueing on MySQL's lock.
	making map[int64]chan struct{}
	// seen is the latest state each room's advance answered here
	// (activity id -> room.State): a room of its generation
	// whose rate clock is older came back from an older copy.
	seen sync.Map
	// Codes checks the presale code of a code_required sale's join
	// (codes.go); CodeKey is the order number key codes are hashed under.
	Codes   CodeChecker
	CodeKey []byte
	// Guesses bounds the invalid codes of joins (codes.go).
	Guesses CodeGuesses

	// sleep waits out the joins in flight (time.Sleep but for tests).
	sleep func(context.Context, time.Duration) error
}

// pending is a join waiting for its record.
type pending struct {
	activity int64
	join     room.Join
	rejoin   bool
	done     chan error
}

// New returns the service; its record writer runs until the process ends.
func New(rooms Rooms, records Records, log *slog.Logger, now func() time.Time) *Service {
	s := &Service{rooms: rooms, records: records, log: log, now: now, rebuilding: map[int64]bool{}, making: map[int64]chan struct{}{},
		sleep: sleepCtx}
	// One writer: its batches grow with the load (a statement and a
	// commit each), and four cost MySQL twice the CPU a join in the queue
	// bench (ADR 5).
	s.writes = batch.Start(1, 8192, 500, s.record)
	return s
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errRebuilding is the answer while a room is rebuilt.
func errRebuilding(activity int64) error {
	return order.Errorf(order.ErrUnavailable, "the waiting room of sale %d is being rebuilt after Redis lost it; try again in a second", activity)
}

// Join puts user in r's room (rank: room.Rank of the sale's seed) and
// returns their place once MySQL holds their join. Joining again returns
// the same place. With a code (a code_priority sale's; "" for none) a new
// buyer joins the priority lane too, its place holding one of the code's
// uses, or is refused with the code's error and not let in.
func (s *Service) Join(ctx context.Context, r room.Room, user string, rank uint64, code access.Digest, now time.Time) (room.Place, error) {
	start := time.Now()
	p, err := s.rooms.JoinRoom(ctx, r, user, rank, code, now)
	if s.built(ctx, r, err) {
		start = time.Now()
		p, err = s.rooms.JoinRoom(ctx, r, user, rank, code, now)
	}
	if err != nil {
		return p, s.lost(r, err)
	}
	if p.Refused != nil {
		return room.Place{}, p.Refused
	}
	j := room.Join{UserID: user, Gen: p.Gen, JoinedAt: now}
	if p.Lane {
		// The lane's code, for a rebuild. A rejoin whose first record
		// never landed records the code it carries now.
		j.Code = code
	}
	if p.Position > p.Early {
		// A late join: its number in the generation. (An early joiner's
		// place is their rank, computed again by a rebuild.)
		j.Seq = p.Position - p.Early
	}
	done := make(chan error, 1)
	select {
	case s.writes <- &pending{activity: r.ActivityID, join: j, rejoin: !p.Added, done: done}:
	case <-ctx.Done():
		return room.Place{}, ctx.Err()
	}
	select {
	case err = <-done:
	case <-ctx.Done():
		return room.Place{}, ctx.Err()
	}
	switch {
	case errors.Is(err, room.ErrJoinConflict):
		s.log.Warn("waiting room: a join's place is another buyer's in MySQL; Redis came back from an older copy, rebuilding",
			"activity_id", r.ActivityID, "err", err)
		s.startRebuild(r, s.now())
		return room.Place{}, errRebuilding(r.ActivityID)
	case err != nil:
		return room.Place{}, err
	case time.Since(start) > RecordDeadline:
		return room.Place{}, order.Errorf(order.ErrUnavailable, "recording the join took longer than %v; join again", RecordDeadline)
	}
	return p, nil
}

// record writes a batch of joins, one statement per sale.
func (s *Service) record(b []*pending) {
	by := map[int64][]*pending{}
	for _, p := range b {
		by[p.activity] = append(by[p.activity], p)
	}
	for activity, ps := range by {
		joins, match := make([]room.Join, len(ps)), make([]room.JoinMatch, len(ps))
		for i, p := range ps {
			joins[i] = p.join
			if p.rejoin {
				match[i] = room.AnyPlace
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), RecordDeadline)
		errs, err := s.records.RecordRoomJoins(ctx, activity, joins, match)
		cancel()
		for i, p := range ps {
			if err != nil {
				p.done <- err
			} else {
				p.done <- errs[i]
			}
		}
	}
}

// Look returns user's place without joining.
func (s *Service) Look(ctx context.Context, r room.Room, user string, now time.Time) (room.Place, error) {
	p, err := s.rooms.LookRoom(ctx, r, user, now)
	if s.built(ctx, r, err) {
		p, err = s.rooms.LookRoom(ctx, r, user, now)
	}
	return p, s.lost(r, err)
}

// Advance admits the next positions at now (Rooms.AdvanceRoom). A
// room older than one this instance advanced before (Redis came back from
// an older copy, or a replica behind its master took over) admits nobody:
// it is rebuilt first, without waiting for the data-loss watch.
func (s *Service) Advance(ctx context.Context, r room.Room, now time.Time) (room.State, error) {
	var seen room.State
	if v, ok := s.seen.Load(r.ActivityID); ok {
		seen = v.(room.State)
	}
	st, err := s.rooms.AdvanceRoom(ctx, r, now, seen)
	if s.built(ctx, r, err) {
		st, err = s.rooms.AdvanceRoom(ctx, r, now, seen)
	}
	if errors.Is(err, room.ErrRewound) {
		s.log.Warn("waiting room: older in Redis than this instance saw it; rebuilding", "activity_id", r.ActivityID,
			"generation", seen.Gen, "seen_ms", seen.At)
		// It stays refused here until the rebuild gives it the next
		// generation.
		s.startRebuild(r, s.now())
		return st, errRebuilding(r.ActivityID)
	}
	if err == nil && (st.Gen != seen.Gen || st.At > seen.At) {
		s.seen.Store(r.ActivityID, st)
	}
	return st, s.lost(r, err)
}

// built makes a room that was never built (generation 0 in MySQL: nobody
// joined it yet) when err says Redis has none, at once, and reports
// whether it did: the call is then made again. A room that was built
// before is rebuilt in the background instead (lost), because its rebuild
// waits for the joins in flight.
func (s *Service) built(ctx context.Context, r room.Room, err error) bool {
	if !errors.Is(err, room.ErrLost) {
		return false
	}
	gen, gerr := s.records.RoomGeneration(ctx, r.ActivityID)
	if gerr != nil {
		return false
	}
	if gen != 0 {
		// Another call made it (or rebuilt it) since this one looked.
		have, ok, err := s.rooms.RoomGen(ctx, r)
		return err == nil && ok && have == gen
	}
	s.mu.Lock()
	wait, under := s.making[r.ActivityID]
	if !under {
		wait = make(chan struct{})
		s.making[r.ActivityID] = wait
	}
	s.mu.Unlock()
	if under {
		select {
		case <-wait:
		case <-ctx.Done():
			return false
		}
		have, ok, err := s.rooms.RoomGen(ctx, r)
		return err == nil && ok && have > 0
	}
	err = s.Rebuild(ctx, r, time.Time{})
	s.mu.Lock()
	delete(s.making, r.ActivityID)
	close(wait)
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("waiting room: making the room failed", "activity_id", r.ActivityID, "err", err)
		return false
	}
	return true
}

// lost starts a rebuild of r's room when err says Redis has none, and
// answers unavailable meanwhile.
func (s *Service) lost(r room.Room, err error) error {
	if !errors.Is(err, room.ErrLost) {
		return err
	}
	s.startRebuild(r, time.Time{})
	return errRebuilding(r.ActivityID)
}

// startRebuild rebuilds r's room in the background (Rebuild), once at a
// time per room on this instance (other instances wait for MySQL's lock
// and then find it built).
func (s *Service) startRebuild(r room.Room, lostBy time.Time) {
	s.mu.Lock()
	if s.rebuilding[r.ActivityID] {
		s.mu.Unlock()
		return
	}
	s.rebuilding[r.ActivityID] = true
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.rebuilding, r.ActivityID)
			s.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Rebuild(ctx, r, lostBy); err != nil {
			s.log.Error("waiting room: rebuild failed; the next call tries again", "activity_id", r.ActivityID, "err", err)
		}
	}()
}

// Rebuild writes r's room from MySQL's record, its live settings
// (room.Control) included, under a new generation,
// unless Redis holds the generation MySQL has and, when lostBy is set (a
// loss that leaves the generation, Redis brought back from an older copy,
// was seen by then), the room was built after lostBy: the room is whole,
// or another instance just rebuilt it. Rebuilds of one room run one at a
// time, whichever instance runs them.
func (s *Service) Rebuild(ctx context.Context, r room.Room, lostBy time.Time) error {
	return s.records.RoomRebuild(ctx, r.ActivityID, s.now, func(gen int64, builtAt time.Time, live room.Control,
		read func() ([]room.Join, map[string]bool, error)) (int64, error) {
		have, ok, err := s.rooms.RoomGen(ctx, r)
		if err != nil {
			return 0, err
		}
		if ok && have == gen && (lostBy.IsZero() || builtAt.After(lostBy)) {
			return gen, nil
		}
		began := time.Now()
		token := newToken()
		if err := s.rooms.BeginRoomBuild(ctx, r, token, time.Minute); err != nil {
			return 0, err
		}
		if gen > 0 {
			// Joins the old room answered land in MySQL within
			// RecordDeadline of their call to Redis, or are never told.
			if err := s.sleep(ctx, RecordDeadline+recordMargin); err != nil {
				return 0, err
			}
		}
		joins, done, err := read()
		if err != nil {
			return 0, err
		}
		now := s.now()
		img := Image(r.Settings.Seed, joins, done, !now.Before(r.StartsAt))
		img.Gen = gen + 1
		// The live settings as MySQL has them, not as this instance's copy
		// of the sale does: Redis lost them with the room.
		img.Control = live
		if err := s.rooms.FinishRoomBuild(ctx, r, token, img, now); err != nil {
			return 0, err
		}
		s.log.Warn("waiting room: rebuilt from MySQL", "activity_id", r.ActivityID, "generation", img.Gen,
			"early", len(img.Early), "late", len(img.Late), "next", img.Next, "took_ms", time.Since(began).Milliseconds())
		return img.Gen, nil
	})
}

// RebuildAll rebuilds the rooms of ids that were not built after lostBy:
// the consumer's data-loss watch runs it for the sales not ended when it
// sees that Redis lost data, since a Redis brought back from an older copy
// leaves rooms a generation. roomOf makes a sale's room as its scripts
// see it.
// The rooms are rebuilt side by side: each waits out its joins in flight.
func (s *Service) RebuildAll(ctx context.Context, ids []int64, lostBy time.Time, roomOf func(context.Context, int64) (room.Room, error)) error {
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			r, err := roomOf(ctx, id)
			if err == nil {
				err = s.Rebuild(ctx, r, lostBy)
			}
			if err != nil {
				errs[i] = fmt.Errorf("sale %d: %w", id, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// StoreRoom is sale a's room as its scripts see it; its keys live as long
// as the sale's (activity.Activity.KeysLiveUntil with the payment window).
func StoreRoom(a activity.Activity, paymentWindow time.Duration) room.Room {
	items := make([]reservation.Item, 0, len(a.Items))
	for _, id := range a.ItemIDs() {
		items = append(items, reservation.In(a.ItemID, id))
	}
	return room.Room{ActivityID: a.ID, Items: items, StartsAt: a.StartsAt, Settings: a.Room,
		GrantMax: a.PerUserLimit, KeysUntil: a.KeysLiveUntil(paymentWindow)}
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
