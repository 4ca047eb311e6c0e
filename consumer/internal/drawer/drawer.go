// Package drawer runs the draws of draw sales and gives their winners, and
// then their alternates, orders. Exactly one drawer acts at a time across
// consumer processes (the "drawer" lock); two overlapping would still be
// exact, since the draw is one MySQL transaction that sets the draw DRAWN
// only if it was not, an entry gets its order number once (set before the
// order is reserved), and the order goes through the pipeline's own path:
// the reserve script, keyed by the entry, then Kafka and the consumer's
// conditional insert.
//
// Units reach alternates only through Redis's stock: once every winner's
// order is reserved, units of a size that are free again (a winner's order
// closed unpaid, cancelled or failed; a restock) go to that size's first
// alternates, in ranking order, whose quantity fits them.
package drawer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/failpoint"
	"github.com/seckill/seckill/pkg/foundation/periodic"
)

// DB is MySQL as the drawer uses it (*orderdb.DB).
type DB interface {
	DrawsDue(ctx context.Context, now time.Time) ([]int64, error)
	RunDraw(ctx context.Context, activity int64, now time.Time) (orderdb.Drawn, error)
	DrawnLive(ctx context.Context, now time.Time) ([]int64, error)
	Activity(ctx context.Context, id int64) (order.Activity, error)
	Unissued(ctx context.Context, activity int64, limit int) ([]orderdb.Pick, error)
	WinnersWithoutOrders(ctx context.Context, activity int64, limit int) ([]orderdb.Pick, error)
	NextAlternates(ctx context.Context, activity, item int64, most int64, limit int) ([]orderdb.Pick, error)
	NumberPick(ctx context.Context, entryID, no string) (string, error)
	MarkIssued(ctx context.Context, entryID, no string) error
	Unnumber(ctx context.Context, entryID, no string) error
}

// Stock is Redis as the drawer uses it (*stockredis.Store).
type Stock interface {
	Reserve(ctx context.Context, r stockredis.Reservation) (stockredis.ReserveResult, error)
	Stocks(ctx context.Context, items []stockredis.Item) ([]stockredis.Snapshot, error)
	PriorOrders(ctx context.Context, item stockredis.Item, activity int64, user, idemKey string) (stockredis.PriorOrders, error)
}

// Publisher sends create-order events; an error means the event may or may
// not have reached Kafka.
type Publisher interface {
	Publish(ctx context.Context, e order.Event) error
}

// Drawer runs the draws and their orders periodically.
type Drawer struct {
	DB        DB
	Stock     Stock
	Publisher Publisher
	// Numbers makes the orders' numbers: the api's signed generator, so
	// the api vouches for them.
	Numbers *order.NumberGenerator
	Locker  *lock.Locker
	// Every is the pause between passes (default 1s).
	Every time.Duration
	// PaymentWindow is the programs' payment window (a sale's own wins).
	PaymentWindow time.Duration
	Log           *slog.Logger
	// Now is the shared clock.
	Now func() time.Time
}

// batch bounds the picks one pass handles of each kind, for each sale.
const batch = 500

// Run runs a pass every Every until ctx ends.
func (d *Drawer) Run(ctx context.Context) {
	every := d.Every
	if every <= 0 {
		every = time.Second
	}
	periodic.Every(ctx, every, func(ctx context.Context) {
		st, err := d.Once(ctx)
		switch {
		case errors.Is(err, lock.ErrNotAcquired), ctx.Err() != nil:
		case err != nil:
			d.Log.Warn("drawer pass failed", "err", err)
		}
		if st.Drawn > 0 || st.Ordered > 0 {
			d.Log.Info("draw pass", "drawn", st.Drawn, "orders", st.Ordered, "alternates", st.Alternates)
		}
	})
}

// Stats counts what one pass did.
type Stats struct {
	Drawn      int // draws run
	Ordered    int // orders reserved and published (winners' and alternates')
	Alternates int // of which alternates'
}

