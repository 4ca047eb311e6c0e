package stockredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Fence holds the last fencing token the reconciler used on the item; its
// repairs refuse a smaller one (a reconciler that was paused while its lock
// expired cannot undo a later one's work).
func (k Keys) Fence() string { return k.base() + "fence" }

// Reconciler is the reconciler's access to the stock keys: atomic reads
// for its checks, and its repairs, each a compare-and-set script guarded
// by the fencing token of the reconciler's lock.
type Reconciler struct {
	*core
	buckets *buckets
	stock   *Stock

	read, readBucket, setStock, restoreQuota, removeQuota, fenceBuckets *redis.Script

	restoreReservation, unrestoreReservation *redis.Script
}

func newReconciler(c *core, b *buckets, stock *Stock) *Reconciler {
	return &Reconciler{
		core:         c,
		buckets:      b,
		stock:        stock,
		read:         redis.NewScript(lua.Source("reconcile_read")),
		readBucket:   redis.NewScript(lua.Source("reconcile_read_bucket")),
		setStock:     redis.NewScript(lua.Source("reconcile_set_stock")),
		restoreQuota: redis.NewScript(lua.Source("reconcile_restore_quota")),
		removeQuota:  redis.NewScript(lua.Source("reconcile_remove_quota")),
		fenceBuckets: redis.NewScript(lua.Source("reconcile_fence_buckets")),

		restoreReservation:   redis.NewScript(lua.Source("reconcile_restore_reservation")),
		unrestoreReservation: redis.NewScript(lua.Source("reconcile_unrestore_reservation")),
	}
}

// MaxPending is the most pending (RESERVED or CLAIMED) orders View reads
// at once.
const MaxPending = 100_000

// View reads the item's stock, in-flight counter and pending orders, the
// reservation states of orderNos, and which of restocks are in the stock
// already, in one script call, so the values are from one instant. A
// bucketed item's buckets live in other slots and are read right after,
// each with the orders whose units are between it and the in-flight
// counter then (readMoving): a reservation or release between its two
// steps counts in Moving, not as units missing from Redis that a repair
// would add a second time.
func (r *Reconciler) View(ctx context.Context, item reservation.Item, orderNos []string, restocks ...drift.PendingRestock) (drift.StockView, error) {
	k := r.keys(item)
	// The pending set is what is in flight, not history; past MaxPending
	// the read waits for the pipeline to drain rather than take it all in.
	if n, err := r.rdb.ZCard(ctx, k.Pending()).Result(); err != nil {
		return drift.StockView{}, unavailable("count pending orders", err)
	} else if n > MaxPending {
		return drift.StockView{}, fmt.Errorf("item %d has %d orders in flight, more than the %d a check reads: %w", item.ID, n, MaxPending, order.ErrTooBusy)
	}
	keys := make([]string, 0, 6+len(orderNos)+len(restocks))
	keys = append(keys, k.Stock(), k.Inflight(), k.Pending(), k.BucketMarker(), k.restockRecord(), k.Gives())
	for _, no := range orderNos {
		keys = append(keys, k.Reservation(no))
	}
	args := make([]any, 0, 2+len(restocks))
	args = append(args, len(orderNos), MovingRetention.Milliseconds())
	for _, rs := range restocks {
		keys = append(keys, k.restockMarker(rs.ID))
		args = append(args, rs.ID)
	}
	res, err := r.read.Run(ctx, r.rdb, keys, args...).Slice()
	if err != nil {
		return drift.StockView{}, unavailable("reconcile read", err)
	}
	if len(res) != 8 {
		return drift.StockView{}, fmt.Errorf("reconcile read: unexpected reply %v", res)
	}
	v := drift.StockView{States: make(map[string]reservation.State, len(orderNos))}
	warmed, _ := res[0].(int64)
	v.Warmed = warmed == 1
	v.Stock, _ = res[1].(int64)
	v.Inflight, _ = res[2].(int64)
	pending, _ := res[3].([]any)
	v.Pending = make([]string, 0, len(pending))
	for _, p := range pending {
		if s, ok := p.(string); ok {
			v.Pending = append(v.Pending, s)
		}
	}
	states, _ := res[4].([]any)
	for i, no := range orderNos {
		if i < len(states) {
			st, _ := states[i].(string)
			v.States[no] = reservation.State(st)
		}
	}
	if n, _ := res[5].(int64); n > 1 {
		// The markers first: a restock landing between the two reads then
		// shows as units too many for a moment, never as units missing
		// that a repair would add a second time.
		if v.Restocking, err = r.bucketRestocking(ctx, item, int(n), restocks); err != nil {
			return drift.StockView{}, err
		}
		gives, _ := res[7].([]any)
		b, moving, err := r.readMoving(ctx, item, int(n), v.Pending, v.States, gives)
		if err != nil {
			return drift.StockView{}, err
		}
		v.Buckets, v.Moving = b, moving
		if v.Warmed {
			v.BothLayouts, v.SingleStock = true, v.Stock
		}
		v.Warmed, v.Stock = b.warmed(), b.sum()
		return v, nil
	}
	done, _ := res[6].([]any)
	for i, rs := range restocks {
		if i < len(done) && done[i] == int64(0) {
			v.Restocking += rs.Quantity
		}
	}
	return v, nil
}

