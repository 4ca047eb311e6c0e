package stockredis

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// ScanWarmedItems lists a page of the warmed items, about count of them
// (SSCAN: the set is never read whole, however many items were ever
// warmed), from cursor (0: the first page). next is 0 after the last page.
// An item may come twice in one scan (SSCAN's guarantee is that every
// member present throughout comes at least once).
func (s *Stock) ScanWarmedItems(ctx context.Context, cursor uint64, count int64) (items []reservation.Item, next uint64, err error) {
	ids, next, err := s.rdb.SScan(ctx, s.itemsKey(), cursor, "", count).Result()
	if err != nil {
		return nil, 0, unavailable("scan items", err)
	}
	return parseMembers(ids), next, nil
}

// PendingOlderThanEach is PendingOlderThan for each of items, in one
// pipeline (one round trip per master, not one per item): up to limit
// unconfirmed order numbers of each item reserved before cutoff, oldest
// first. An item whose read failed is in errs (and not in pending); an
// item with none is in neither.
func (s *Reservations) PendingOlderThanEach(ctx context.Context, items []reservation.Item, cutoff time.Time, limit int64) (pending map[reservation.Item][]string, errs map[reservation.Item]error) {
	pending, errs = map[reservation.Item][]string{}, map[reservation.Item]error{}
	if len(items) == 0 {
		return pending, errs
	}
	upTo := strconv.FormatInt(cutoff.UnixMilli(), 10)
	cmds := make([]*redis.StringSliceCmd, len(items))
	// A failed pipeline still runs the commands it sent; each answers for
	// itself below.
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, item := range items {
			cmds[i] = p.ZRangeByScore(ctx, s.keys(item).Pending(), &redis.ZRangeBy{Min: "-inf", Max: upTo, Count: limit})
		}
		return nil
	})
	for i, item := range items {
		nos, err := cmds[i].Result()
		switch {
		case err != nil && err != redis.Nil:
			errs[item] = unavailable("list pending", err)
		case len(nos) > 0:
			pending[item] = nos
		}
	}
	return pending, errs
}
