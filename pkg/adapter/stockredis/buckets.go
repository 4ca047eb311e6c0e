package stockredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// A hot item's stock may be split over K buckets (docs/adr/0002-stock-buckets.md):
// the keys <prefix>:{i<item>b0}:stock ... {i<item>b<K-1>}:stock have hash
// tags of their own, so on Redis Cluster they land on different slots and,
// usually, nodes. The item's main-tag stock key does not exist then; the
// marker <prefix>:{i<item>}:buckets holds K. Everything else (in flight,
// pending, reservations, quota, idempotency) stays under {i<item>}, so the
// state machine and the per-user limit stay atomic and exact.
//
// A reservation takes its units from a bucket first (bucket_take), then the
// reserve script records it on the main tag with the bucket's number; a
// refusal puts the units back (bucket_give). A release's transition runs on
// the main tag and returns the bucket, which then gets the units back. A
// crash between the two steps loses the units from Redis: the item
// undersells until the reconciler's repair puts them back; it never
// oversells.

// Bucket is bucket n of a bucketed item: its own hash tag {i<item>b<n>}.
func (k Keys) Bucket(n int) string { return fmt.Sprintf("%s:{%s}:stock", k.prefix, k.bucketTag(n)) }

// Taken marks the units order took from bucket n (bucket_take), in the
// bucket's hash tag, so a give-back happens once and only for a real take.
func (k Keys) Taken(n int, orderNo string) string {
	return fmt.Sprintf("%s:{%s}:t:%s", k.prefix, k.bucketTag(n), orderNo)
}

// BucketMarker holds the number of buckets of a bucketed item; it is
// missing for an item with one stock key.
func (k Keys) BucketMarker() string { return k.base() + "buckets" }

// bucketValues are the values of an item's bucket keys, -1 for a missing
// key.
type bucketValues []int64

func (b bucketValues) sum() int64 {
	var n int64
	for _, v := range b {
		n += max(v, 0)
	}
	return n
}

func (b bucketValues) warmed() bool {
	for _, v := range b {
		if v < 0 {
			return false
		}
	}
	return len(b) > 0
}

// split divides total over n buckets as evenly as possible, the remainder
// to the first ones.
func split(total int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = total / int64(n)
		if int64(i) < total%int64(n) {
			out[i]++
		}
	}
	return out
}

// readBuckets reads the n bucket keys of item (one pipeline; on a cluster
// go-redis sends each GET to the node owning its slot).
func (s *Store) readBuckets(ctx context.Context, item Item, n int) (bucketValues, error) {
	k := s.Keys(item)
	cmds := make([]*redis.StringCmd, n)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.Get(ctx, k.Bucket(i))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read buckets", err)
	}
	out := make(bucketValues, n)
	for i, c := range cmds {
		v, err := c.Int64()
		switch {
		case errors.Is(err, redis.Nil):
			out[i] = -1
		case err != nil:
			return nil, unavailable("read bucket", err)
		default:
			out[i] = v
		}
	}
	return out, nil
}

// bucketCount reads item's bucket marker: 0 for an item with one stock key.
func (s *Store) bucketCount(ctx context.Context, item Item) (int, error) {
	v, err := s.rdb.Get(ctx, s.Keys(item).BucketMarker()).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable("read bucket marker", err)
	}
	return v, nil
}

// setBucket is bucket_set: bucket n of item from was (-1: missing) to v.
func (s *Store) setBucket(ctx context.Context, item Item, n int, was, v int64, ttl time.Duration) (bool, error) {
	r, err := s.setBucketUpto(ctx, item, n, was, v, ttl, "")
	return r == 1, err
}

