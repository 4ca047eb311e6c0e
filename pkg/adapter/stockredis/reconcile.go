package stockredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Fence holds the last fencing token the reconciler used on the item; its
// repairs refuse a smaller one (a reconciler that was paused while its lock
// expired cannot undo a later one's work).
func (k Keys) Fence() string { return k.base() + "fence" }

// quotaPrefix is what every quota key of the activity starts with.
func (k Keys) quotaPrefix(activityID int64) string {
	return fmt.Sprintf("%sq:%d:", k.group(), activityID)
}

// Reconciler is the reconciler's access to the stock keys: atomic reads
// for its checks, and its repairs, each a compare-and-set script guarded
// by the fencing token of the reconciler's lock.
type Reconciler struct {
	s *Store

	read, setStock, restoreQuota, removeQuota, fenceBuckets *redis.Script

	restoreReservation, unrestoreReservation *redis.Script
}

// Reconciler returns the reconciler's view of the store.
func (s *Store) Reconciler() *Reconciler {
	return &Reconciler{
		s:            s,
		read:         redis.NewScript(lua.Source("reconcile_read")),
		setStock:     redis.NewScript(lua.Source("reconcile_set_stock")),
		restoreQuota: redis.NewScript(lua.Source("reconcile_restore_quota")),
		removeQuota:  redis.NewScript(lua.Source("reconcile_remove_quota")),
		fenceBuckets: redis.NewScript(lua.Source("reconcile_fence_buckets")),

		restoreReservation:   redis.NewScript(lua.Source("reconcile_restore_reservation")),
		unrestoreReservation: redis.NewScript(lua.Source("reconcile_unrestore_reservation")),
	}
}

// StockView is an item's stock as Redis saw it at one instant.
type StockView struct {
	// Warmed is false when the stock key is missing (Stock is then 0).
	Warmed   bool
	Stock    int64
	Inflight int64
	// Pending lists the RESERVED and CLAIMED order numbers, oldest first.
	Pending []string
	// States gives the reservation state of each order asked about
	// (StateMissing when there is no reservation).
	States map[string]State
	// Buckets holds, for a bucketed item, the value of each bucket key
	// (-1 for a missing one), read right after the item's own keys; Stock
	// is then their sum and Warmed says none is missing. Nil for an item
	// with one stock key.
	Buckets []int64
	// BothLayouts is true when the item's one stock key exists beside its
	// bucket marker (the layout changed while the old keys lived): Stock
	// is then the buckets' sum, as the marker says, and SingleStock the
	// one key's value. The reconciler reports it and repairs neither.
	BothLayouts bool
	SingleStock int64
	// Restocking is the units of the restocks asked about that Redis stock
	// does not hold yet (their markers are missing and no warm-up's figure
	// included them): MySQL has them, and the restock's Redis step will
	// add them.
	Restocking int64
}

// MaxPending is the most pending (RESERVED or CLAIMED) orders View reads
// at once.
const MaxPending = 100_000

// PendingRestock is a restock MySQL has not recorded as applied in Redis.
type PendingRestock struct {
	ID, Quantity int64
}

