package sales

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// Warmups are what MySQL keeps of warm-ups: the stock a warm-up loads, and
// the mark that a sale is warmed, the operator's (only if the sale still
// has the end and bucket count the warm-up used) or the schedule's.
type Warmups interface {
	KeySettingsChangedWithin(ctx context.Context, id int64, d time.Duration) (bool, error)
	MarkWarmedAsOf(ctx context.Context, a activity.Activity) (bool, error)
	MarkActivityWarmed(ctx context.Context, id int64) error
}

// CodesLoader loads a sale's presale codes from MySQL into Redis, never
// overwriting a code's live count, and marks them loaded
// (*stockredis.Codes).
type CodesLoader interface {
	Load(ctx context.Context, sale activity.Activity, r access.Reader) (int, error)
}

// Warmup is a warm-up to run: the operator's, of the sale ActivityID, or
// the consumer's schedule's, of Due, a sale it listed as due at Now.
type Warmup struct {
	ActivityID int64
	Due        *activity.Activity
	Now        time.Time
	// By is the operator's subject (the operator's warm-up), for the
	// sale's audit; the schedule's is not recorded there.
	By string
}

// Warmed is what a warm-up did: the sale it warmed, and the units it
// loaded by item (an item left out was not warmed: the sale had started
// with its stock in Redis).
type Warmed struct {
	Activity activity.Activity
	Loaded   map[int64]int64
}

// Units is the units loaded, over all the sale's items.
func (w Warmed) Units() int64 {
	var n int64
	for _, u := range w.Loaded {
		n += u
	}
	return n
}

// Warmup loads a coded sale's codes (Codes, from CodeReader) and the
// stock of each of a sale's items into Redis
// (stockredis.Store.WarmupFrom: MySQL's stock minus what is in flight,
// never raising an existing stock key), keeping it past the sale's end,
// and records the sale warmed.
//
// The operator's warm-up reads the sale as MySQL has it now, not this
// instance's copy: a copy up to activity.CopyTTL old may predate an end
// or cancel (its keys would be timed by the old end, and the warm-up not
// recorded: a 503 for no fault). It refuses a sale whose end or bucket
// count changed less than activity.SettingsGuard ago (an instance's copy may
// still have the old ones) or whose keys would expire at once, and
// records the warm-up only if the sale still has the end and bucket count
// it used.
//
// The schedule's leaves alone an item of a sale that started without a
// warm-up on record whose stock Redis holds: buyers are using it, a
// warm-up now could only lower it, so it is left to the reconciler.
func (s *Service) Warmup(ctx context.Context, w Warmup) (Warmed, error) {
	if w.Due != nil {
		return s.warmDue(ctx, *w.Due, w.Now)
	}
	id := w.ActivityID
	if recent, err := s.Warmups.KeySettingsChangedWithin(ctx, id, activity.SettingsGuard); err != nil || recent {
		if err == nil {
			err = fmt.Errorf("warm-up of activity %d: its end or bucket count changed less than %s ago; retry: %w",
				id, activity.SettingsGuard, order.ErrUnavailable)
		}
		return Warmed{}, err
	}
	a, err := s.Sales.Activity(ctx, id)
	if err != nil {
		return Warmed{}, err
	}
	loaded, err := s.load(ctx, a, s.Now(), false)
	if err != nil {
		return Warmed{}, err
	}
	marked, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (bool, error) {
		marked, err := s.Warmups.MarkWarmedAsOf(ctx, a)
		if err != nil || !marked {
			return marked, err
		}
		return true, s.audit(ctx, a, activity.ActionWarmup, w.By)
	})
	switch {
	case err != nil:
		// The consumer's schedule then warms it once more (idempotent).
		s.Log.Warn("warm-up not recorded", "request_id", logs.RequestID(ctx), "activity_id", id, "err", err)
	case !marked:
		return Warmed{}, fmt.Errorf("warm-up of activity %d: the sale changed while it warmed up from an older copy; not recorded, retry: %w",
			id, order.ErrUnavailable)
	}
	return Warmed{Activity: a, Loaded: loaded}, nil
}

// warmDue warms up a, which the schedule listed as due at now, and
// records it.
func (s *Service) warmDue(ctx context.Context, a activity.Activity, now time.Time) (Warmed, error) {
	loaded, err := s.load(ctx, a, now, true)
	if err != nil {
		return Warmed{}, err
	}
	if err := s.Warmups.MarkActivityWarmed(ctx, a.ID); err != nil {
		return Warmed{}, fmt.Errorf("warm-up of activity %d: stock loaded (%v); record it: %w", a.ID, loaded, err)
	}
	return Warmed{Activity: a, Loaded: loaded}, nil
}

// load loads the stock of each of a's items at now, and returns the units
// loaded by item; scheduled leaves out an item of a started sale whose
// stock Redis holds, else keys that would expire at once are refused.
func (s *Service) load(ctx context.Context, a activity.Activity, now time.Time, scheduled bool) (map[int64]int64, error) {
	ttl, err := a.KeysLifetime(now, s.PaymentWindow)
	if err != nil {
		return nil, fmt.Errorf("warm-up of activity %d: %w", a.ID, err)
	}
	if !scheduled && ttl < time.Second {
		// Its keys would expire at once: nothing is left to sell or settle.
		return nil, order.Errorf(order.ErrActivityNotActive, "the sale ended at %s: there is nothing to warm up",
			a.EndsAt.UTC().Format(time.RFC3339))
	}
	if a.AccessMode().Coded() && s.Codes != nil {
		// Before the stock: a coded sale's orders need both, and the
		// scripts answer "not warmed" until the codes are marked loaded.
		if _, err := s.Codes.Load(ctx, a, s.CodeReader); err != nil {
			return nil, fmt.Errorf("warm-up of activity %d, its codes: %w", a.ID, err)
		}
	}
	loaded := map[int64]int64{}
	for _, id := range a.ItemIDs() {
		item := reservation.In(a.ItemID, id)
		if scheduled && !now.Before(a.StartsAt) {
			snap, err := s.Stock.Stock(ctx, item)
			if err != nil {
				return nil, err
			}
			if snap.Warmed {
				continue
			}
		}
		n, err := s.Stock.WarmupFrom(ctx, item, a.StockBuckets, ttl, s.Restocks)
		if err != nil {
			return nil, fmt.Errorf("warm-up of activity %d, item %d: %w", a.ID, id, err)
		}
		s.soldOut(id)
		loaded[id] = n
	}
	return loaded, nil
}
