package stockredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/batch"
)

// Entries takes draw sales' entries (ADR 7): a sale's entries are a hash
// beside the sale's other keys, buyer -> draw.Accepted, and a marker that
// closes them.
type Entries struct {
	*core

	once  sync.Once
	queue chan entryCall
}

var entryTakeScript = redis.NewScript(lua.Source("entry_take"))

// entryAttempts is how often a take runs when its answer is lost: it is
// idempotent, so running it again is the resolution.
const entryAttempts = 3

func (k Keys) entries(activity int64, part string) string {
	return k.group() + "draw:" + strconv.FormatInt(activity, 10) + ":" + part
}

func (s *Entries) entryKeys(tag, activity int64) []string {
	k := s.keys(reservation.One(tag))
	return []string{k.entries(activity, "entries"), k.entries(activity, "closed"), k.Codes(activity)}
}

// TakeEntry takes e (id: draw.EntryIDFor) in w's sale, unless the buyer
// has an entry there: then that entry is returned and added is false,
// whatever the window. A new entry is taken only inside w by e.At and
// while the sale's entries are not closed (draw.ErrEntriesClosed,
// draw.ErrEntriesNotOpen, draw.ErrEntriesOver otherwise). A new entry
// naming a code (e.Code) takes one of its uses with it, or is refused:
// access.ErrCodeInvalid, access.ErrCodeUsed, draw.ErrCodesNotLoaded. A
// buyer's entry found again uses nothing. Takes of one
// sale that arrive together share one run of the script (entryTaker). A
// lost answer is resolved by running the script again: a second run finds
// the entry (added false).
func (s *Entries) TakeEntry(ctx context.Context, w draw.Window, e draw.NewEntry, id string) (draw.Accepted, bool, error) {
	s.once.Do(func() { s.queue = batch.Start(entryWorkers, 4*entryBatch, entryBatch, s.runAll) })
	c := entryCall{w: w, e: e, id: id, reply: make(chan entryAnswer, 1)}
	select {
	case s.queue <- c:
	case <-ctx.Done():
		return draw.Accepted{}, false, unavailable("take entry", fmt.Errorf("%w: %w", errNotSent, ctx.Err()))
	}
	select {
	case a := <-c.reply:
		return a.a, a.added, a.err
	case <-ctx.Done():
		// It may still run: the buyer's retry finds the entry.
		return draw.Accepted{}, false, unavailable("take entry", ctx.Err())
	}
}

// entryBatch bounds the takes of one run of the script, and entryWorkers
// the runs in flight at once.
const (
	entryBatch   = 64
	entryWorkers = 4
)

// entryCall is one take waiting in the queue.
type entryCall struct {
	w     draw.Window
	e     draw.NewEntry
	id    string
	reply chan entryAnswer
}

type entryAnswer struct {
	a     draw.Accepted
	added bool
	err   error
}

// runAll runs the script once per sale and window of calls, one after the
// other.
func (s *Entries) runAll(calls []entryCall) {
	type sale struct {
		id     int64
		window draw.Window
	}
	var order []sale
	by := map[sale][]entryCall{}
	for _, c := range calls {
		k := sale{c.e.ActivityID, c.w}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], c)
	}
	for _, k := range order {
		s.take(context.Background(), by[k])
	}
}

// take runs the script for calls, all of one sale and window, and answers
// each.
func (s *Entries) take(ctx context.Context, calls []entryCall) {
	w, e0 := calls[0].w, calls[0].e
	keys := s.entryKeys(w.Tag, e0.ActivityID)
	ttl := max(w.KeysUntil.Sub(e0.At), time.Minute).Milliseconds()
	args := make([]any, 0, 3+6*len(calls))
	args = append(args, w.StartsAt.UnixMilli(), w.ClosesAt.UnixMilli(), ttl)
	for _, c := range calls {
		args = append(args, c.e.UserID, c.id, c.e.ItemID, c.e.Quantity, c.e.At.UnixMilli(), string(c.e.Code))
	}
	var v []any
	var err error
	for range entryAttempts {
		v, err = entryTakeScript.Run(ctx, s.rdb, keys, args...).Slice()
		if err == nil || !MayHaveRun(unavailable("take entry", err)) {
			break
		}
	}
	if err == nil && len(v) != 2*len(calls) {
		err = fmt.Errorf("%d values for %d buyers", len(v), len(calls))
	}
	for i, c := range calls {
		if err != nil {
			c.reply <- entryAnswer{err: unavailable("take entry", err)}
			continue
		}
		a, added, err := takenOf(v[2*i], v[2*i+1])
		c.reply <- entryAnswer{a: a, added: added, err: err}
	}
}

// takenOf reads one buyer's two values of the script's answer.
func takenOf(stateV, valV any) (draw.Accepted, bool, error) {
	state, _ := stateV.(int64)
	val, _ := valV.(string)
	switch state {
	case 0:
		switch val {
		case "closed":
			return draw.Accepted{}, false, draw.ErrEntriesClosed
		case "early":
			return draw.Accepted{}, false, draw.ErrEntriesNotOpen
		case "codes":
			return draw.Accepted{}, false, draw.ErrCodesNotLoaded
		case "invalid":
			return draw.Accepted{}, false, access.ErrCodeInvalid
		case "used":
			return draw.Accepted{}, false, access.ErrCodeUsed
		}
		return draw.Accepted{}, false, draw.ErrEntriesOver
	case 1, 2:
		a, err := draw.ParseAccepted(val)
		if err != nil {
			return a, false, unavailable("take entry", err)
		}
		return a, state == 2, nil
	}
	return draw.Accepted{}, false, unavailable("take entry", fmt.Errorf("state %v", stateV))
}

// AcceptedEntry is user's entry in the sale as Redis took it,
// order.ErrNotFound when Redis has none.
func (s *Entries) AcceptedEntry(ctx context.Context, tag, activity int64, user string) (draw.Accepted, error) {
	v, err := s.rdb.HGet(ctx, s.entryKeys(tag, activity)[0], user).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return draw.Accepted{}, order.Errorf(order.ErrNotFound, "no entry")
	case err != nil:
		return draw.Accepted{}, unavailable("read entry", err)
	}
	a, err := draw.ParseAccepted(v)
	if err != nil {
		return a, unavailable("read entry", err)
	}
	return a, nil
}

// CloseEntries closes the sale's entries, for good, until keysUntil: no
// new entry is taken after it whatever the clocks say (the sale ended or
// was cancelled). It is idempotent.
func (s *Entries) CloseEntries(ctx context.Context, tag, activity int64, keysUntil time.Time) error {
	ttl := max(time.Until(keysUntil), time.Minute)
	if err := s.rdb.Set(ctx, s.entryKeys(tag, activity)[1], "1", ttl).Err(); err != nil {
		return unavailable("close entries", err)
	}
	return nil
}

// AcceptedCount is how many entries Redis took in the sale.
func (s *Entries) AcceptedCount(ctx context.Context, tag, activity int64) (int64, error) {
	n, err := s.rdb.HLen(ctx, s.entryKeys(tag, activity)[0]).Result()
	if err != nil {
		return 0, unavailable("count entries", err)
	}
	return n, nil
}