// View reads the item's stock, in-flight counter and pending orders, the
// reservation states of orderNos, and which of restocks are in the stock
// already, in one script call, so the values are from one instant. A bucketed item's buckets live in other slots and
// are read right after; a reservation or release in progress between its
// two steps then shows as a unit missing from Redis for a moment.
func (r *Reconciler) View(ctx context.Context, item Item, orderNos []string, restocks ...PendingRestock) (StockView, error) {
	k := r.s.Keys(item)
	// The pending set is what is in flight, not history; past MaxPending
	// the read waits for the pipeline to drain rather than take it all in.
	if n, err := r.s.rdb.ZCard(ctx, k.Pending()).Result(); err != nil {
		return StockView{}, unavailable("count pending orders", err)
	} else if n > MaxPending {
		return StockView{}, fmt.Errorf("item %d has %d orders in flight, more than the %d a check reads: %w", item.ID, n, MaxPending, order.ErrTooBusy)
	}
	keys := make([]string, 0, 5+len(orderNos)+len(restocks))
	keys = append(keys, k.Stock(), k.Inflight(), k.Pending(), k.BucketMarker(), k.restockRecord())
	for _, no := range orderNos {
		keys = append(keys, k.Reservation(no))
	}
	args := make([]any, 0, 1+len(restocks))
	args = append(args, len(orderNos))
	for _, rs := range restocks {
		keys = append(keys, k.restockMarker(rs.ID))
		args = append(args, rs.ID)
	}
	res, err := r.read.Run(ctx, r.s.rdb, keys, args...).Slice()
	if err != nil {
		return StockView{}, unavailable("reconcile read", err)
	}
	if len(res) != 7 {
		return StockView{}, fmt.Errorf("reconcile read: unexpected reply %v", res)
	}
	v := StockView{States: make(map[string]State, len(orderNos))}
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
			v.States[no] = State(st)
		}
	}
	if n, _ := res[5].(int64); n > 1 {
		// The markers first: a restock landing between the two reads then
		// shows as units too many for a moment, never as units missing
		// that a repair would add a second time.
		if v.Restocking, err = r.bucketRestocking(ctx, item, int(n), restocks); err != nil {
			return StockView{}, err
		}
		b, err := r.s.readBuckets(ctx, item, int(n))
		if err != nil {
			return StockView{}, err
		}
		v.Buckets = b
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
func (r *Reconciler) bucketRestocking(ctx context.Context, item Item, n int, restocks []PendingRestock) (int64, error) {
	if len(restocks) == 0 {
		return 0, nil
	}
	k := r.s.Keys(item)
	type share struct {
		cmd *redis.IntCmd
		b   int
		id  int64
		qty int64
	}
	var shares []share
	uptos := make([]*redis.StringCmd, n)
	_, err := r.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
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
func (r *Reconciler) Restock(ctx context.Context, item Item, id, qty int64) (RestockResult, error) {
	return r.s.Restock(ctx, item, id, qty)
}

// CAS is the outcome of one of the reconciler's compare-and-set repairs.
type CAS int

const (
	// Written: the repair was applied.
	Written CAS = iota
	// Changed: the keys changed since they were read; nothing was written.
	Changed
	// StaleFence: a reconciler with a larger fencing token already wrote
	// to this item; nothing was written.
	StaleFence
)

func (c CAS) String() string {
	switch c {
	case Written:
		return "written"
	case Changed:
		return "changed concurrently"
	case StaleFence:
		return "stale fencing token"
	}
	return "CAS(" + strconv.Itoa(int(c)) + ")"
}

// Guard is the fencing token a repair carries and when the item's fence
// key expires (keep it past the item's keys).
type Guard struct {
	Fence    int64
	ExpireAt time.Time
}

// SetStock sets the item's stock to want, only if stock and inflight still
// hold the values in seen (a missing stock key when !seen.Warmed; it is then
// created with ttl) and no later fence wrote here. Reads nothing but the
// Warmed, Stock and Inflight fields of seen.
func (r *Reconciler) SetStock(ctx context.Context, item Item, seen StockView, want int64, ttl time.Duration, g Guard) (CAS, error) {
	if want < 0 {
		return 0, fmt.Errorf("set stock of item %d: negative stock %d", item.ID, want)
	}
	if seen.Buckets != nil {
		return r.setBuckets(ctx, item, seen, want, ttl, g)
	}
	k := r.s.Keys(item)
	was := ""
	if seen.Warmed {
		was = strconv.FormatInt(seen.Stock, 10)
	}
	res, err := r.setStock.Run(ctx, r.s.rdb, []string{k.Stock(), k.Inflight(), k.Fence()},
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
func (r *Reconciler) setBuckets(ctx context.Context, item Item, seen StockView, want int64, ttl time.Duration, g Guard) (CAS, error) {
	k := r.s.Keys(item)
	res, err := r.fenceBuckets.Run(ctx, r.s.rdb, []string{k.Inflight(), k.Fence(), k.BucketMarker()},
		g.Fence, seen.Inflight, g.ExpireAt.UnixMilli()).Slice()
	if err != nil {
		return 0, unavailable("reconcile fence buckets", err)
	}
	if c, err := casResult("reconcile fence buckets", res); err != nil || c != Written {
		return c, err
	}
	target := split(want, len(seen.Buckets))
	for _, lower := range []bool{true, false} {
		for i, was := range seen.Buckets {
			if target[i] == was || (lower != (was >= 0 && target[i] < was)) {
				continue
			}
			ok, err := r.s.setBucket(ctx, item, i, was, target[i], ttl)
			if err != nil {
				return 0, err
			}
			if !ok {
				return Changed, nil
			}
		}
	}
	return Written, nil
}

// Layout is Store.Layout: how the item's stock lives in Redis.
func (r *Reconciler) Layout(ctx context.Context, item Item) (order.Layout, error) {
	return r.s.Layout(ctx, item)
}

// MarkWarmed records item among the warmed items (as Warmup does), so the
// sweep visits it.
func (r *Reconciler) MarkWarmed(ctx context.Context, item Item) error {
	if err := r.s.rdb.SAdd(ctx, r.s.itemsKey(), item.member()).Err(); err != nil {
		return unavailable("record warmed item", err)
	}
	return nil
}

// QuotaBatch bounds the keys one MGET asks for and the records one quota
// repair's script call writes (a script blocks Redis while it runs).
const QuotaBatch = 1000

// ScanCount is the COUNT of each SCAN step of ScanQuota: about how many
// keys of the node one step visits (the matching ones are a part of them).
const ScanCount = 5000

// ScanQuota calls fn with the quota keys of the activity on item, a SCAN
// step at a time: user -> the order number the key holds, at most
// ScanCount users per call (SCAN's COUNT is a hint, but a step returns at
// most about the keys it visited). It SCANs for the item's quota pattern;
// on a cluster it scans the one node that owns the item's hash tag, where
// all of the item's keys live. SCAN may return a key twice (fn then sees
// it twice) and misses no key that lived throughout the scan. An error
// from fn ends the scan.
func (r *Reconciler) ScanQuota(ctx context.Context, item Item, activity int64, fn func(map[string]string) error) error {
	k := r.s.Keys(item)
	node, err := r.nodeFor(ctx, k.Stock())
	if err != nil {
		return err
	}
	prefix, pattern := k.quotaPrefix(activity), k.quotaPattern(activity)
	for cursor := uint64(0); ; {
		keys, next, err := node.Scan(ctx, cursor, pattern, ScanCount).Result()
		if err != nil {
			return unavailable("scan quota keys", err)
		}
		page := make(map[string]string, len(keys))
		for chunk := range slices.Chunk(keys, QuotaBatch) {
			vals, err := r.s.rdb.MGet(ctx, chunk...).Result()
			if err != nil {
				return unavailable("read quota keys", err)
			}
			for i, key := range chunk {
				user, ok := ParseUserSegment(strings.TrimPrefix(key, prefix))
				if !ok {
					continue // not a quota key of this activity
				}
				if v, ok := vals[i].(string); ok {
					page[user] = v
				}
			}
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// QuotaHoldersOf reads the quota keys of users in the activity on item:
// user -> the order number the key holds, for the users who have one
// (MGET of QuotaBatch keys at a time).
func (r *Reconciler) QuotaHoldersOf(ctx context.Context, item Item, activity int64, users []string) (map[string]string, error) {
	k := r.s.Keys(item)
	out := make(map[string]string, len(users))
	for chunk := range slices.Chunk(users, QuotaBatch) {
		keys := make([]string, len(chunk))
		for i, u := range chunk {
			keys[i] = k.Quota(activity, u)
		}
		vals, err := r.s.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, unavailable("read quota keys", err)
		}
		for i, u := range chunk {
			if v, ok := vals[i].(string); ok {
				out[u] = v
			}
		}
	}
	return out, nil
}

// QuotaRecord is a quota key the reconciler gives back: the user's live
// order, and how long the key lives.
type QuotaRecord struct {
	UserID  string
	OrderNo string
	TTL     time.Duration
}

// RestoreQuotas writes the quota key of each record whose key is missing
// (a key that exists is left alone, whatever order it names), QuotaBatch
// records per script call, each guarded by g. It returns the users whose
// key it wrote; on StaleFence it stops, and the list is what earlier calls
// wrote.
func (r *Reconciler) RestoreQuotas(ctx context.Context, item Item, activity int64, recs []QuotaRecord, g Guard) ([]string, CAS, error) {
	k := r.s.Keys(item)
	var written []string
	for chunk := range slices.Chunk(recs, QuotaBatch) {
		keys := make([]string, len(chunk))
		vals := make([]missingValue, len(chunk))
		for i, rec := range chunk {
			keys[i] = k.Quota(activity, rec.UserID)
			vals[i] = missingValue{rec.OrderNo, rec.TTL}
		}
		set, c, err := r.restoreMissing(ctx, "reconcile restore quota keys", k.Fence(), keys, vals, g)
		for _, i := range set {
			written = append(written, chunk[i].UserID)
		}
		if err != nil || c != Written {
			return written, c, err
		}
	}
	return written, Written, nil
}

// nodeFor returns the client that serves key: the client itself on a single
// node, the master owning key's slot on a cluster.
func (r *Reconciler) nodeFor(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := r.s.rdb.(*redis.ClusterClient); ok {
		c, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, unavailable("find cluster node", err)
		}
		return c, nil
	}
	return r.s.rdb, nil
}

// QuotaState is a quota key and the state of the reservation it names,
// read together.
type QuotaState struct {
	// Holder is the order number the key holds now ("" when missing).
	Holder string
	// State is the state of Holder's reservation (StateMissing for none).
	State State
}

// QuotaStates reads, for each user -> order number in holders, the user's
// quota key and the state of the reservation of the order it holds, each
// pair atomically (MULTI; the keys share the item's slot). A key that no
// longer holds the order number given is reported with its new holder and
// that holder's state is not read (StateMissing).
func (r *Reconciler) QuotaStates(ctx context.Context, item Item, activity int64, holders map[string]string) (map[string]QuotaState, error) {
	k := r.s.Keys(item)
	type pair struct {
		get   *redis.StringCmd
		state *redis.StringCmd
	}
	out := make(map[string]QuotaState, len(holders))
	users := make([]string, 0, len(holders))
	for u := range holders {
		users = append(users, u)
	}
	for len(users) > 0 {
		n := min(len(users), 200)
		cmds := make(map[string]pair, n)
		_, err := r.s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, u := range users[:n] {
				cmds[u] = pair{
					get:   p.Get(ctx, k.Quota(activity, u)),
					state: p.HGet(ctx, k.Reservation(holders[u]), "state"),
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, unavailable("read quota states", err)
		}
		for u, c := range cmds {
			holder, err := c.get.Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, unavailable("read quota key", err)
			}
			state, err := c.state.Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, unavailable("read reservation state", err)
			}
			if err != nil || holder != holders[u] {
				state = string(StateMissing)
			}
			out[u] = QuotaState{Holder: holder, State: State(state)}
		}
		users = users[n:]
	}
	return out, nil
}

// RestoreQuota sets the user's quota key to orderNo (the user's live order)
// with ttl, only if it still holds was ("" for a missing key) and no later
// fence wrote here.
func (r *Reconciler) RestoreQuota(ctx context.Context, item Item, activity int64, user, orderNo, was string, ttl time.Duration, g Guard) (CAS, error) {
	k := r.s.Keys(item)
	res, err := r.restoreQuota.Run(ctx, r.s.rdb, []string{k.Fence(), k.Quota(activity, user)},
		g.Fence, orderNo, was, max(ttl.Milliseconds(), 1), g.ExpireAt.UnixMilli()).Slice()
	if err != nil {
		return 0, unavailable("reconcile restore quota", err)
	}
	return casResult("reconcile restore quota", res)
}

// RemoveQuota deletes the user's quota key only if it still holds the stale
// order number and no later fence wrote here.
func (r *Reconciler) RemoveQuota(ctx context.Context, item Item, activity int64, user, stale string, g Guard) (CAS, error) {
	k := r.s.Keys(item)
	res, err := r.removeQuota.Run(ctx, r.s.rdb, []string{k.Fence(), k.Quota(activity, user)},
		g.Fence, stale, g.ExpireAt.UnixMilli()).Slice()
	if err != nil {
		return 0, unavailable("reconcile remove quota", err)
	}
	return casResult("reconcile remove quota", res)
}

func casResult(op string, res []any) (CAS, error) {
	if len(res) > 0 {
		switch code, _ := res[0].(int64); code {
		case 1:
			return Written, nil
		case 0:
			return Changed, nil
		case -1:
			return StaleFence, nil
		}
	}
	return 0, fmt.Errorf("%s: unexpected reply %v", op, res)
}

// LostReservation is a CREATED order of the item whose reservation hash the
// reconciler gives back (CONFIRMED), so a later close's release credits its
// units to Redis.
type LostReservation struct {
	OrderNo        string
	UserID         string
	ActivityID     int64
	Quantity       int
	IdempotencyKey string
	ReservedAt     time.Time
	// TTL is the reservation's lifetime: past the sale's end and payment
	// window, as the API gives it.
	TTL time.Duration
}

// reservationBatch bounds the hashes one script call writes or reads (the
// script blocks Redis while it runs).
const reservationBatch = 500

// RestoreReservations writes, CONFIRMED, the reservation hash of each of
// recs that is missing (a hash that exists, in any state, is left alone),
// in script calls of up to 500 hashes, each guarded by g. For a bucketed
// item (buckets > 1) each hash names the order's home bucket, and that
// bucket gets the order's take marker back after the hash is written (the
// release gives a bucketed order's units back by its marker); a marker
// that exists is kept. It returns the order numbers whose hash it wrote;
// on StaleFence it stops, and the list is what earlier calls wrote.
func (r *Reconciler) RestoreReservations(ctx context.Context, item Item, buckets int, recs []LostReservation, g Guard) ([]string, CAS, error) {
	k := r.s.Keys(item)
	var written []string
	for len(recs) > 0 {
		n := min(len(recs), reservationBatch)
		keys := make([]string, 0, n+1)
		args := make([]any, 0, 7*n+3)
		keys = append(keys, k.Fence())
		args = append(args, g.Fence, g.ExpireAt.UnixMilli(), item.ID)
		for _, rec := range recs[:n] {
			bucket := ""
			if buckets > 1 {
				bucket = strconv.Itoa(homeBucket(rec.UserID, buckets))
			}
			keys = append(keys, k.Reservation(rec.OrderNo))
			args = append(args, rec.UserID, rec.ActivityID, rec.Quantity, rec.ReservedAt.UnixMilli(), rec.IdempotencyKey,
				bucket, max(rec.TTL.Milliseconds(), 1))
		}
		res, err := r.restoreReservation.Run(ctx, r.s.rdb, keys, args...).Slice()
		if err != nil {
			return written, 0, unavailable("reconcile restore reservations", err)
		}
		c, err := casResult("reconcile restore reservations", res)
		if err != nil || c != Written {
			return written, c, err
		}
		if len(res) != n+1 {
			return written, 0, fmt.Errorf("reconcile restore reservations: unexpected reply %v", res)
		}
		var now []LostReservation
		for i, rec := range recs[:n] {
			if w, _ := res[i+1].(int64); w == 1 {
				now = append(now, rec)
				written = append(written, rec.OrderNo)
			}
		}
		if buckets > 1 && len(now) > 0 {
			// After the hash: a marker never stands without its hash, so a
			// release that finds no hash never gives back units the
			// reconciler's figure from MySQL already counts.
			_, err := r.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, rec := range now {
					p.SetNX(ctx, k.Taken(homeBucket(rec.UserID, buckets), rec.OrderNo), rec.Quantity, markerTTL(rec.TTL))
				}
				return nil
			})
			if err != nil {
				return written, 0, unavailable("reconcile restore take markers", err)
			}
		}
		recs = recs[n:]
	}
	return written, Written, nil
}

// UnrestoreReservations deletes the reservation hashes among orderNos that
// the reconciler restored and that are still CONFIRMED (orders MySQL has
// closed since), and the take markers of every restored one that is
// deleted or RELEASED, in script calls of up to 500, each guarded by g
// (lua/reconcile_unrestore_reservation.lua says why). It returns how many
// hashes it deleted; on StaleFence it stops.
func (r *Reconciler) UnrestoreReservations(ctx context.Context, item Item, orderNos []string, g Guard) (int, CAS, error) {
	k := r.s.Keys(item)
	deleted := 0
	for len(orderNos) > 0 {
		n := min(len(orderNos), reservationBatch)
		keys := make([]string, 0, n+1)
		keys = append(keys, k.Fence())
		for _, no := range orderNos[:n] {
			keys = append(keys, k.Reservation(no))
		}
		res, err := r.unrestoreReservation.Run(ctx, r.s.rdb, keys, g.Fence, g.ExpireAt.UnixMilli()).Slice()
		if err != nil {
			return deleted, 0, unavailable("reconcile unrestore reservations", err)
		}
		c, err := casResult("reconcile unrestore reservations", res)
		if err != nil || c != Written {
			return deleted, c, err
		}
		if len(res) != n+2 {
			return deleted, 0, fmt.Errorf("reconcile unrestore reservations: unexpected reply %v", res)
		}
		d, _ := res[1].(int64)
		deleted += int(d)
		var markers []string
		for i, no := range orderNos[:n] {
			b, _ := res[i+2].(string)
			if b == "" {
				continue
			}
			bn, err := strconv.Atoi(b)
			if err != nil {
				return deleted, 0, fmt.Errorf("reconcile unrestore reservations: unexpected bucket %q", b)
			}
			markers = append(markers, k.Taken(bn, no))
		}
		if len(markers) > 0 {
			// One DEL per marker: they live in other slots.
			_, err := r.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, m := range markers {
					p.Del(ctx, m)
				}
				return nil
			})
			if err != nil {
				return deleted, 0, unavailable("reconcile unrestore take markers", err)
			}
		}
		orderNos = orderNos[n:]
	}
	return deleted, Written, nil
}