// bucketRestocking sums the shares of restocks that their buckets do not
// hold: the bucket's marker is missing and the bucket's record does not
// include the restock (one pipeline; on a cluster each command goes to its
// bucket's node, and a bucket's record is read with its markers).
func (r *Reconciler) bucketRestocking(ctx context.Context, item reservation.Item, n int, restocks []drift.PendingRestock) (int64, error) {
	if len(restocks) == 0 {
		return 0, nil
	}
	k := r.keys(item)
	type share struct {
		cmd *redis.IntCmd
		b   int
		id  int64
		qty int64
	}
	var shares []share
	uptos := make([]*redis.StringCmd, n)
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range n {
			uptos[b] = p.HGet(ctx, k.bucketRestockRecord(b), "upto")
		}
		for _, rs := range restocks {
			for b, q := range restockShares(rs.Quantity, n) {
				if q > 0 {
					shares = append(shares, share{p.Exists(ctx, k.bucketRestockMarker(b, rs.ID)), b, rs.ID, q})
				}
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, unavailable("read restock markers", err)
	}
	upto := make([]int64, n)
	for b, c := range uptos {
		v, err := c.Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, unavailable("read restock record", err)
		}
		upto[b] = v
	}
	var sum int64
	for _, s := range shares {
		if s.cmd.Val() == 0 && s.id > upto[s.b] {
			sum += s.qty
		}
	}
	return sum, nil
}

// Restock is Store.Restock: the reconciler finishes restocks whose Redis
// step was left undone (safe beside the API doing the same: once per id).
func (r *Reconciler) Restock(ctx context.Context, item reservation.Item, id, qty int64) (reservation.Restocked, error) {
	return r.stock.Restock(ctx, item, id, qty)
}

// SetStock sets the item's stock to want, only if stock and inflight still
// hold the values in seen (a missing stock key when !seen.Warmed; it is then
// created with ttl) and no later fence wrote here. Reads nothing but the
// Warmed, Stock and Inflight fields of seen.
func (r *Reconciler) SetStock(ctx context.Context, item reservation.Item, seen drift.StockView, want int64, ttl time.Duration, g drift.Guard) (drift.CAS, error) {
	if want < 0 {
		return 0, fmt.Errorf("set stock of item %d: negative stock %d", item.ID, want)
	}
	if seen.Buckets != nil {
		return r.setBuckets(ctx, item, seen, want, ttl, g)
	}
	k := r.keys(item)
	was := ""
	if seen.Warmed {
		was = strconv.FormatInt(seen.Stock, 10)
	}
	res, err := r.setStock.Run(ctx, r.rdb, []string{k.Stock(), k.Inflight(), k.Fence()},
		g.Fence, was, seen.Inflight, want, max(ttl.Milliseconds(), 1), g.ExpireAt.UnixMilli()).Slice()
	if err != nil {
		return 0, unavailable("reconcile set stock", err)
	}
	return casResult("reconcile set stock", res)
}

// setBuckets is SetStock for a bucketed item: the fence and in-flight
// check on the item's own tag, then a compare-and-set of each bucket to
// an even split of want, the lowered buckets first and the raised ones
// after, so Redis never offers more than the larger of before and want.
// A bucket that changed since it was read stops it (Changed); what was
// written stays (each write moves toward want) and the next run finishes.
func (r *Reconciler) setBuckets(ctx context.Context, item reservation.Item, seen drift.StockView, want int64, ttl time.Duration, g drift.Guard) (drift.CAS, error) {
	k := r.keys(item)
	res, err := r.fenceBuckets.Run(ctx, r.rdb, []string{k.Inflight(), k.Fence(), k.BucketMarker()},
		g.Fence, seen.Inflight, g.ExpireAt.UnixMilli()).Slice()
	if err != nil {
		return 0, unavailable("reconcile fence buckets", err)
	}
	if c, err := casResult("reconcile fence buckets", res); err != nil || c != drift.Written {
		return c, err
	}
	target := split(want, len(seen.Buckets))
	for _, lower := range []bool{true, false} {
		for i, was := range seen.Buckets {
			if target[i] == was || (lower != (was >= 0 && target[i] < was)) {
				continue
			}
			ok, err := r.buckets.setBucket(ctx, item, i, was, target[i], ttl)
			if err != nil {
				return 0, err
			}
			if !ok {
				return drift.Changed, nil
			}
		}
	}
	return drift.Written, nil
}

// Layout is Store.Layout: how the item's stock lives in Redis.
func (r *Reconciler) Layout(ctx context.Context, item reservation.Item) (activity.Layout, error) {
	return r.stock.Layout(ctx, item)
}

// MarkWarmed records item among the warmed items (as Warmup does), so the
// sweep visits it.
func (r *Reconciler) MarkWarmed(ctx context.Context, item reservation.Item) error {
	if err := r.rdb.SAdd(ctx, r.itemsKey(), member(item)).Err(); err != nil {
		return unavailable("record warmed item", err)
	}
	return nil
}

func casResult(op string, res []any) (drift.CAS, error) {
	if len(res) > 0 {
		switch code, _ := res[0].(int64); code {
		case 1:
			return drift.Written, nil
		case 0:
			return drift.Changed, nil
		case -1:
			return drift.StaleFence, nil
		}
	}
	return 0, fmt.Errorf("%s: unexpected reply %v", op, res)
}