// setBucketUpto is setBucket for a warm-up with a MySQL figure that
// includes the item's restocks up to upto (empty: not known): the bucket
// records it (lua/bucket_set.lua). It returns 1 written, 0 changed since
// read, -1 the bucket holds a later restock than upto.
func (s *Store) setBucketUpto(ctx context.Context, item Item, n int, was, v int64, ttl time.Duration, upto string) (int64, error) {
	w := ""
	if was >= 0 {
		w = strconv.FormatInt(was, 10)
	}
	k := s.Keys(item)
	r, err := s.bucketSet.Run(ctx, s.rdb, []string{k.Bucket(n), k.bucketRestockRecord(n)}, w, v, max(ttl.Milliseconds(), 1), upto).Int64()
	if err != nil {
		return 0, unavailable("set bucket", err)
	}
	return r, nil
}

// lowerBuckets lowers existing buckets, largest first (down to a common
// level), until their sum is at most want; cur is updated with what was
// written. It reports false when a bucket changed since it was read (the
// caller reads again).
func (s *Store) lowerBuckets(ctx context.Context, item Item, cur bucketValues, want int64) (bool, error) {
	want = max(want, 0)
	if cur.sum() <= want {
		return true, nil
	}
	level := func(l int64) int64 {
		var n int64
		for _, v := range cur {
			n += min(max(v, 0), l)
		}
		return n
	}
	// The lowest level L whose capped sum still reaches want; the extra
	// units above want come off buckets standing at L.
	lo, hi := int64(0), int64(0)
	for _, v := range cur {
		hi = max(hi, v)
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if level(mid) >= want {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	extra := level(lo) - want
	// From the last bucket, so the first ones keep the remainder (as split).
	for i := len(cur) - 1; i >= 0; i-- {
		v := cur[i]
		if v < 0 {
			continue
		}
		nv := min(v, lo)
		if extra > 0 && v >= lo && lo > 0 {
			nv--
			extra--
		}
		if nv == v {
			continue
		}
		ok, err := s.setBucket(ctx, item, i, v, nv, 0)
		if err != nil || !ok {
			return false, err
		}
		cur[i] = nv
	}
	return true, nil
}

// reserveBucketed takes the quantity from the user's home bucket or, when
// that one is short, from the others in order, then records the
// reservation on the item's main tag.
func (s *Store) reserveBucketed(ctx context.Context, r Reservation) (ReserveResult, error) {
	k := s.Keys(r.item())
	n := r.Buckets
	home := homeBucket(r.UserID, n)
	missing := 0
	for i := range n {
		b := (home + i) % n
		tctx, span := s.span(ctx, "bucket_take", r.item())
		if span.IsRecording() {
			span.SetAttributes(tracing.AttrOrderNo.String(r.OrderNo), attribute.Int("seckill.bucket", b))
		}
		left, err := s.bucketTake.Run(tctx, s.rdb, []string{k.Bucket(b), k.Taken(b, r.OrderNo)},
			r.Quantity, markerTTL(r.ReservationTTL).Milliseconds()).Int64()
		endSpan(span, err)
		if err != nil {
			return ReserveResult{}, unavailable("take from bucket", err)
		}
		switch left {
		case -2:
			missing++
			continue
		case -1:
			continue
		}
		res, err := s.runReserve(ctx, r, k.BucketMarker(), strconv.Itoa(b))
		refused := errors.Is(err, order.ErrNotWarmed) || errors.Is(err, order.ErrAlreadyPurchased)
		if err != nil && !refused {
			if !MayHaveRun(err) {
				// The script never ran (the item's master refused the
				// connection: dead, or failed over and not yet known):
				// no reservation holds the units, give them back now.
				// Best effort, as below.
				_ = s.giveBack(ctx, r.item(), b, r.OrderNo)
				return res, err
			}
			// The script may have run: keep the units out of the bucket
			// (an undersell the reconciler repairs) rather than risk
			// crediting a reservation's units twice.
			return res, err
		}
		if refused || res.Duplicate {
			// Best effort: if this fails the units are lost from Redis
			// until the reconciler puts them back (never an oversell).
			_ = s.giveBack(ctx, r.item(), b, r.OrderNo)
			return res, err
		}
		res.Left = left
		return res, nil
	}
	if missing > 0 {
		return ReserveResult{}, order.ErrNotWarmed
	}
	// Every bucket is short. Keep reserve.lua's precedence: a replayed key
	// gets its order, a user holding the quota hears so.
	vals, err := s.rdb.MGet(ctx, k.Idem(r.UserID, r.IdempotencyKey), k.Quota(r.ActivityID, r.UserID)).Result()
	if err != nil {
		return ReserveResult{}, unavailable("read idempotency record", err)
	}
	if v, ok := vals[0].(string); ok {
		return ReserveResult{OrderNo: v, Duplicate: true}, nil
	}
	if v, ok := vals[1].(string); ok {
		return ReserveResult{OrderNo: v}, order.ErrAlreadyPurchased
	}
	return ReserveResult{}, order.ErrSoldOut
}

// markerTTL keeps a take marker as long as the reservation (a day when the
// caller gave no reservation TTL).
func markerTTL(reservation time.Duration) time.Duration {
	if reservation <= 0 {
		return 24 * time.Hour
	}
	return reservation
}

// giveBack is bucket_give: bucket n gets back what orderNo took from it,
// if it still holds a take marker for it (so it may be repeated).
func (s *Store) giveBack(ctx context.Context, item Item, n int, orderNo string) (err error) {
	ctx, span := s.span(ctx, "bucket_give", item)
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrOrderNo.String(orderNo), attribute.Int("seckill.bucket", n))
	}
	defer func() { endSpan(span, err) }()
	k := s.Keys(item)
	if err := s.bucketGive.Run(ctx, s.rdb, []string{k.Bucket(n), k.Taken(n, orderNo)}).Err(); err != nil {
		return unavailable("give back to bucket", err)
	}
	return nil
}

