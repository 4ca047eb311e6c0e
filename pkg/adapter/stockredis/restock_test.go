package stockredis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// The restock script's answer is lost (on the first bucket of a bucketed
// item): it ran, and the client library did not send it again. Running the
// restock again, as the API's retry or the reconciler does, finishes it;
// the units are added exactly once, spread evenly over the buckets.
func TestLostReplyRestock(t *testing.T) {
	for _, buckets := range []int{1, 3} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) {
			t.Parallel()
			forBoth(t, func(t *testing.T, l lossy) {
				ctx := context.Background()
				warm(t, l.direct, 9, buckets)
				l.LoseNext("restock")
				_, err := l.via.Stock.Restock(ctx, reservation.One(item), 1, 7)
				mustBeUnknown(t, l, "restock", err)
				// On the cluster each node's proxy loses one answer, and
				// buckets live on several nodes: retry as a client would,
				// until an answer comes back.
				var res reservation.Restocked
				for attempt := 1; ; attempt++ {
					res, err = l.via.Stock.Restock(ctx, reservation.One(item), 1, 7)
					if err == nil || attempt > len(l.Proxies) {
						break
					}
					if !stockredis.MayHaveRun(err) {
						t.Fatalf("retry %d: %v, want a lost answer or success", attempt, err)
					}
				}
				if err != nil || !res.Warmed {
					t.Fatalf("the retry: %+v %v", res, err)
				}
				wantStock(t, l.direct, 16, 0)
				res, err = l.via.Stock.Restock(ctx, reservation.One(item), 1, 7)
				if err != nil || res.Added != 0 {
					t.Fatalf("a third run: %+v %v, want nothing added", res, err)
				}
				wantStock(t, l.direct, 16, 0)
				if buckets > 1 {
					k := l.direct.Keys(reservation.One(item))
					for b, want := range []int64{6, 5, 5} { // 3+3+3, then 7 as 3+2+2
						if got, _ := l.Direct.Get(ctx, k.Bucket(b)).Int64(); got != want {
							t.Fatalf("bucket %d holds %d, want %d", b, got, want)
						}
					}
				}
			})
		})
	}
}

// A restock of an item Redis does not hold yet adds nothing there and
// sets no marker; the warm-up then loads MySQL's figure, which includes it
// (its last restock is this one), and records so beside the stock key, so
// the same restock after the warm-up does not add it a second time. A
// warm-up whose figure does not include it (read before the restock
// committed) leaves it to the restock's own step, which then adds it once.
func TestRestockBeforeWarmup(t *testing.T) {
	t.Parallel()
	for _, included := range []bool{true, false} {
		for _, buckets := range []int{1, 3} {
			t.Run(fmt.Sprintf("included=%v/buckets=%d", included, buckets), func(t *testing.T) {
				t.Parallel()
				rdb, prefix := redistest.New(t)
				s := stockredis.New(rdb, prefix)
				ctx := context.Background()
				if buckets > 1 {
					// The bucket layout comes first, as the warm-up writes it.
					warm(t, s, 0, buckets)
					for b := range buckets {
						rdb.Del(ctx, s.Keys(reservation.One(item)).Bucket(b))
					}
				}
				res, err := s.Stock.Restock(ctx, reservation.One(item), 5, 4)
				if err != nil || res.Warmed || res.Added != 0 {
					t.Fatalf("restock of a cold item: %+v %v, want nothing added", res, err)
				}
				db := &figure{stock: 14, last: 5}
				if !included {
					db = &figure{stock: 10, last: 4}
				}
				if _, err := s.Stock.WarmupFrom(ctx, reservation.One(item), buckets, time.Hour, db); err != nil {
					t.Fatal(err)
				}
				if db.marked != db.last {
					t.Fatalf("restocks up to %d recorded as warmed, want up to %d", db.marked, db.last)
				}
				res, err = s.Stock.Restock(ctx, reservation.One(item), 5, 4)
				wantAdded := int64(4)
				if included {
					wantAdded = 0
				}
				if err != nil || !res.Warmed || res.Added != wantAdded {
					t.Fatalf("the same restock after the warm-up: %+v %v, want %d added", res, err, wantAdded)
				}
				if res, err := s.Stock.Restock(ctx, reservation.One(item), 5, 4); err != nil || res.Added != 0 {
					t.Fatalf("the restock once more: %+v %v, want nothing added", res, err)
				}
				wantStock(t, s, 14, 0)
			})
		}
	}
}

