package draws

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/metrics"
)

// Taking is Redis as the entries' path uses it (*stockredis.Entries).
type Taking interface {
	// TakeEntry takes the buyer's entry inside w, or returns the one they
	// have (added false); a refusal is draw.ErrEntries*.
	TakeEntry(ctx context.Context, w draw.Window, e draw.NewEntry, id string) (draw.Accepted, bool, error)
	// AcceptedEntry is the buyer's entry Redis took, order.ErrNotFound
	// if none.
	AcceptedEntry(ctx context.Context, tag, activity int64, user string) (draw.Accepted, error)
}

// EntryPublisher sends an entry to the entries' topic and returns once
// Kafka acknowledged it (*orderevents.Publisher).
type EntryPublisher interface {
	PublishEntry(ctx context.Context, e draw.EntryEvent) error
}

// Accepting is the entries' path of ADR 7: Redis takes an entry, Kafka
// carries it, the consumer writes it (WriteEntries).
type Accepting struct {
	Taking    Taking
	Publisher EntryPublisher
	// Key makes the buyers' entry ids (draw.EntryIDFor): the order
	// number key every program reads from MySQL.
	Key []byte
	// KeysFor is how long a sale's Redis keys live (the programs' payment
	// window is part of it).
	KeysFor func(a activity.Activity) time.Time
	// Guesses counts the invalid codes of entries (nil: not counted);
	// PerBuyer and PerAddr bound them, as they bound the orders'. Log
	// hears of a count that failed.
	Guesses           Guesses
	PerBuyer, PerAddr access.GuessLimit
	Log               *slog.Logger
	// Grace is how long after the entries' close the drawer reads the
	// entries' topic's end (the watermark, ADR 7): an entry is answered
	// only when Kafka acknowledged it before then, so the drawer waits
	// for it.
	Grace time.Duration
	// Metrics times the Redis step and the publish; nil records nothing.
	Metrics *metrics.Entries
}

// accept takes user's entry in Redis and answers it once Kafka holds it:
// a publish that fails is ErrUnavailable, and the entry waits in Redis
// for the buyer's retry, which publishes it again (the consumer writes it
// once whatever the copies).
func (s *Service) accept(ctx context.Context, a activity.Activity, user, addr string, item activity.Item, qty int, now time.Time, code access.Digest) (draw.BuyerEntry, bool, error) {
	w := draw.Window{Tag: a.ItemID, StartsAt: a.StartsAt, ClosesAt: a.Draw.EntriesCloseAt, KeysUntil: s.Accepting.KeysFor(a)}
	e := draw.NewEntry{ActivityID: a.ID, UserID: user, ItemID: item.ItemID, Quantity: qty, At: now, Code: code}
	started := time.Now()
	got, added, err := s.Accepting.Taking.TakeEntry(ctx, w, e, draw.EntryIDFor(s.Accepting.Key, a.ID, user))
	s.Accepting.Metrics.Taken(time.Since(started))
	switch {
	case errors.Is(err, draw.ErrEntriesNotOpen):
		return draw.BuyerEntry{}, false, order.Errorf(order.ErrActivityNotActive, "the sale starts at %s: entries open then", a.StartsAt.UTC().Format(time.RFC3339Nano))
	case errors.Is(err, draw.ErrEntriesOver), errors.Is(err, draw.ErrEntriesClosed):
		return draw.BuyerEntry{}, false, order.Errorf(order.ErrActivityNotActive, "the draw's entries are closed")
	case errors.Is(err, access.ErrCodeInvalid):
		s.guessed(ctx, a, user, addr)
		return draw.BuyerEntry{}, false, err
	case errors.Is(err, draw.ErrCodesNotLoaded):
		return draw.BuyerEntry{}, false, order.Errorf(order.ErrNotWarmed, "the sale's presale codes are not loaded yet; try again shortly")
	case err != nil:
		return draw.BuyerEntry{}, false, err
	}
	entry, err := s.publish(ctx, a, user, got)
	return entry, added, err
}

// publish sends the buyer's entry got to Kafka and returns it once Kafka
// acknowledged it before the watermark's read (the close + Grace), so
// the draw waits for it. A publish that failed, or was acknowledged
// later, is ErrUnavailable: the entry may or may not be drawn, and the
// buyer learns which from GET .../entries/me.
func (s *Service) publish(ctx context.Context, a activity.Activity, user string, got draw.Accepted) (draw.BuyerEntry, error) {
	ev := draw.EventOf(a.ID, user, got)
	started := time.Now()
	err := s.Accepting.Publisher.PublishEntry(ctx, ev)
	s.Accepting.Metrics.Published(err, time.Since(started))
	if err != nil {
		return draw.BuyerEntry{}, order.Errorf(order.ErrUnavailable, "your entry is taken but not recorded yet: send it again (%v)", err)
	}
	if !s.Now().Before(a.Draw.EntriesCloseAt.Add(s.Accepting.Grace)) {
		return draw.BuyerEntry{}, order.Errorf(order.ErrUnavailable, "your entry was taken before the close but recorded too late to be sure of the draw: see GET /api/v1/activities/%d/entries/me", a.ID)
	}
	return ev.Entry(), nil
}

// WriteEntries writes entries the api accepted to MySQL, in one unit a
// sale (the consumer's entries loop): see orderdb.Draws.WriteEntries.
func (s *Service) WriteEntries(ctx context.Context, entries []draw.EntryEvent) (draw.Written, error) {
	return s.Store.WriteEntries(ctx, entries)
}

// onItsWay is the buyer's entry Redis took and MySQL does not hold yet
// (the consumer writes it within its lag), as long as the draw has not
// run: once it ran, an entry MySQL lacks was not drawn, and
// order.ErrNotFound says so.
func (s *Service) onItsWay(ctx context.Context, a activity.Activity, user string) (draw.BuyerEntry, error) {
	got, err := s.acceptedBeforeDraw(ctx, a, user)
	if err != nil {
		return draw.BuyerEntry{}, err
	}
	return draw.EventOf(a.ID, user, got).Entry(), nil
}

// acceptedBeforeDraw is onItsWay's entry as Redis keeps it (with the code
// it holds, which a publish again must carry).
func (s *Service) acceptedBeforeDraw(ctx context.Context, a activity.Activity, user string) (draw.Accepted, error) {
	got, err := s.Accepting.Taking.AcceptedEntry(ctx, a.ItemID, a.ID, user)
	if err != nil {
		return draw.Accepted{}, err
	}
	sum, err := s.Summaries.DrawSummary(ctx, a.ID)
	if err != nil {
		return draw.Accepted{}, err
	}
	if sum.State != draw.StateOpen {
		return draw.Accepted{}, order.Errorf(order.ErrNotFound, "no entry")
	}
	return got, nil
}
