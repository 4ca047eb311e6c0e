package stockredis_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// A sale of three items whose first is item (the tag) and the others
// item+1, item+2.
var sizes = []reservation.Item{reservation.In(item, item), reservation.In(item, item+1), reservation.In(item, item+2)}

func warmSizes(t *testing.T, s *stockredis.Store, stocks ...int64) {
	t.Helper()
	for i, it := range sizes {
		if _, err := s.Stock.Warmup(context.Background(), it, time.Hour, func(context.Context) (int64, error) { return stocks[i], nil }); err != nil {
			t.Fatal(err)
		}
	}
}

// sizedRes is res for an order of size it.
func sizedRes(it reservation.Item, user int64, key string, qty int) reservation.Reservation {
	r := res(user, key, qty)
	r.ItemID, r.Tag, r.OrderNo = it.ID, it.Tag, gen.Next(it.Tag)
	return r
}

// newRedis is a Redis of the test's own prefix: the cluster's or the single
// node's.
func newRedis(t *testing.T, cluster bool) (redis.UniversalClient, string) {
	if cluster {
		return redistest.NewCluster(t)
	}
	return redistest.New(t)
}

// onSingleAndCluster runs f, in parallel, on a Store of the test's own
// prefix on the single node and on the cluster.
func onSingleAndCluster(t *testing.T, f func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, cluster bool)) {
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "cluster"}[cluster], func(t *testing.T) {
			t.Parallel()
			rdb, prefix := newRedis(t, cluster)
			f(t, stockredis.New(rdb, prefix), rdb, cluster)
		})
	}
}

func sizeStock(t *testing.T, s *stockredis.Store, it reservation.Item) reservation.Snapshot {
	t.Helper()
	snap, err := s.Stock.Stock(context.Background(), it)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// One reserve sees the buyer's quota in the sale and the chosen size's
// stock at once, on a single node and on the cluster (where a CROSSSLOT
// error would fail it): a second size for the same buyer is refused, a
// size sells out while the others sell on, and every key of the sale maps
// to the first item's slot.
func TestSizedSaleReserve(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, cluster bool) {
		ctx := context.Background()
		warmSizes(t, s, 1, 2, 3)

		first := sizedRes(sizes[1], 1, "k1", 1)
		if _, err := s.Reservations.Reserve(ctx, first); err != nil {
			t.Fatal(err)
		}
		// The same buyer, another size, another key.
		if _, err := s.Reservations.Reserve(ctx, sizedRes(sizes[2], 1, "k2", 1)); !errors.Is(err, order.ErrAlreadyPurchased) {
			t.Fatalf("a second size for the same buyer: %v, want ALREADY_PURCHASED", err)
		}
		// The same key replayed for another size finds the first order.
		if got, err := s.Reservations.Reserve(ctx, sizedRes(sizes[2], 1, "k1", 1)); err != nil || !got.Duplicate || got.OrderNo != first.OrderNo {
			t.Fatalf("the key replayed for another size: %+v %v, want the first order", got, err)
		}
		// Size 0 has one unit: the next buyer takes it, the one after
		// hears SOLD_OUT for it and still buys size 2.
		if _, err := s.Reservations.Reserve(ctx, sizedRes(sizes[0], 2, "k", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reservations.Reserve(ctx, sizedRes(sizes[0], 3, "k", 1)); !errors.Is(err, order.ErrSoldOut) {
			t.Fatalf("a sold-out size: %v, want SOLD_OUT", err)
		}
		if _, err := s.Reservations.Reserve(ctx, sizedRes(sizes[2], 3, "k", 1)); err != nil {
			t.Fatalf("another size after one sold out: %v", err)
		}
		for i, want := range []struct{ stock, inflight int64 }{{0, 1}, {1, 1}, {2, 1}} {
			if snap := sizeStock(t, s, sizes[i]); snap.Stock != want.stock || snap.Inflight != want.inflight {
				t.Fatalf("size %d: %+v, want stock %d in flight %d", i, snap, want.stock, want.inflight)
			}
		}
		if !cluster {
			return
		}
		slot := func(key string) int64 {
			n, err := rdb.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		want := slot(s.Keys(sizes[0]).Stock())
		for _, it := range sizes {
			k := s.Keys(it)
			for _, key := range []string{k.Stock(), k.Inflight(), k.Pending(), k.Reservation(first.OrderNo), k.Quota(7, "1"), k.Idem("1", "k1")} {
				if got := slot(key); got != want {
					t.Fatalf("key %s is on slot %d, the sale's first item on %d", key, got, want)
				}
			}
		}
	})
}

// A sale of one item keeps every key name it had before sales had sizes:
// the keys a running sale wrote before the upgrade are the ones read after.
func TestOneItemSaleKeepsItsKeyNames(t *testing.T) {
	k := stockredis.New(nil, "sk").Keys(reservation.One(5))
	for got, want := range map[string]string{
		k.Stock():                "sk:{i5}:stock",
		k.Inflight():             "sk:{i5}:inflight",
		k.Pending():              "sk:{i5}:pending",
		k.Reservation("01ABC-5"): "sk:{i5}:r:01ABC-5",
		k.Quota(9, "12"):         "sk:{i5}:q:9:12",
		k.Idem("12", "key-1"):    "sk:{i5}:k:12:key-1",
		k.Bucket(2):              "sk:{i5b2}:stock",
		k.BucketMarker():         "sk:{i5}:buckets",
		k.Fence():                "sk:{i5}:fence",
		stockredis.New(nil, "sk").Keys(reservation.In(5, 7)).Stock(): "sk:{i5}:7:stock",
	} {
		if got != want {
			t.Errorf("key %q, want %q", got, want)
		}
	}
}

// A reserve for a size whose answer is lost ran once; the API's way out
// (release from RESERVED, forgetting the key) gives the unit back to that
// size, frees the buyer's quota in the sale, and leaves the other sizes as
// they were; the same key then buys any size.
func TestLostReplyReserveOfASize(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		ctx := context.Background()
		warmSizes(t, l.direct, 2, 2, 2)
		r := sizedRes(sizes[1], 1, "k1", 1)
		l.LoseNext("reserve")
		_, err := l.via.Reservations.Reserve(ctx, r)
		mustBeUnknown(t, l, "reserve", err)
		if snap := sizeStock(t, l.direct, sizes[1]); snap.Stock != 1 || snap.Inflight != 1 {
			t.Fatalf("size 1 after the lost answer: %+v, want the script to have run once", snap)
		}
		if _, err := l.via.Reservations.Release(ctx, ref(r), reservation.ReleaseOptions{Reason: order.ReasonReserveFailed,
			From: []reservation.State{reservation.StateReserved}, FreeKey: true}); err != nil {
			t.Fatal(err)
		}
		for i := range sizes {
			if snap := sizeStock(t, l.direct, sizes[i]); snap.Stock != 2 || snap.Inflight != 0 {
				t.Fatalf("size %d after the release: %+v, want stock 2, nothing in flight", i, snap)
			}
		}
		again := sizedRes(sizes[2], 1, "k1", 1)
		if got, err := l.via.Reservations.Reserve(ctx, again); err != nil || got.Duplicate || got.OrderNo != again.OrderNo {
			t.Fatalf("the same key after the 503, another size: %+v, %v; want a new reservation", got, err)
		}
		if st := state(t, l.direct, r.OrderNo); st != reservation.StateReleased {
			t.Fatalf("the first reservation is %s, want RELEASED", st)
		}
	})
}