// Once runs one pass under the lock; lock.ErrNotAcquired means another
// process is drawing.
func (d *Drawer) Once(ctx context.Context) (Stats, error) {
	var st Stats
	l, err := d.Locker.TryLock(ctx, "drawer", lock.WithTTL(30*time.Second))
	if err != nil {
		return st, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	lctx, cancel := l.Context(ctx)
	defer cancel()

	now := d.Now()
	due, err := d.DB.DrawsDue(lctx, now)
	if err != nil {
		return st, err
	}
	var errs []error
	for _, id := range due {
		res, err := d.DB.RunDraw(lctx, id, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if res.Ran {
			st.Drawn++
			d.Log.Info("draw run", "activity_id", id, "entries", res.Entries, "winners", res.Winners)
		}
	}
	live, err := d.DB.DrawnLive(lctx, now)
	if err != nil {
		return st, errors.Join(append(errs, err)...)
	}
	for _, id := range live {
		if err := d.orders(lctx, id, &st); err != nil {
			errs = append(errs, fmt.Errorf("activity %d: %w", id, err))
		}
	}
	return st, errors.Join(errs...)
}

// orders gives the drawn sale's picks their orders: first any numbered one
// whose event is not known to be in Kafka, then the winners, then, when
// every winner has its order, the alternates the free units fit.
func (d *Drawer) orders(ctx context.Context, id int64, st *Stats) error {
	a, err := d.DB.Activity(ctx, id)
	if err != nil {
		return err
	}
	if !a.ActiveAt(d.Now()) {
		return nil
	}
	waiting := false
	unissued, err := d.DB.Unissued(ctx, id, batch)
	if err != nil {
		return err
	}
	for _, p := range unissued {
		ok, err := d.place(ctx, a, p, p.OrderNo, false)
		if err != nil {
			return err
		}
		if ok {
			st.Ordered++
		} else if p.Outcome == draw.Won {
			waiting = true
		}
	}
	winners, err := d.DB.WinnersWithoutOrders(ctx, id, batch)
	if err != nil {
		return err
	}
	ordered, short, err := d.issueAll(ctx, a, winners)
	st.Ordered += ordered
	if err != nil {
		return err
	}
	waiting = waiting || short
	if waiting || len(winners) == batch {
		// A winner's units are not reserved yet: nothing is free for an
		// alternate until they are.
		return nil
	}
	return d.alternates(ctx, a, st)
}

// alternates gives each size's free units, as Redis counts them, to its
// first alternates in ranking order whose quantity fits.
func (d *Drawer) alternates(ctx context.Context, a order.Activity, st *Stats) error {
	items := make([]stockredis.Item, len(a.Items))
	for i, it := range a.Items {
		items[i] = stockredis.In(a.ItemID, it.ItemID)
	}
	snaps, err := d.Stock.Stocks(ctx, items)
	if err != nil {
		return err
	}
	for i, it := range items {
		left := snaps[i].Stock
		if !snaps[i].Warmed {
			continue
		}
		for left > 0 {
			next, err := d.DB.NextAlternates(ctx, a.ID, it.ID, left, 50)
			if err != nil {
				return err
			}
			if len(next) == 0 {
				break
			}
			for _, p := range next {
				if int64(p.Quantity) > left {
					continue
				}
				ok, err := d.issue(ctx, a, p)
				if err != nil {
					return err
				}
				if !ok {
					// Redis had fewer units than it showed: the next
					// pass reads it again.
					left = 0
					break
				}
				st.Ordered++
				st.Alternates++
				left -= int64(p.Quantity)
			}
		}
	}
	return nil
}

// parallel is how many winners' orders one pass places at once: each is
// a reserve, a publish and two MySQL writes, mostly waiting.
const parallel = 16

// issueAll issues picks (issue), parallel at a time, and returns how many
// got their order, whether any could not have it now, and the first error.
func (d *Drawer) issueAll(ctx context.Context, a order.Activity, picks []orderdb.Pick) (int, bool, error) {
	var (
		mu      sync.Mutex
		ordered int
		short   bool
		first   error
		wg      sync.WaitGroup
		slots   = make(chan struct{}, parallel)
	)
	for _, p := range picks {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			ok, err := d.issue(ctx, a, p)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && first == nil:
				first = err
			case err == nil && ok:
				ordered++
			case err == nil:
				short = true
			}
		})
	}
	wg.Wait()
	return ordered, short, first
}

