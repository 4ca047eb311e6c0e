package stockredis

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// lookupBatch bounds how many keys one MGET carries.
const lookupBatch = 256

// lookup is one waiting read of a string key of an item.
type lookup struct {
	item  int64
	key   string
	reply chan lookupResult
}

type lookupResult struct {
	val string
	ok  bool
	err error
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

func (b *batcher) start() {
	b.queue = make(chan lookup, 4*lookupBatch)
	for range lookupWorkers {
		go b.work()
	}
}

func (b *batcher) work() {
	batch := make([]lookup, 0, lookupBatch)
	for first := range b.queue {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < lookupBatch {
			select {
			case l := <-b.queue:
				batch = append(batch, l)
			default:
				break fill
			}
		}
		b.answer(batch)
	}
}

func (b *batcher) answer(batch []lookup) {
	byItem := map[int64][]lookup{}
	for _, l := range batch {
		byItem[l.item] = append(byItem[l.item], l)
	}
	for _, ls := range byItem {
		keys := make([]string, len(ls))
		for i, l := range ls {
			keys[i] = l.key
		}
		vals, err := b.rdb.MGet(context.Background(), keys...).Result()
		for i, l := range ls {
			var r lookupResult
			switch {
			case err != nil:
				r.err = unavailable("read", err)
			default:
				r.val, r.ok = vals[i].(string)
			}
			l.reply <- r
		}
	}
}

// get reads one key of item through the batcher.
func (b *batcher) get(ctx context.Context, item int64, key string) (string, bool, error) {
	b.once.Do(b.start)
	l := lookup{item: item, key: key, reply: make(chan lookupResult, 1)}
	select {
	case b.queue <- l:
	case <-ctx.Done():
		return "", false, ctx.Err()
	}
	select {
	case r := <-l.reply:
		return r.val, r.ok, r.err
	case <-ctx.Done():
		return "", false, ctx.Err()
	}
}

// PriorOrder returns the order number the user's idempotency key produced
// for item, or "" when the key is new. Concurrent calls share MGETs: this
// is the read the API makes for every request it answers from its sold-out
// flag.
func (s *Store) PriorOrder(ctx context.Context, item, user int64, idemKey string) (string, error) {
	v, ok, err := s.lookups.get(ctx, item, s.Keys(item).Idem(user, idemKey))
	if err != nil || !ok {
		return "", err
	}
	return v, nil
}