// The warmed-items set names a size with its sale's tag, so the sweep finds
// its pending list.
func TestWarmedItemsNameTheirTag(t *testing.T) {
	rdb, prefix := redistest.New(t)
	s := stockredis.New(rdb, prefix)
	warmSizes(t, s, 1, 1, 1)
	got, err := s.Stock.WarmedItems(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[reservation.Item]bool{}
	for _, it := range sizes {
		want[it] = true
	}
	for _, it := range got {
		if !want[it] {
			t.Fatalf("warmed items %v, want %v", got, sizes)
		}
		delete(want, it)
	}
	if len(want) != 0 {
		t.Fatalf("warmed items %v lack %v", got, want)
	}
}

// Concurrent orders for the sizes of one sale are taken in shared runs of
// the reserve script (one run for every size), each order exactly as if
// it ran alone: 400 buyers over three sizes of 20 units, one in three also
// trying a second size with another key at once. Every size sells exactly
// its 20, no buyer holds two orders, each replay finds its order, and the
// runs of the script are far fewer than the orders.
func TestReserveBatchesTheSizesOfASale(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, cluster bool) {
		warmSizes(t, s, 20, 20, 20)
		var evals atomic.Int64
		rdb.AddHook(evalCounter{n: &evals})
		var mu sync.Mutex
		holders := map[string]int{} // user -> orders held
		var wg sync.WaitGroup
		for u := range 400 {
			wg.Go(func() {
				ctx := context.Background()
				tries := []reservation.Reservation{sizedRes(sizes[u%3], int64(1000+u), "a", 1)}
				if u%3 == 0 {
					tries = append(tries, sizedRes(sizes[(u+1)%3], int64(1000+u), "b", 1))
				}
				var inner sync.WaitGroup
				for _, r := range tries {
					inner.Go(func() {
						got, err := s.Reservations.Reserve(ctx, r)
						switch {
						case err == nil:
							mu.Lock()
							holders[r.UserID]++
							mu.Unlock()
							again := r
							again.OrderNo = gen.Next(r.Tag)
							if replay, err := s.Reservations.Reserve(ctx, again); err != nil || !replay.Duplicate || replay.OrderNo != got.OrderNo {
								t.Errorf("buyer %s's replay: %+v %v, want %s", r.UserID, replay, err, got.OrderNo)
							}
						case errors.Is(err, order.ErrSoldOut), errors.Is(err, order.ErrAlreadyPurchased):
						default:
							t.Errorf("buyer %s: %v", r.UserID, err)
						}
					})
				}
				inner.Wait()
			})
		}
		wg.Wait()
		for user, n := range holders {
			if n > 1 {
				t.Fatalf("buyer %s holds %d orders", user, n)
			}
		}
		if len(holders) != 60 {
			t.Fatalf("%d buyers hold an order, want 60", len(holders))
		}
		for i := range sizes {
			if snap := sizeStock(t, s, sizes[i]); snap.Stock != 0 || snap.Inflight != 20 {
				t.Fatalf("size %d: %+v, want sold out with 20 in flight", i, snap)
			}
		}
		calls := int64(400 + 134 + 60) // first tries, second sizes, replays
		if evals.Load() >= calls/2 {
			t.Fatalf("%d script runs for %d reserves: the sizes' orders were not batched", evals.Load(), calls)
		}
		t.Logf("%d script runs for %d reserves", evals.Load(), calls)
	})
}

// evalCounter counts the scripts a client sends.
type evalCounter struct{ n *atomic.Int64 }

func (evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
