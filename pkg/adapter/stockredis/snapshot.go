package stockredis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Stock reads the item's Redis stock and in-flight quantity in one round
// trip (both keys share a slot, so MGET works on a cluster too).
//
// For a bucketed item Stock is the sum of its buckets (read after the
// item's own keys) and Warmed says every bucket key exists.
func (s *Stock) Stock(ctx context.Context, item reservation.Item) (reservation.Snapshot, error) {
	snaps, err := s.Stocks(ctx, []reservation.Item{item})
	if err != nil {
		return reservation.Snapshot{}, err
	}
	return snaps[0], nil
}

// Stocks is Stock for each of items, in their order: one MGET for the items
// of one sale (their keys share its hash tag), whatever their number, and
// one more read for each bucketed item.
func (s *Stock) Stocks(ctx context.Context, items []reservation.Item) ([]reservation.Snapshot, error) {
	out := make([]reservation.Snapshot, len(items))
	byTag := map[int64][]int{}
	var tags []int64
	for i, it := range items {
		t := it.Tagged().Tag
		if _, ok := byTag[t]; !ok {
			tags = append(tags, t)
		}
		byTag[t] = append(byTag[t], i)
	}
	for _, t := range tags {
		idx := byTag[t]
		keys := make([]string, 0, 3*len(idx))
		for _, i := range idx {
			k := s.keys(items[i])
			keys = append(keys, k.Stock(), k.Inflight(), k.BucketMarker())
		}
		vals, err := s.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, unavailable("read stock", err)
		}
		for j, i := range idx {
			snap, err := s.snapshot(ctx, items[i], vals[3*j:3*j+3])
			if err != nil {
				return nil, err
			}
			out[i] = snap
		}
	}
	return out, nil
}

// snapshot reads an item's Snapshot from the values of its stock, in-flight
// and bucket marker keys (and its buckets, for a bucketed item).
func (s *Stock) snapshot(ctx context.Context, item reservation.Item, vals []any) (reservation.Snapshot, error) {
	var snap reservation.Snapshot
	if v, ok := vals[2].(string); ok {
		if n, _ := strconv.Atoi(v); n > 1 {
			if v, ok := vals[1].(string); ok {
				snap.Inflight, _ = strconv.ParseInt(v, 10, 64)
			}
			b, err := s.buckets.readBuckets(ctx, item, n)
			if err != nil {
				return reservation.Snapshot{}, err
			}
			snap.Warmed, snap.Stock = b.warmed(), b.sum()
			return snap, nil
		}
	}
	if v, ok := vals[0].(string); ok {
		snap.Warmed = true
		snap.Stock, _ = strconv.ParseInt(v, 10, 64)
	}
	if v, ok := vals[1].(string); ok {
		snap.Inflight, _ = strconv.ParseInt(v, 10, 64)
	}
	return snap, nil
}

// Layout reads how item's stock lives in Redis, in one MGET on the item's
// slot: the count its bucket marker holds, else 1 when its one stock key
// exists, else 0 (no stock key lives). A failed read is an error wrapping
// order.ErrUnavailable, never "no keys". Both a marker and the one stock
// key (a layout changed while the old keys lived) is activity.ErrSettingLocked:
// the reconciler reports such an item.
func (s *Stock) Layout(ctx context.Context, item reservation.Item) (activity.Layout, error) {
	k := s.keys(item)
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
		return activity.Layout(marker), order.Errorf(activity.ErrSettingLocked,
			"item %d has both one stock key and %d stock buckets in Redis: run the reconciler", item, marker)
	case marker > 1:
		return activity.Layout(marker), nil
	case stock:
		return 1, nil
	}
	return 0, nil
}

// WarmedItems lists the items warmup has loaded.
func (s *Stock) WarmedItems(ctx context.Context) ([]reservation.Item, error) {
	ids, err := s.rdb.SMembers(ctx, s.itemsKey()).Result()
	if err != nil {
		return nil, unavailable("list items", err)
	}
	return parseMembers(ids), nil
}

// parseMembers reads the members of the warmed-items set, skipping any
// that is not one.
func parseMembers(ids []string) []reservation.Item {
	out := make([]reservation.Item, 0, len(ids))
	for _, id := range ids {
		if it, ok := parseMember(id); ok {
			out = append(out, it)
		}
	}
	return out
}
