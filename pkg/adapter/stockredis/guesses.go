package stockredis

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// guessKeys are the counters of invalid codes: the buyer's in the sale
// (in the sale's slot) and the client address's across sales (its own
// slot; addr is the api's address bucket, "" when none was read).
func (c *core) guessKeys(item reservation.Item, activityID int64, user, addr string) (buyer, address string) {
	buyer = c.keys(item).group() + "g:" + strconv.FormatInt(activityID, 10) + ":" + UserSegment(user)
	return buyer, c.prefix + ":guess:" + addr
}

// Guesses reads how many invalid codes user sent in the sale of item
// (activityID), and addr sent in any sale, in their current windows.
func (s *Reservations) Guesses(ctx context.Context, item reservation.Item, activityID int64, user, addr string) (byBuyer, byAddr int64, err error) {
	bk, ak := s.guessKeys(item, activityID, user, addr)
	// Two commands in one round trip; on a cluster go-redis sends each to
	// its slot's node. Reads: safe to send again.
	var b, a *redis.StringCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		b, a = p.Get(ctx, bk), p.Get(ctx, ak)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, unavailable("read guesses", err)
	}
	byBuyer, _ = b.Int64()
	byAddr, _ = a.Int64()
	return byBuyer, byAddr, nil
}

// Guessed counts one invalid code from user in the sale and from addr:
// INCR, and PEXPIRE NX so the window runs from the first guess. A lost
// answer counts it once or not at all (INCR is not sent again), either
// way a bound that holds within one guess.
func (s *Reservations) Guessed(ctx context.Context, item reservation.Item, activityID int64, user, addr string, buyer, address access.GuessLimit) error {
	bk, ak := s.guessKeys(item, activityID, user, addr)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if buyer.Max > 0 {
			p.Incr(ctx, bk)
			p.Do(ctx, "PEXPIRE", bk, buyer.Per.Milliseconds(), "NX")
		}
		if address.Max > 0 {
			p.Incr(ctx, ak)
			p.Do(ctx, "PEXPIRE", ak, address.Per.Milliseconds(), "NX")
		}
		return nil
	})
	if err != nil {
		return unavailable("count a guess", err)
	}
	return nil
}
