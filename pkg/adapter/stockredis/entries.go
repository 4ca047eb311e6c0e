package stockredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Entries takes draw sales' entries (ADR 7): a sale's entries are a hash
// beside the sale's other keys, buyer -> draw.Accepted, and a marker that
// closes them.
type Entries struct {
	*core
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
	return []string{k.entries(activity, "entries"), k.entries(activity, "closed")}
}

// TakeEntry takes e (id: draw.EntryIDFor) in w's sale, unless the buyer
// has an entry there: then that entry is returned and added is false,
// whatever the window. A new entry is taken only inside w by e.At and
// while the sale's entries are not closed (draw.ErrEntriesClosed,
// draw.ErrEntriesNotOpen, draw.ErrEntriesOver otherwise). A lost answer is resolved
// by running the script again: a second run finds the entry (added false).
func (s *Entries) TakeEntry(ctx context.Context, w draw.Window, e draw.NewEntry, id string) (a draw.Accepted, added bool, err error) {
	keys := s.entryKeys(w.Tag, e.ActivityID)
	ttl := max(w.KeysUntil.Sub(e.At), time.Minute).Milliseconds()
	args := []any{w.StartsAt.UnixMilli(), w.ClosesAt.UnixMilli(), ttl,
		e.UserID, id, e.ItemID, e.Quantity, e.At.UnixMilli()}
	var v []any
	for range entryAttempts {
		v, err = entryTakeScript.Run(ctx, s.rdb, keys, args...).Slice()
		if err == nil || !MayHaveRun(unavailable("take entry", err)) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return a, false, unavailable("take entry", err)
	}
	if len(v) != 2 {
		return a, false, unavailable("take entry", fmt.Errorf("%d values for one buyer", len(v)))
	}
	state, _ := v[0].(int64)
	val, _ := v[1].(string)
	switch state {
	case 0:
		switch val {
		case "closed":
			return a, false, draw.ErrEntriesClosed
		case "early":
			return a, false, draw.ErrEntriesNotOpen
		}
		return a, false, draw.ErrEntriesOver
	case 1, 2:
		a, err = draw.ParseAccepted(val)
		if err != nil {
			return a, false, unavailable("take entry", err)
		}
		return a, state == 2, nil
	}
	return a, false, unavailable("take entry", fmt.Errorf("state %v", v[0]))
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
