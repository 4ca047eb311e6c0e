package stockredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Codes keeps the sales' presale codes in Redis: one hash a sale, in its
// slot (Keys.Codes), that the reserve and entry scripts read and change.
// Everything here only adds a code that has no field (HSETNX), removes a
// revoked one (HDEL) or marks the hash loaded (access.LoadedField, last):
// a live count a script changed is never overwritten, so each call may be
// repeated after a lost answer.
type Codes struct{ *core }

// Codes is the codes' store over the stock's client and prefix (the
// api's wiring holds the stock store, not the Store).
func (s *Stock) Codes() *Codes { return &Codes{core: s.core} }

// Pages and pipelines of a load: a page is one range read of MySQL's
// primary key, a pipeline one round trip to Redis.
const (
	codesPage     = 5000
	codesPipeline = 1000
)

// codesKey is sale's codes hash.
func (s *Codes) codesKey(sale activity.Activity) string {
	return s.keys(reservation.One(sale.ItemID)).Codes(sale.ID)
}

// codesUntil is when sale's codes hash may expire: after the longest
// payment window a sale may have, so it outlives every key of the sale
// that a release of a code's use touches, whatever the programs' window.
func codesUntil(sale activity.Activity) time.Time {
	return sale.KeysLiveUntil(activity.MaxPaymentWindow)
}

// Load copies sale's codes from r (MySQL) into the hash: each code not
// revoked that has no field gets one with its left uses (uses - used, as
// MySQL counts them), each revoked one loses its field, then the hash is
// marked loaded. It returns the codes read. A field that exists keeps its
// count: the scripts have been changing it. Load heals a write-through
// that failed (an added code missing, a revoked one still there) and
// rebuilds a hash Redis lost; run again after a lost answer, it writes
// the same.
//
// A code revoked while a load runs may be read before and written after
// the revoke's own HDEL: MySQL refuses it all the same (the consumer's
// use of a code checks revoked_at), and the next load removes it.
func (s *Codes) Load(ctx context.Context, sale activity.Activity, r access.Reader) (int, error) {
	key, until := s.codesKey(sale), codesUntil(sale)
	var after access.Digest
	read := 0
	for {
		page, err := r.CodePage(ctx, sale.ID, after, codesPage)
		if err != nil {
			return read, err
		}
		read += len(page)
		for start := 0; start < len(page); start += codesPipeline {
			chunk := page[start:min(start+codesPipeline, len(page))]
			_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, c := range chunk {
					if c.Revoked {
						p.HDel(ctx, key, string(c.Digest))
					} else {
						p.HSetNX(ctx, key, string(c.Digest), c.RedisValue())
					}
				}
				p.PExpireAt(ctx, key, until)
				return nil
			})
			if err != nil {
				return read, unavailable("load codes", err)
			}
		}
		if len(page) < codesPage {
			break
		}
		after = page[len(page)-1].Digest
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, access.LoadedField, "1")
		p.PExpireAt(ctx, key, until)
		return nil
	})
	if err != nil {
		return read, unavailable("mark codes loaded", err)
	}
	return read, nil
}

// Loaded reports whether sale's codes hash was loaded from MySQL (it has
// access.LoadedField).
func (s *Codes) Loaded(ctx context.Context, sale activity.Activity) (bool, error) {
	ok, err := s.rdb.HExists(ctx, s.codesKey(sale), access.LoadedField).Result()
	if err != nil {
		return false, unavailable("read codes loaded", err)
	}
	return ok, nil
}

// Add writes codes, just committed in MySQL, into sale's hash (the
// write-through): a field for each that has none. The hash need not be
// loaded: the load that marks it adds whatever this missed.
func (s *Codes) Add(ctx context.Context, sale activity.Activity, codes []access.Code) error {
	key, until := s.codesKey(sale), codesUntil(sale)
	for start := 0; start < len(codes); start += codesPipeline {
		chunk := codes[start:min(start+codesPipeline, len(codes))]
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range chunk {
				p.HSetNX(ctx, key, string(c.Digest), c.RedisValue())
			}
			p.PExpireAt(ctx, key, until)
			return nil
		})
		if err != nil {
			return unavailable("add codes", err)
		}
	}
	return nil
}

// Revoke removes sale's code d from the hash: from then on every script
// finds no such code.
func (s *Codes) Revoke(ctx context.Context, sale activity.Activity, d access.Digest) error {
	if err := s.rdb.HDel(ctx, s.codesKey(sale), string(d)).Err(); err != nil {
		return unavailable("revoke code", err)
	}
	return nil
}

// CheckCode reports whether user may use the code of digest d in sale now,
// without using it: nil when Redis holds it for anyone or for user with a
// use left; access.ErrCodeInvalid when it has no field (never given,
// revoked) or is bound to another buyer; access.ErrCodeUsed when every use
// is held; order.ErrNotWarmed when the sale's codes are not loaded. A
// code_required room's join checks its code so (the order uses it).
func (s *Codes) CheckCode(ctx context.Context, sale activity.Activity, d access.Digest, user string) error {
	key := s.codesKey(sale)
	var loaded *redis.BoolCmd
	var v *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		loaded = p.HExists(ctx, key, access.LoadedField)
		v = p.HGet(ctx, key, string(d))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return unavailable("check code", err)
	}
	if !loaded.Val() {
		return order.Errorf(order.ErrNotWarmed, "the sale's presale codes are not loaded yet; try again shortly")
	}
	if errors.Is(v.Err(), redis.Nil) {
		return access.ErrCodeInvalid
	}
	left, subject, ok := strings.Cut(v.Val(), "|")
	n, convErr := strconv.Atoi(left)
	switch {
	case !ok || convErr != nil:
		return unavailable("check code", fmt.Errorf("code field %q", v.Val()))
	case subject != "" && subject != user:
		return access.ErrCodeInvalid
	case n <= 0:
		return access.ErrCodeUsed
	}
	return nil
}