// issue gives a pick without a number one, or finds the one it has, then
// places its order (place). A number made here is fresh: no reserve can
// have run with it before.
func (d *Drawer) issue(ctx context.Context, a order.Activity, p orderdb.Pick) (bool, error) {
	mine := d.Numbers.NextFor(a.ItemID, p.UserID)
	no, err := d.DB.NumberPick(ctx, p.EntryID, mine)
	if err != nil {
		return false, err
	}
	return d.place(ctx, a, p, no, no == mine)
}

// place reserves the pick's order no and publishes its event, and reports
// whether it did (false: Redis has not the units for it now). A retry
// after a lost answer finds the reservation by the entry's key, and the
// consumer takes a second event of the same order as the first. fresh
// says no reserve ran with no before: only then does a refusal prove
// that no order of that number exists, so that an alternate's number may
// be taken back (a reserve of an older number may have run, its answer
// lost, and the record of its key be gone with a Redis that lost data).
func (d *Drawer) place(ctx context.Context, a order.Activity, p orderdb.Pick, no string, fresh bool) (bool, error) {
	now := d.Now()
	quotaTTL, err := a.RecordsLifetime(now)
	if err != nil {
		return false, err
	}
	reservationTTL, err := a.KeysLifetime(now, d.PaymentWindow)
	if err != nil {
		return false, err
	}
	item := stockredis.In(a.ItemID, p.ItemID)
	key, err := d.key(ctx, a, item, p, no, fresh)
	if err != nil {
		return false, err
	}
	res, err := d.Stock.Reserve(ctx, stockredis.Reservation{
		OrderNo: no, UserID: p.UserID, ItemID: item.ID, Tag: item.Tag, ActivityID: a.ID, Quantity: p.Quantity,
		IdempotencyKey: key, At: now, QuotaTTL: quotaTTL, ReservationTTL: reservationTTL, Buckets: a.StockBuckets,
	})
	switch {
	case errors.Is(err, order.ErrSoldOut):
		if p.Outcome == draw.Alternate && fresh {
			// Its place stays: it waits for the next units.
			return false, d.DB.Unnumber(ctx, p.EntryID, no)
		}
		if p.Outcome == draw.Alternate {
			// Kept numbered: its reserve is tried again while the sale is on.
			d.Log.Warn("an alternate's order was reserved before and Redis refuses it now", "activity_id", a.ID, "entry_id", p.EntryID, "order_no", no)
			return false, nil
		}
		d.Log.Warn("a winner's units are not in Redis yet", "activity_id", a.ID, "entry_id", p.EntryID, "item_id", item.ID)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reserve the order of entry %s: %w", p.EntryID, err)
	case res.Duplicate && res.OrderNo != no:
		return false, fmt.Errorf("entry %s: its key names order %s, its row %s", p.EntryID, res.OrderNo, no)
	}
	failpoint.Inject("draw-after-reserve")
	ev := order.Event{Version: order.EventVersion, OrderNo: no, IdempotencyKey: key, UserID: p.UserID, ItemID: item.ID,
		ActivityID: a.ID, Quantity: p.Quantity, ReservedAt: now, RequestID: key}
	if err := d.Publisher.Publish(ctx, ev); err != nil {
		// The reservation stays RESERVED: the next pass (or the sweep)
		// publishes it again.
		return false, fmt.Errorf("publish the order of entry %s: %w", p.EntryID, err)
	}
	return true, d.DB.MarkIssued(ctx, p.EntryID, no)
}

// key is the idempotency key pick p's order no is reserved with:
// order.DrawKey, which no buyer can send, unless a reserve of no before
// the upgrade holds the form before (order.LegacyDrawKey; a number that
// is fresh was never reserved): a retry finds its reservation by that key
// and publishes its event with it, as the first attempt did.
func (d *Drawer) key(ctx context.Context, a order.Activity, item stockredis.Item, p orderdb.Pick, no string, fresh bool) (string, error) {
	if fresh {
		return order.DrawKey(p.EntryID), nil
	}
	legacy := order.LegacyDrawKey(p.EntryID)
	prior, err := d.Stock.PriorOrders(ctx, item, a.ID, p.UserID, legacy)
	if err != nil {
		return "", fmt.Errorf("read the order of entry %s: %w", p.EntryID, err)
	}
	if prior.ByKey == no {
		return legacy, nil
	}
	return order.DrawKey(p.EntryID), nil
}