// giveBackAny gives back whatever orderNo took from any bucket of item: its
// reservation is missing (the reserve script never ran after bucket_take, or
// Redis lost it), so the bucket is not known.
func (s *Store) giveBackAny(ctx context.Context, item Item, orderNo string) error {
	n, err := s.bucketCount(ctx, item)
	if err != nil {
		return err
	}
	for b := range n {
		if err := s.giveBack(ctx, item, b, orderNo); err != nil {
			return err
		}
	}
	return nil
}

// releaseToBucket gives a released bucketed reservation's units back to
// its bucket and, for a capped release (dbStock not ""), lowers the
// buckets to what MySQL can still fulfil.
func (s *Store) releaseToBucket(ctx context.Context, item Item, orderNo string, bucket any, dbStock string) error {
	bs, _ := bucket.(string)
	b, err := strconv.Atoi(bs)
	if err != nil {
		return fmt.Errorf("release: unexpected bucket %v", bucket)
	}
	if err := s.giveBack(ctx, item, b, orderNo); err != nil {
		return err
	}
	if dbStock == "" {
		return nil
	}
	db, err := strconv.ParseInt(dbStock, 10, 64)
	if err != nil {
		return err
	}
	return s.capBuckets(ctx, item, db)
}

// capBuckets lowers item's buckets (never raises them) so that their sum
// is at most MySQL stock minus what is in flight.
func (s *Store) capBuckets(ctx context.Context, item Item, dbStock int64) error {
	n, err := s.bucketCount(ctx, item)
	if err != nil || n < 2 {
		return err
	}
	for range 5 {
		inflight, err := s.rdb.Get(ctx, s.Keys(item).Inflight()).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return unavailable("read in flight", err)
		}
		cur, err := s.readBuckets(ctx, item, n)
		if err != nil {
			return err
		}
		ok, err := s.lowerBuckets(ctx, item, cur, dbStock-inflight)
		if err != nil || ok {
			return err
		}
	}
	return nil
}

