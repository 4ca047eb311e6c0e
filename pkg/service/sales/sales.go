// Package sales holds the operator's use cases on a sale: create it,
// change it, warm it up, end it, cancel it (closing its unpaid orders), and
// restock one of its items in MySQL, then Redis, once per key.
package sales

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// Sales are the sales MySQL keeps (*orderdb.Activities).
type Sales interface {
	Activity(ctx context.Context, id int64) (activity.Activity, error)
	Item(ctx context.Context, id int64) (activity.Product, error)
	CreateSale(ctx context.Context, a activity.Activity, g activity.KeyGuard) (activity.Activity, error)
	PatchActivity(ctx context.Context, id int64, ch activity.Patch, now time.Time) (activity.Activity, error)
	EndActivity(ctx context.Context, id int64, now time.Time, how activity.Ending) (activity.Activity, error)
	ItemTag(ctx context.Context, item int64) (int64, error)
	ItemStock(ctx context.Context, itemID int64) (int64, error)
}

// Restocks are the restocks MySQL keeps (*orderdb.Restocks), and the
// figure a warm-up loads (stock and last restock at one instant).
type Restocks interface {
	reservation.StockReader
	Restock(ctx context.Context, itemID int64, key string, qty int64) (activity.Restock, bool, error)
	MarkRestockApplied(ctx context.Context, id int64) error
}

// Stock is the items' stock in Redis.
type Stock interface {
	Restock(ctx context.Context, item reservation.Item, id, qty int64) (reservation.Restocked, error)
	Stock(ctx context.Context, item reservation.Item) (reservation.Snapshot, error)
	Layout(ctx context.Context, item reservation.Item) (activity.Layout, error)
	WarmupFrom(ctx context.Context, item reservation.Item, buckets int, ttl time.Duration, db reservation.StockReader) (int64, error)
}

// Closer closes a cancelled sale's unpaid orders, up to limit a call, and
// says how many it closed (lifecycle.Service).
type Closer interface {
	CloseCancelled(ctx context.Context, activity int64, limit int) (int, error)
}

// Service runs the use cases. Now is the shared clock (every instance ends
// a sale at the same instant whatever its own clock says); SoldOut, when
// set, is told of an item whose units came back, so this instance stops
// answering SOLD_OUT from memory. PaymentWindow is the programs' payment
// window (a sale's own wins): with a sale's end it sets its keys' lifetime.
type Service struct {
	// Tx is the unit of work each change of MySQL runs in.
	Tx            unit.Work
	Sales         Sales
	Warmups       Warmups
	Restocks      Restocks
	Items         Items
	Tallies       Tallies
	Lists         Lists
	Stock         Stock
	Closer        Closer
	RoomControls  RoomControls
	LiveRooms     LiveRooms
	Audit         Audit
	Now           func() time.Time
	SoldOut       func(item int64)
	PaymentWindow time.Duration
	Log           *slog.Logger
	// Entries closes a draw sale's entries in Redis at its end
	// (*stockredis.Entries); nil: not a path entries take (ADR 6).
	Entries EntriesCloser
	// Codes loads a coded sale's codes at its warm-up, read from
	// CodeReader (*orderdb.Codes); nil loads none.
	Codes      CodesLoader
	CodeReader access.Reader
}

// EntriesCloser closes a draw sale's entries in Redis for good.
type EntriesCloser interface {
	CloseEntries(ctx context.Context, tag, activity int64, keysUntil time.Time) error
}

// cancelBatch bounds one pass of a cancel's closes.
const cancelBatch = 500

// End ends a running sale now, as operator by asked: every api instance
// refuses new orders within activity.CopyTTL, orders already accepted
// finish, and the consumer fails any order reserved after the end
// (SALE_ENDED).
func (s *Service) End(ctx context.Context, id int64, by string) (activity.Activity, error) {
	return s.end(ctx, id, activity.EndNow, by)
}

// end ends sale id now, as how says, in a unit of its own, with its record
// in the audit when it changed the sale (an end of an ended sale, a retry,
// is not recorded again).
//
// A draw sale's entries are closed in Redis after the commit, so an api
// instance whose copy of the sale predates the end (up to
// activity.CopyTTL old) takes no entry MySQL would then refuse (ADR 7).
// That close failing is logged: MySQL's row is the last word all the same.
func (s *Service) end(ctx context.Context, id int64, how activity.Ending, by string) (activity.Activity, error) {
	a, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (activity.Activity, error) {
		now := s.Now()
		before, err := s.Sales.Activity(ctx, id)
		if err != nil {
			return activity.Activity{}, err
		}
		a, err := s.Sales.EndActivity(ctx, id, now, how)
		if err != nil {
			return a, err
		}
		cancel := how == activity.CancelNow && before.CancelledAt.IsZero()
		if !now.Before(before.EndsAt) && !cancel || s.Audit == nil {
			return a, nil
		}
		e := activity.AuditEntry{ActivityID: id, Action: activity.ActionEnd, Subject: by, At: now,
			Detail: fmt.Sprintf(`{"ends_at":%q,"was_ends_at":%q}`, a.EndsAt.UTC().Format(time.RFC3339Nano),
				before.EndsAt.UTC().Format(time.RFC3339Nano))}
		if how == activity.CancelNow {
			e.Action = activity.ActionCancel
		}
		return a, s.Audit.RecordAction(ctx, e)
	})
	if err == nil && s.Entries != nil && a.Selling() == activity.SellsByDraw {
		if cerr := s.Entries.CloseEntries(ctx, a.ItemID, a.ID, a.KeysLiveUntil(s.PaymentWindow)); cerr != nil && s.Log != nil {
			s.Log.Warn("the draw's entries not closed in Redis: an instance may take entries until its copy of the sale is renewed",
				"activity_id", a.ID, "err", cerr)
		}
	}
	return a, err
}

