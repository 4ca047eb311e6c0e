package stockredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/reservation"
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
// the main tag and returns the bucket, which then gets the units back.
// Between the two steps the units are in neither place; the reconciler
// counts them in flight for MovingRetention (Reconciler.View). A crash
// between the two steps loses the units from Redis: the item undersells
// until the reconciler's repair puts them back; it never oversells.

// Bucket is bucket n of a bucketed item: its own hash tag {i<item>b<n>}.
func (k Keys) Bucket(n int) string { return fmt.Sprintf("%s:{%s}:stock", k.prefix, k.bucketTag(n)) }

// Taken marks the units order took from bucket n (bucket_take), in the
// bucket's hash tag, so a give-back happens once and only for a real take.
func (k Keys) Taken(n int, orderNo string) string {
	return fmt.Sprintf("%s:{%s}:t:%s", k.prefix, k.bucketTag(n), orderNo)
}

// Takes lists bucket n's recent takes (lua/bucket_take.lua), in the
// bucket's hash tag: the orders whose units may have left the bucket
// without reaching the item's in-flight counter yet.
func (k Keys) Takes(n int) string { return fmt.Sprintf("%s:{%s}:takes", k.prefix, k.bucketTag(n)) }

// Gives lists the item's recent releases of bucketed reservations
// (lua/release.lua), in the item's hash tag: the orders whose units may
// have left the in-flight counter without reaching their bucket yet.
func (k Keys) Gives() string { return k.base() + "gives" }

// MovingRetention is how long a take or a give-back stays listed
// (Takes, Gives), and so how long the reconciler counts its units in
// flight while its second step has not run (Reconciler.View). It is far
// longer than the api or the consumer lets pass between the two steps: the
// second is the next command, bounded by the client's timeouts (2 s a
// read, a few during a failover's CLUSTERDOWN), and a repeated release
// lists its order again. Past it, units whose second step never came (the
// process died between the two) count as lost and the repair puts them
// back; longer would only hide such a loss longer.
const MovingRetention = 30 * time.Second

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
func (s *buckets) readBuckets(ctx context.Context, item reservation.Item, n int) (bucketValues, error) {
	k := s.keys(item)
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
func (s *buckets) bucketCount(ctx context.Context, item reservation.Item) (int, error) {
	v, err := s.rdb.Get(ctx, s.keys(item).BucketMarker()).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable("read bucket marker", err)
	}
	return v, nil
}

// setBucket is bucket_set: bucket n of item from was (-1: missing) to v.
func (s *buckets) setBucket(ctx context.Context, item reservation.Item, n int, was, v int64, ttl time.Duration) (bool, error) {
	r, err := s.setBucketUpto(ctx, item, n, was, v, ttl, "")
	return r == 1, err
}

// setBucketUpto is setBucket for a warm-up with a MySQL figure that
// includes the item's restocks up to upto (empty: not known): the bucket
// records it (lua/bucket_set.lua). It returns 1 written, 0 changed since
// read, -1 the bucket holds a later restock than upto.
func (s *buckets) setBucketUpto(ctx context.Context, item reservation.Item, n int, was, v int64, ttl time.Duration, upto string) (int64, error) {
	w := ""
	if was >= 0 {
		w = strconv.FormatInt(was, 10)
	}
	k := s.keys(item)
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
func (s *buckets) lowerBuckets(ctx context.Context, item reservation.Item, cur bucketValues, want int64) (bool, error) {
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
