package stockredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

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
func (s *Stock) warmupBucketed(ctx context.Context, item reservation.Item, buckets int, ttl time.Duration, fig figure, force bool) (int64, int64, error) {
	cur, want, wrote, err := s.settleBuckets(ctx, item, buckets, ttl, fig, force)
	if err != nil {
		return 0, 0, err
	}
	if err := s.buckets.createMissingBuckets(ctx, item, cur, want, ttl, fig); err != nil {
		return 0, 0, err
	}
	if err := s.buckets.refreshBucketTTL(ctx, item, buckets, ttl); err != nil {
		return 0, 0, err
	}
	after, err := s.buckets.readBuckets(ctx, item, buckets)
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
	upto, err := s.buckets.bucketsUpto(ctx, item, after)
	return after.sum(), upto, err
}

// settleBuckets brings the existing buckets of item in line with fig, up
// to five times while they change under it: it returns them as they are
// then, the sellable stock the warm-up script computed (want) and whether
// the buckets are written from the figure (wrote).
func (s *Stock) settleBuckets(ctx context.Context, item reservation.Item, buckets int, ttl time.Duration, fig figure, force bool) (cur bucketValues, want int64, wrote bool, err error) {
	res, committed := fig.reservations(s.keys(item))
	for attempt := 1; ; attempt++ {
		var ok bool
		cur, want, wrote, ok, err = s.settleBucketsOnce(ctx, item, buckets, ttl, fig, force, res, committed)
		if err != nil {
			return nil, 0, false, err
		}
		if ok {
			return cur, want, wrote, nil
		}
		if attempt == 5 {
			return nil, 0, false, fmt.Errorf("warmup: buckets of item %d keep changing", item.ID)
		}
	}
}

// settleBucketsOnce is one attempt of settleBuckets: it reads the buckets,
// runs the warm-up script (res and committed are fig's reservations) and,
// when the buckets are to be written, catches them up with the figure's
// restocks, records the figure on them and lowers them to want. ok is
// false when a bucket changed since it was read.
func (s *Stock) settleBucketsOnce(ctx context.Context, item reservation.Item, buckets int, ttl time.Duration, fig figure, force bool, res []string, committed int) (cur bucketValues, want int64, wrote, ok bool, err error) {
	k := s.keys(item)
	if cur, err = s.buckets.readBuckets(ctx, item, buckets); err != nil {
		return nil, 0, false, false, err
	}
	want, err = s.warmupBuckets.Run(ctx, s.rdb, append([]string{k.BucketMarker(), k.Inflight()}, res...),
		fig.stock, ttl.Milliseconds(), buckets, committed).Int64()
	if err != nil {
		return nil, 0, false, false, unavailable("warmup", err)
	}
	wrote = force || !cur.warmed() || cur.sum() > max(want, 0)
	ok = true
	if wrote && fig.known && slices.ContainsFunc(cur, func(v int64) bool { return v >= 0 }) {
		// Existing buckets first get every restock the figure
		// includes, so recording the figure on them leaves none out.
		if err := s.catchUpRestocks(ctx, item, cur, fig); err != nil {
			return nil, 0, false, false, err
		}
		if cur, err = s.buckets.readBuckets(ctx, item, buckets); err != nil {
			return nil, 0, false, false, err
		}
	}
	if wrote && fig.known {
		ok, err = s.buckets.recordFigure(ctx, item, cur, ttl, fig.upto())
		if err != nil {
			return nil, 0, false, false, err
		}
	}
	if ok {
		ok, err = s.buckets.lowerBuckets(ctx, item, cur, want)
		if err != nil {
			return nil, 0, false, false, err
		}
	}
	return cur, want, wrote, ok, nil
}

// createMissingBuckets creates the buckets of cur that are missing with
// the sellable stock want less what the existing ones hold, split evenly,
// each recording fig's restocks; errBucketsRaced when another warm-up
// created one meanwhile (for a figure that knows its restocks).
func (s *buckets) createMissingBuckets(ctx context.Context, item reservation.Item, cur bucketValues, want int64, ttl time.Duration, fig figure) error {
	var missing []int
	for i, v := range cur {
		if v < 0 {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	shares := split(max(want-cur.sum(), 0), len(missing))
	for j, b := range missing {
		// Created only while still missing: a concurrent warmup's
		// bucket is kept (with its own record, read below).
		r, err := s.setBucketUpto(ctx, item, b, -1, shares[j], ttl, fig.upto())
		if err != nil {
			return err
		}
		if r != 1 && fig.known {
			return errBucketsRaced
		}
	}
	return nil
}

// refreshBucketTTL sets ttl on each bucket of item and on its restock
// record.
func (s *buckets) refreshBucketTTL(ctx context.Context, item reservation.Item, buckets int, ttl time.Duration) error {
	k := s.keys(item)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range buckets {
			p.PExpire(ctx, k.Bucket(i), ttl)
			p.PExpire(ctx, k.bucketRestockRecord(i), ttl) // lives as long as its bucket
		}
		return nil
	})
	if err != nil {
		return unavailable("refresh bucket ttl", err)
	}
	return nil
}

// catchUpRestocks runs the Redis step of every restock of item between
// the oldest figure its buckets record and fig's (in chunks), so that
// every bucket holds its share of each: a bucket whose figure included a
// restock adds nothing, one that holds it by its marker neither.
func (s *Stock) catchUpRestocks(ctx context.Context, item reservation.Item, cur bucketValues, fig figure) error {
	after, err := s.buckets.bucketsUpto(ctx, item, cur)
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
func (s *buckets) bucketsUpto(ctx context.Context, item reservation.Item, cur bucketValues) (int64, error) {
	k := s.keys(item)
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
func (s *buckets) recordFigure(ctx context.Context, item reservation.Item, cur bucketValues, ttl time.Duration, upto string) (bool, error) {
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