// warmupBucketed is the warm-up of an item over buckets > 1. A bucket is
// written from the figure only when the buckets must change (one is
// missing, or their sum is above the sellable stock); then every existing
// bucket first records the figure's restocks (a compare-and-set that
// keeps its value), so no restock the figure includes adds to any bucket
// afterwards, and the buckets are lowered to the figure and the missing
// ones created with the rest. Buckets that only need their TTL refreshed
// record nothing: restocks on their way still add their shares. It
// returns the sum of the buckets and the last restock id every bucket is
// recorded to hold.
//
// Two warm-ups that create the missing buckets at once may do so from
// figures on either side of a restock; their splits and the restock's
// shares do not add up exactly (each rounds its own way). So a warm-up
// whose bucket was created by another meanwhile answers errBucketsRaced
// and runs again with force, writing from its figure even when the sum
// is not above it.
//
// Before it records its figure on existing buckets, it runs the Redis
// step of every restock between the oldest figure those buckets record
// and its own (each adds its share to the buckets that hold it neither by
// marker nor by figure, once): recording the figure then leaves no share
// out, whatever happens next.
func (s *Store) warmupBucketed(ctx context.Context, item Item, buckets int, ttl time.Duration, fig figure, force bool) (int64, int64, error) {
	k := s.Keys(item)
	res, committed := fig.reservations(k)
	var cur bucketValues
	var want int64
	var wrote bool
	for attempt := 1; ; attempt++ {
		var err error
		if cur, err = s.readBuckets(ctx, item, buckets); err != nil {
			return 0, 0, err
		}
		want, err = s.warmupBuckets.Run(ctx, s.rdb, append([]string{k.BucketMarker(), k.Inflight()}, res...),
			fig.stock, ttl.Milliseconds(), buckets, committed).Int64()
		if err != nil {
			return 0, 0, unavailable("warmup", err)
		}
		wrote = force || !cur.warmed() || cur.sum() > max(want, 0)
		ok := true
		if wrote && fig.known && slices.ContainsFunc(cur, func(v int64) bool { return v >= 0 }) {
			// Existing buckets first get every restock the figure
			// includes, so recording the figure on them leaves none out.
			if err := s.catchUpRestocks(ctx, item, cur, fig); err != nil {
				return 0, 0, err
			}
			if cur, err = s.readBuckets(ctx, item, buckets); err != nil {
				return 0, 0, err
			}
		}
		if wrote && fig.known {
			ok, err = s.recordFigure(ctx, item, cur, ttl, fig.upto())
			if err != nil {
				return 0, 0, err
			}
		}
		if ok {
			ok, err = s.lowerBuckets(ctx, item, cur, want)
			if err != nil {
				return 0, 0, err
			}
		}
		if ok {
			break
		}
		if attempt == 5 {
			return 0, 0, fmt.Errorf("warmup: buckets of item %d keep changing", item.ID)
		}
	}
	var missing []int
	for i, v := range cur {
		if v < 0 {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		shares := split(max(want-cur.sum(), 0), len(missing))
		for j, b := range missing {
			// Created only while still missing: a concurrent warmup's
			// bucket is kept (with its own record, read below).
			r, err := s.setBucketUpto(ctx, item, b, -1, shares[j], ttl, fig.upto())
			if err != nil {
				return 0, 0, err
			}
			if r != 1 && fig.known {
				return 0, 0, errBucketsRaced
			}

		}
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range buckets {
			p.PExpire(ctx, k.Bucket(i), ttl)
			p.PExpire(ctx, k.bucketRestockRecord(i), ttl) // lives as long as its bucket
		}
		return nil
	})
	if err != nil {
		return 0, 0, unavailable("refresh bucket ttl", err)
	}
	after, err := s.readBuckets(ctx, item, buckets)
	if err != nil {
		return 0, 0, err
	}
	if !fig.known {
		return after.sum(), 0, nil
	}
	if wrote {
		// Every bucket records this figure now: the existing ones by
		// recordFigure, the missing ones as they were created.
		return after.sum(), fig.lastRestock, nil
	}
	upto, err := s.bucketsUpto(ctx, item, after)
	return after.sum(), upto, err
}

// catchUpRestocks runs the Redis step of every restock of item between
// the oldest figure its buckets record and fig's (in chunks), so that
// every bucket holds its share of each: a bucket whose figure included a
// restock adds nothing, one that holds it by its marker neither.
func (s *Store) catchUpRestocks(ctx context.Context, item Item, cur bucketValues, fig figure) error {
	after, err := s.bucketsUpto(ctx, item, cur)
	if err != nil {
		return err
	}
	for after < fig.lastRestock {
		ids, qtys, err := fig.restocks.RestocksBetween(ctx, item.ID, after, fig.lastRestock, 500)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		for i, id := range ids {
			if _, err := s.Restock(ctx, item, id, qtys[i]); err != nil {
				return err
			}
		}
		after = ids[len(ids)-1]
	}
	return nil
}

