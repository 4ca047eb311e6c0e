package stockredis

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/batch"
)

// lookupBatch bounds how many reads one MGET answers.
const lookupBatch = 256

// lookup is one waiting read of string keys of an item.
type lookup struct {
	item  int64
	keys  []string
	reply chan lookupResult
}

// lookupResult holds one value per key of the lookup, "" for a missing key.
type lookupResult struct {
	vals []string
	err  error
}

// batcher turns many concurrent single-key reads into few MGETs: a worker
// takes the first waiting read and every other one already queued (no
// timer, so a lone read is not delayed), groups them by item (one hash tag,
// so one MGET works on a cluster too) and answers them all. Under load the
// queue fills while an MGET is in flight, so batches grow with the load and
// the system calls per read fall.
type batcher struct {
	rdb   redis.UniversalClient
	queue chan lookup
	once  sync.Once
}

const lookupWorkers = 4

func (b *batcher) start() { b.queue = batch.Start(lookupWorkers, 4*lookupBatch, lookupBatch, b.answer) }

func (b *batcher) answer(batch []lookup) {
	byItem := map[int64][]lookup{}
	var order []int64
	for _, l := range batch {
		if _, ok := byItem[l.item]; !ok {
			order = append(order, l.item)
		}
		byItem[l.item] = append(byItem[l.item], l)
	}
	// One MGET per hash tag, all in one pipeline: a batch of several
	// sales' reads costs one round trip (one per node on a cluster), and a
	// read is safe to send again.
	cmds := make([]*redis.SliceCmd, len(order))
	mget := func(c redis.Cmdable) {
		for i, item := range order {
			var keys []string
			for _, l := range byItem[item] {
				keys = append(keys, l.keys...)
			}
			cmds[i] = c.MGet(context.Background(), keys...)
		}
	}
	if len(order) == 1 {
		mget(b.rdb)
	} else {
		_, _ = b.rdb.Pipelined(context.Background(), func(p redis.Pipeliner) error { mget(p); return nil })
	}
	for i, item := range order {
		vals, err := cmds[i].Result()
		for _, l := range byItem[item] {
			r := lookupResult{err: err}
			if err != nil {
				r.err = unavailable("read", err)
			} else {
				r.vals = make([]string, len(l.keys))
				for i := range l.keys {
					r.vals[i], _ = vals[i].(string)
				}
				vals = vals[len(l.keys):]
			}
			l.reply <- r
		}
	}
}

// get reads keys of item through the batcher: one value per key, "" for
// a missing one.
func (b *batcher) get(ctx context.Context, item reservation.Item, keys ...string) ([]string, error) {
	b.once.Do(b.start)
	l := lookup{item: item.Tagged().Tag, keys: keys, reply: make(chan lookupResult, 1)}
	select {
	case b.queue <- l:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-l.reply:
		return r.vals, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// PriorOrders returns what the reserve script would find before it looks
// at stock. Concurrent calls share MGETs: this is the read the API makes
// for every request it answers from its sold-out flag, so the flag keeps
// the script's precedence (a replayed key gets its order, a buyer holding
// an order hears ALREADY_PURCHASED, only then SOLD_OUT).
func (s *Reservations) PriorOrders(ctx context.Context, item reservation.Item, activity int64, user, idemKey string) (reservation.PriorOrders, error) {
	k := s.keys(item)
	vals, err := s.lookups.get(ctx, item, k.Idem(user, idemKey), k.Quota(activity, user))
	if err != nil {
		return reservation.PriorOrders{}, err
	}
	return reservation.PriorOrders{ByKey: vals[0], QuotaHolder: vals[1]}, nil
}

// HeldOrder returns the order holding user's quota in the activity (the
// order they hold in the sale), "" for none: the read PriorOrders makes,
// without a key, through the same shared MGETs.
func (s *Reservations) HeldOrder(ctx context.Context, item reservation.Item, activity int64, user string) (string, error) {
	vals, err := s.lookups.get(ctx, item, s.keys(item).Quota(activity, user))
	if err != nil {
		return "", err
	}
	return vals[0], nil
}