// figure is MySQL as a warm-up reads it: a fixed stock and last restock.
type figure struct {
	stock, last, marked int64
}

// WarmupStock: these tests commit no order, so none of the pending ones is
// committed.
func (f *figure) WarmupStock(context.Context, int64, []string) (int64, int64, []string, error) {
	return f.stock, f.last, nil, nil
}

func (f *figure) MarkRestocksWarmed(_ context.Context, _ int64, upTo int64) error {
	f.marked = upTo
	return nil
}

// RestocksBetween: these tests never race two warm-ups of a bucketed item.
func (f *figure) RestocksBetween(context.Context, int64, int64, int64, int) ([]int64, []int64, error) {
	return nil, nil, nil
}

// The warm-up's answer is lost (the script that writes the stock key, or a
// bucket, from MySQL's figure ran): a restock whose own step had found no
// stock key (so did nothing) and that the figure includes must not be
// added by its retry, nor by the warm-up's retry; a later restock still
// adds its units once. On one node and on the cluster.
func TestLostReplyWarmupCarriesRestock(t *testing.T) {
	for _, buckets := range []int{1, 3} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) {
			t.Parallel()
			forBoth(t, func(t *testing.T, l lossy) {
				ctx := context.Background()
				if res, err := l.via.Stock.Restock(ctx, reservation.One(item), 5, 4); err != nil || res.Warmed || res.Added != 0 {
					t.Fatalf("restock of a cold item: %+v %v, want nothing added", res, err)
				}
				db := &figure{stock: 14, last: 5}
				script := "warmup"
				if buckets > 1 {
					script = "bucket_set"
				}
				l.LoseNext(script)
				_, err := l.via.Stock.WarmupFrom(ctx, reservation.One(item), buckets, time.Hour, db)
				mustBeUnknown(t, l, script, err)
				// On the cluster every node's proxy was armed: run each
				// step again, as a client would, until it answers.
				retry := func(what string, f func() error) {
					t.Helper()
					for attempt := 0; ; attempt++ {
						err := f()
						if err == nil {
							return
						}
						if !stockredis.MayHaveRun(err) || attempt > len(l.Proxies) {
							t.Fatalf("%s: %v", what, err)
						}
					}
				}
				retry("the restock's retry", func() error { _, err := l.via.Stock.Restock(ctx, reservation.One(item), 5, 4); return err })
				if snap := snapshot(t, l.direct); snap.Stock > 14 {
					t.Fatalf("Redis stock %d after the restock's retry, MySQL 14", snap.Stock)
				}
				retry("the warm-up's retry", func() error {
					_, err := l.via.Stock.WarmupFrom(ctx, reservation.One(item), buckets, time.Hour, db)
					return err
				})
				retry("the restock once more", func() error {
					res, err := l.via.Stock.Restock(ctx, reservation.One(item), 5, 4)
					if err == nil && (res.Added != 0 || !res.Warmed) {
						t.Fatalf("the restock after the warm-up: %+v, want nothing added", res)
					}
					return err
				})
				wantStock(t, l.direct, 14, 0)
				if db.marked != 5 {
					t.Fatalf("restocks up to %d recorded as warmed, want up to 5", db.marked)
				}
				retry("a later restock", func() error { _, err := l.via.Stock.Restock(ctx, reservation.One(item), 6, 3); return err })
				wantStock(t, l.direct, 17, 0)
			})
		})
	}
}