// bucketsUpto is the last restock id that every existing bucket of cur is
// recorded to hold (the smallest upto of their records; 0 for none).
func (s *Store) bucketsUpto(ctx context.Context, item Item, cur bucketValues) (int64, error) {
	k := s.Keys(item)
	cmds := make([]*redis.StringCmd, 0, len(cur))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, v := range cur {
			if v >= 0 {
				cmds = append(cmds, p.HGet(ctx, k.bucketRestockRecord(b), "upto"))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, unavailable("read restock records", err)
	}
	var upto int64 = -1
	for _, c := range cmds {
		v, err := c.Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, unavailable("read restock record", err)
		}
		if upto < 0 || v < upto {
			upto = v
		}
	}
	return max(upto, 0), nil
}

// recordFigure makes every existing bucket record that it holds the
// restocks up to upto, keeping its value (a compare-and-set on the value
// read). false: a bucket changed since it was read (read again);
// errStaleFigure: a bucket holds a later restock than the figure.
func (s *Store) recordFigure(ctx context.Context, item Item, cur bucketValues, ttl time.Duration, upto string) (bool, error) {
	for b, v := range cur {
		if v < 0 {
			continue
		}
		r, err := s.setBucketUpto(ctx, item, b, v, v, ttl, upto)
		if err != nil {
			return false, err
		}
		switch r {
		case -1:
			return false, errStaleFigure
		case 0:
			return false, nil
		}
	}
	return true, nil
}

// Layout reads how item's stock lives in Redis, in one MGET on the item's
// slot: the count its bucket marker holds, else 1 when its one stock key
// exists, else 0 (no stock key lives). A failed read is an error wrapping
// order.ErrUnavailable, never "no keys". Both a marker and the one stock
// key (a layout changed while the old keys lived) is order.ErrSettingLocked:
// the reconciler reports such an item.
func (s *Store) Layout(ctx context.Context, item Item) (order.Layout, error) {
	k := s.Keys(item)
	vals, err := s.rdb.MGet(ctx, k.Stock(), k.BucketMarker()).Result()
	if err != nil {
		return 0, unavailable("read stock layout", err)
	}
	stock := vals[0] != nil
	marker := 0
	if v, ok := vals[1].(string); ok {
		if marker, err = strconv.Atoi(v); err != nil {
			return 0, fmt.Errorf("read stock layout: bucket marker %q", v)
		}
	}
	switch {
	case marker > 1 && stock:
		return order.Layout(marker), order.Errorf(order.ErrSettingLocked,
			"item %d has both one stock key and %d stock buckets in Redis: run the reconciler", item, marker)
	case marker > 1:
		return order.Layout(marker), nil
	case stock:
		return 1, nil
	}
	return 0, nil
}

// checkWarmupLayout refuses (order.ErrSettingLocked) a warm-up that would
// lay item's stock out in buckets keys while its live keys have another
// layout: the item would then hold two, and a restock or the reconciler
// would follow the marker to keys nobody sells from. The API refuses the
// changes of a sale that lead there (orderdb.CreateSale, PatchActivity);
// this catches a warm-up from a copy of the sale older than such a change.
// It is a read before the writes, not one script with them: two warm-ups
// of different layouts started together can still both pass.
func (s *Store) checkWarmupLayout(ctx context.Context, item Item, buckets int) error {
	live, err := s.Layout(ctx, item)
	if err != nil {
		return err
	}
	if want := order.Layout(max(buckets, 1)); live != 0 && live != want {
		return order.Errorf(order.ErrSettingLocked, "the item's stock lives in Redis in %s: a warm-up cannot lay it out in %s",
			live, want)
	}
	return nil
}
