package stockredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// WarmupFrom loads the item's sellable stock from MySQL: its stock (read
// after this call has read the item's pending reservations) minus what is
// in flight and not in MySQL yet, split evenly over the buckets of a
// bucketed item (buckets > 1). It never raises an existing stock key or
// bucket; it returns the Redis stock afterwards.
//
// An order MySQL has committed whose confirm has not run is in Redis's
// in-flight counter and out of MySQL's stock: the warm-up leaves it out of
// what is in flight (the reconciler's "committed"), so its units are not
// taken off twice. The pending reservations are read first, MySQL's stock
// and which of them it has committed next, in one snapshot, and the
// script corrects the in-flight counter by the state each of them is in
// when it runs (see lua/warmup.lua).
//
// Restocks meet the warm-up through one record beside each stock key
// (lua/restock.lua): a key written from MySQL's figure records, in the
// same script, the last restock that figure includes (upto), so the Redis
// step of those restocks adds nothing to it, whenever it runs; a restock
// whose step finds no stock key adds nothing and sets no marker, so a
// figure read before it committed leaves it to its own step. A figure
// older than the key it would lower (the key holds a later restock) is
// read again. The restocks the loaded stock carries are then recorded as
// applied in MySQL.
func (s *Stock) WarmupFrom(ctx context.Context, item reservation.Item, buckets int, ttl time.Duration, db reservation.StockReader) (int64, error) {
	n, covered, err := s.warmupFigure(ctx, item, buckets, ttl, func(ctx context.Context, pending []string) (figure, error) {
		stock, last, committed, err := db.WarmupStock(ctx, item.ID, pending)
		return figure{stock: stock, lastRestock: last, known: true, restocks: db, pending: pending, committed: committed}, err
	})
	if err != nil {
		return 0, err
	}
	if covered > 0 {
		if err := db.MarkRestocksWarmed(ctx, item.ID, covered); err != nil {
			return 0, fmt.Errorf("warmup: stock loaded; record its restocks as applied: %w", err)
		}
	}
	return n, nil
}

// Warmup is WarmupFrom for an item with one stock key and a figure that
// includes no restock (dbStock: tests and tools that never restock). A
// program warms up with WarmupFrom.
func (s *Stock) Warmup(ctx context.Context, item reservation.Item, ttl time.Duration, dbStock func(context.Context) (int64, error)) (int64, error) {
	return s.WarmupBuckets(ctx, item, 1, ttl, dbStock)
}

// WarmupBuckets is Warmup for an item whose stock is split over buckets
// (1 is Warmup): the sellable stock is split evenly over missing bucket
// keys; existing ones are only ever lowered, largest first, so their sum
// is at most the sellable stock. It returns the sum of the buckets. Like
// Warmup, it knows no restocks: a program warms up with WarmupFrom.
func (s *Stock) WarmupBuckets(ctx context.Context, item reservation.Item, buckets int, ttl time.Duration, dbStock func(context.Context) (int64, error)) (int64, error) {
	n, _, err := s.warmupFigure(ctx, item, buckets, ttl, func(ctx context.Context, pending []string) (figure, error) {
		stock, err := dbStock(ctx)
		return figure{stock: stock, pending: pending}, err
	})
	return n, err
}

// figure is MySQL's stock as a warm-up read it: with the last restock it
// includes when known, and the item's pending reservations read before it
// with those of them MySQL had committed (nil when not known).
type figure struct {
	stock, lastRestock int64
	known              bool
	restocks           reservation.StockReader // lists restocks (known figures only)
	pending, committed []string
}

// reservations are the keys and the count the warm-up scripts take to
// correct the in-flight counter: the hashes of the committed orders first,
// then of the other pending ones (see lua/warmup.lua).
func (f figure) reservations(k Keys) (keys []string, committed int) {
	done := make(map[string]bool, len(f.committed))
	for _, no := range f.committed {
		done[no] = true
	}
	keys = make([]string, 0, len(f.pending))
	for _, no := range f.pending {
		if done[no] {
			keys = append(keys, k.Reservation(no))
		}
	}
	committed = len(keys)
	for _, no := range f.pending {
		if !done[no] {
			keys = append(keys, k.Reservation(no))
		}
	}
	return keys, committed
}

// upto is the figure's restock watermark as the scripts take it (empty
// when not known: no record is written).
func (f figure) upto() string {
	if !f.known {
		return ""
	}
	return strconv.FormatInt(f.lastRestock, 10)
}

// errStaleFigure: the Redis stock holds a restock that the warm-up's MySQL
// figure does not (it committed after the read): read MySQL again.
var errStaleFigure = errors.New("warmup: the stock holds a restock the figure does not")