// Cancel ends the sale now and closes its unpaid CREATED orders, giving
// their units and quotas back as a buyer's cancel does, and returns how
// many it closed, as operator by asked. Orders still on their way are
// closed by the consumer's closer once they reach MySQL.
func (s *Service) Cancel(ctx context.Context, id int64, by string) (activity.Activity, int, error) {
	a, err := s.end(ctx, id, activity.CancelNow, by)
	if err != nil {
		return activity.Activity{}, 0, err
	}
	closed := 0
	for {
		n, err := s.Closer.CloseCancelled(ctx, id, cancelBatch)
		closed += n
		if err != nil {
			return a, closed, fmt.Errorf("cancel activity %d after %d closes: %w", id, closed, err)
		}
		if n < cancelBatch {
			break
		}
	}
	s.soldOut(a.ItemID)
	return a, closed, nil
}

func (s *Service) soldOut(item int64) {
	if s.SoldOut != nil {
		s.SoldOut(item)
	}
}

// Restocked is a restock and the item's stock after it.
type Restocked struct {
	Restock activity.Restock
	// Replayed: the key restocked before; nothing was added now.
	Replayed bool
	// DBStock is MySQL's stock; RedisStock Redis's (nil: not warmed);
	// InFlight the units reserved in Redis and not yet final.
	DBStock    int64
	RedisStock *int64
	InFlight   int64
}

// Restock adds qty units to item in MySQL, then in Redis, once per key:
// MySQL records the restock under the key in the transaction that adds
// the units; the Redis step adds them once per restock (a marker), so a
// retry with the same key runs only that step again. If Redis fails after
// MySQL committed, the error says so and the retry with the same key, or
// else the reconciler's next repair, finishes it (ADR 1, "Unknown
// outcomes").
func (s *Service) Restock(ctx context.Context, itemID int64, key string, qty int64) (Restocked, error) {
	var rs activity.Restock
	var created bool
	err := s.Tx.InTx(ctx, func(ctx context.Context) (err error) {
		rs, created, err = s.Restocks.Restock(ctx, itemID, key, qty)
		return err
	})
	if err != nil {
		return Restocked{}, err
	}
	log := s.Log.With("request_id", logs.RequestID(ctx), "item_id", itemID, "restock_id", rs.ID, "quantity", rs.Quantity)
	// Where the item's keys are: with the first item of its latest sale.
	tag, err := s.Sales.ItemTag(ctx, itemID)
	if err != nil {
		return Restocked{}, err
	}
	item := reservation.In(tag, itemID)
	if !rs.Applied {
		res, err := s.applyInRedis(ctx, item, rs, log)
		if err != nil {
			return Restocked{}, err
		}
		if res.Added > 0 {
			s.soldOut(itemID)
		}
		log.Info("item restocked", "new", created, "redis_added", res.Added, "redis_warmed", res.Warmed)
	}
	db, err := s.Sales.ItemStock(ctx, itemID)
	if err != nil {
		return Restocked{}, err
	}
	snap, err := s.Stock.Stock(ctx, item)
	if err != nil {
		return Restocked{}, err
	}
	out := Restocked{Restock: rs, Replayed: !created, DBStock: db, InFlight: snap.Inflight}
	if snap.Warmed {
		out.RedisStock = &snap.Stock
	}
	return out, nil
}

// applyInRedis adds a restock MySQL holds to Redis, once.
func (s *Service) applyInRedis(ctx context.Context, item reservation.Item, rs activity.Restock, log *slog.Logger) (reservation.Restocked, error) {
	res, err := s.Stock.Restock(ctx, item, rs.ID, rs.Quantity)
	if err != nil {
		// MySQL has the units; Redis may or may not (a lost answer).
		// The same key finishes it, or the reconciler's repair does.
		log.Warn("restock recorded in MySQL, Redis step not done; retry with the same key", "err", err)
		return res, err
	}
	// Not warmed: the item's stock is not in Redis (or a bucket is
	// missing), and the warm-up that loads it reads MySQL, which has the
	// units. The restock stays pending: the warm-up records the restocks
	// it loads, and a retry with this key or the reconciler's repair
	// finishes any its figure did not include.
	if res.Warmed {
		if err := s.Restocks.MarkRestockApplied(ctx, rs.ID); err != nil {
			// Redis has the units; the record only tells the reconciler
			// it need not finish them (it would add nothing anyway).
			log.Warn("restock applied in Redis but not recorded", "err", err)
		}
	}
	return res, nil
}
