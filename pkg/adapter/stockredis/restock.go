package stockredis

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/pkg/domain/reservation"
)

// restockMarkerTTL is how long a restock's markers live: long past the
// reconciler's next run, which finishes and records every restock whose
// Redis step was left undone.
const restockMarkerTTL = 30 * 24 * time.Hour

// restockMarker marks restock id as added to the item's stock key.
func (k Keys) restockMarker(id int64) string { return fmt.Sprintf("%srs:%d", k.base(), id) }

// bucketRestockMarker marks restock id's share as added to bucket n.
func (k Keys) bucketRestockMarker(n int, id int64) string {
	return fmt.Sprintf("%s:{%s}:rs:%d", k.prefix, k.bucketTag(n), id)
}

// restockRecord is the item's restock record beside its stock key
// (lua/restock.lua): upto, every restock up to that id is in the stock (a
// warm-up's MySQL figure included it), and last, the latest restock the
// restock script added.
func (k Keys) restockRecord() string { return k.base() + "restocked" }

// bucketRestockRecord is restockRecord for bucket n.
func (k Keys) bucketRestockRecord(n int) string {
	return fmt.Sprintf("%s:{%s}:restocked", k.prefix, k.bucketTag(n))
}

// restockShares is how a restock of qty units spreads over an item's
// buckets (1 or less: one stock key): the even split warm-up uses.
func restockShares(qty int64, buckets int) []int64 {
	return split(qty, max(buckets, 1))
}

// Restock adds restock id's qty units to the item's Redis stock, once per
// restock id however often it runs: spread over the buckets of a bucketed
// item (each bucket's share once, by a marker in the bucket's slot), and
// not at all where a warm-up's MySQL figure already included it (the
// record's upto). The caller records the restock in MySQL first. An error
// may leave some buckets done: running it again finishes the rest. A lost
// answer is an UnknownOutcomeError (MayHaveRun); running it again is the
// resolution.
func (s *Stock) Restock(ctx context.Context, item reservation.Item, id, qty int64) (reservation.Restocked, error) {
	k := s.keys(item)
	n, err := s.buckets.bucketCount(ctx, item)
	if err != nil {
		return reservation.Restocked{}, err
	}
	res := reservation.Restocked{Warmed: true}
	ttl := restockMarkerTTL.Milliseconds()
	if n < 2 {
		add, warmed, err := s.runRestock(ctx, k.Stock(), k.restockMarker(id), k.restockRecord(), id, qty, ttl)
		return reservation.Restocked{Warmed: warmed, Added: add}, err
	}
	for b, share := range restockShares(qty, n) {
		if share == 0 {
			continue
		}
		add, warmed, err := s.runRestock(ctx, k.Bucket(b), k.bucketRestockMarker(b, id), k.bucketRestockRecord(b), id, share, ttl)
		if err != nil {
			return res, err
		}
		res.Added += add
		res.Warmed = res.Warmed && warmed
	}
	return res, nil
}

func (s *Stock) runRestock(ctx context.Context, stock, marker, record string, id, qty, ttl int64) (int64, bool, error) {
	r, err := s.restock.Run(ctx, s.rdb, []string{stock, marker, record}, qty, ttl, id).Int64Slice()
	if err != nil {
		return 0, false, unavailable("restock", err)
	}
	switch r[0] {
	case 1:
		return qty, true, nil
	case 0:
		return 0, true, nil
	}
	return 0, false, nil
}