// errBucketsRaced: another warm-up created some of the missing buckets,
// perhaps from another figure: warm up again, recording this one's figure
// on every bucket.
var errBucketsRaced = errors.New("warmup: another warm-up created buckets meanwhile")

// staleReads bounds the MySQL reads of one warm-up while restocks keep
// landing between its read and its write.
const staleReads = 5

// warmupFigure runs the warm-up, reading MySQL again while its figure is
// older than the Redis stock. covered is the last restock id up to which
// both the figure and the Redis stock hold every restock (0: none, or the
// figure's restocks are not known).
func (s *Stock) warmupFigure(ctx context.Context, item reservation.Item, buckets int, ttl time.Duration, read func(ctx context.Context, pending []string) (figure, error)) (n, covered int64, err error) {
	if err := s.checkWarmupLayout(ctx, item, buckets); err != nil {
		return 0, 0, err
	}
	force := false
	for attempt := 1; ; attempt++ {
		fig, err := s.pendingThenDB(ctx, item, read)
		if err != nil {
			return 0, 0, err
		}
		var upto int64
		if buckets > 1 {
			n, upto, err = s.warmupBucketed(ctx, item, buckets, ttl, fig, force)
		} else {
			n, upto, err = s.warmupOne(ctx, item, ttl, fig)
		}
		if errors.Is(err, errBucketsRaced) {
			force = true
		}
		if errors.Is(err, errStaleFigure) || errors.Is(err, errBucketsRaced) {
			if attempt < staleReads {
				continue
			}
			// Restocks keep landing between the reads: the warm-up wrote
			// nothing that contradicts them; running it again finishes.
			return 0, 0, fmt.Errorf("warmup of item %d: %w: %w", item.ID, order.ErrUnavailable, err)
		}
		if err != nil {
			return 0, 0, err
		}
		if err := s.rdb.SAdd(ctx, s.itemsKey(), member(item)).Err(); err != nil {
			return 0, 0, unavailable("record warmed item", err)
		}
		if fig.known {
			covered = min(upto, fig.lastRestock)
		}
		return n, covered, nil
	}
}

// warmupOne is the warm-up of an item with one stock key. It returns the
// stock and the last restock id the key is recorded to hold.
func (s *Stock) warmupOne(ctx context.Context, item reservation.Item, ttl time.Duration, fig figure) (int64, int64, error) {
	k := s.keys(item)
	res, committed := fig.reservations(k)
	r, err := s.warmup.Run(ctx, s.rdb, append([]string{k.Stock(), k.Inflight(), k.restockRecord()}, res...),
		fig.stock, ttl.Milliseconds(), fig.upto(), committed).Int64Slice()
	if err != nil {
		return 0, 0, unavailable("warmup", err)
	}
	if len(r) != 2 {
		return 0, 0, fmt.Errorf("warmup: unexpected reply %v", r)
	}
	if r[0] < 0 {
		return 0, 0, errStaleFigure
	}
	return r[0], r[1], nil
}

// pendingThenDB reads the item's pending reservations (RESERVED or
// CLAIMED: what the in-flight counter sums) and then, in that order,
// MySQL's figure with which of them MySQL has committed. Every order that
// is in flight when the figure is read is among them, but for one reserved
// in between; the warm-up script then sorts each of them by its state when
// it runs: an order that commits (or is confirmed) in between is never
// counted as sellable twice, nor a committed one taken off twice.
func (s *Stock) pendingThenDB(ctx context.Context, item reservation.Item, read func(ctx context.Context, pending []string) (figure, error)) (figure, error) {
	pending, err := s.rdb.ZRange(ctx, s.keys(item).Pending(), 0, -1).Result()
	if err != nil {
		return figure{}, unavailable("read pending reservations", err)
	}
	return read(ctx, pending)
}

// checkWarmupLayout refuses (activity.ErrSettingLocked) a warm-up that would
// lay item's stock out in buckets keys while its live keys have another
// layout: the item would then hold two, and a restock or the reconciler
// would follow the marker to keys nobody sells from. The API refuses the
// changes of a sale that lead there (orderdb.CreateSale, PatchActivity);
// this catches a warm-up from a copy of the sale older than such a change.
// It is a read before the writes, not one script with them: two warm-ups
// of different layouts started together can still both pass.
func (s *Stock) checkWarmupLayout(ctx context.Context, item reservation.Item, buckets int) error {
	live, err := s.Layout(ctx, item)
	if err != nil {
		return err
	}
	if want := activity.Layout(max(buckets, 1)); live != 0 && live != want {
		return order.Errorf(activity.ErrSettingLocked, "the item's stock lives in Redis in %s: a warm-up cannot lay it out in %s",
			live, want)
	}
	return nil
}
