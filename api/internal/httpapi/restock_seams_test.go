package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/reconcile"
)

// restockSeams is two API instances over one MySQL and one Redis key
// prefix: cut reaches Redis through a fault proxy, direct does not.
type restockSeams struct {
	ts          *testServer
	p           redistest.Proxied
	direct      *stockredis.Store
	cut, plain  string
	item, sale  int64
	mysqlStock  func() int64
	redisUnits  func() int64
	restockVia  func(url, key string, qty int64) response
	warmVia     func(url string) response
	wantNoDrift func()
}

func newRestockSeams(t *testing.T, stock int64, buckets int) *restockSeams {
	t.Helper()
	ctx := context.Background()
	ts := newTestServer(t)
	p := redistest.NewProxied(t, false, "restock", "warmup", "warmup_buckets", "bucket_set")
	s := &restockSeams{ts: ts, p: p, direct: stockredis.New(p.Direct, p.Prefix)}
	via := ts.service(t, nil)
	useStore(via, stockredis.New(p.Client(t), p.Prefix))
	s.cut = ts.serve(t, via, ts.checkers(nil))
	plain := ts.service(t, nil)
	useStore(plain, s.direct)
	s.plain = ts.serve(t, plain, ts.checkers(nil))

	s.item = ts.newItem(t, stock)
	body := fmt.Sprintf(`{"item_id":%d,"starts_at":%q,"ends_at":%q,"per_user_limit":1,"stock_buckets":%d}`, s.item,
		time.Now().Add(-time.Minute).Format(time.RFC3339Nano), time.Now().Add(time.Hour).Format(time.RFC3339Nano), buckets)
	r := ts.do(t, ts.url, request{method: "POST", path: "/admin/v1/activities", token: adminToken(t), body: body})
	if r.status != http.StatusCreated {
		t.Fatalf("create activity: %d %s", r.status, r.body)
	}
	var a httpapi.ActivityView
	r.decode(t, &a)
	s.sale = a.ActivityID
	s.mysqlStock = func() int64 {
		n, err := ts.db.Activities.ItemStock(ctx, s.item)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	s.redisUnits = func() int64 {
		snap, err := s.direct.Stock.Stock(ctx, reservation.One(s.item))
		if err != nil {
			t.Fatal(err)
		}
		return snap.Stock + snap.Inflight
	}
	s.restockVia = func(url, key string, qty int64) response {
		return ts.restock(t, url, s.item, key, fmt.Sprintf(`{"quantity":%d}`, qty))
	}
	s.warmVia = func(url string) response {
		return ts.do(t, url, request{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/warmup", s.sale), token: adminToken(t)})
	}
	s.wantNoDrift = func() { noDrift(t, s.direct, ts.db, s.item) }
	return s
}

// cutRedis makes the cut instance's Redis unreachable for the rest of the
// test: a script sent through it never runs.
func (s *restockSeams) cutRedis() {
	for _, x := range s.p.Proxies {
		x.Cut(time.Hour)
	}
}

// wantUnits fails unless Redis (stock plus in flight) holds what MySQL
// holds, and MySQL holds want.
func (s *restockSeams) wantUnits(t *testing.T, when string, want int64) {
	t.Helper()
	if db, redis := s.mysqlStock(), s.redisUnits(); db != want || redis != want {
		t.Fatalf("%s: MySQL %d, Redis %d (stock + in flight), want both %d", when, db, redis, want)
	}
}

func forBuckets(t *testing.T, f func(t *testing.T, buckets int)) {
	for _, b := range []int{1, 3} {
		t.Run(fmt.Sprintf("buckets=%d", b), func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// Issue 27, item 1, exactly: a restock of an item whose stock is not in
// Redis yet answers 503 (its Redis step never ran: the instance cannot
// reach Redis), a warm-up then loads MySQL's stock, the restock included,
// and the operator's retry with the same key must add nothing more.
func TestRestockNotRunThenWarmupThenRetry(t *testing.T) {
	t.Parallel()
	forBuckets(t, func(t *testing.T, buckets int) {
		s := newRestockSeams(t, 10, buckets)
		s.cutRedis()
		wantError(t, s.restockVia(s.cut, "r1", 4), 503, "UNAVAILABLE")
		if r := s.warmVia(s.plain); r.status != 200 {
			t.Fatalf("warm-up: %d %s", r.status, r.body)
		}
		s.wantUnits(t, "after the warm-up", 14)
		wantRestock(t, s.restockVia(s.plain, "r1", 4), 4, true, 14, ptr(14))
		s.wantUnits(t, "after the retry", 14)
		s.wantNoDrift()
	})
}

// The same with the reconciler's repair in place of the operator's retry:
// it finishes the restocks whose Redis step is not recorded, and must not
// add the one the warm-up carried.
func TestRestockNotRunThenWarmupThenRepair(t *testing.T) {
	t.Parallel()
	forBuckets(t, func(t *testing.T, buckets int) {
		s := newRestockSeams(t, 10, buckets)
		s.cutRedis()
		wantError(t, s.restockVia(s.cut, "r1", 4), 503, "UNAVAILABLE")
		if r := s.warmVia(s.plain); r.status != 200 {
			t.Fatalf("warm-up: %d %s", r.status, r.body)
		}
		repair(t, s.p.Direct, s.direct, s.p.Prefix, s.ts.db, s.item)
		s.wantUnits(t, "after the repair", 14)
		wantRestock(t, s.restockVia(s.plain, "r1", 4), 4, true, 14, ptr(14))
		s.wantUnits(t, "after the retry", 14)
		s.wantNoDrift()
	})
}

// The warm-up's own answer is lost (its script ran): it answers 503, and
// neither the restock's retry nor the warm-up's retry adds the restock a
// second time.
func TestRestockThenWarmupAnswerLost(t *testing.T) {
	t.Parallel()
	forBuckets(t, func(t *testing.T, buckets int) {
		s := newRestockSeams(t, 10, buckets)
		// The instance that restocked died right after MySQL's commit.
		if _, _, err := s.ts.db.Restocks.Restock(context.Background(), s.item, "r1", 4); err != nil {
			t.Fatal(err)
		}
		script := "warmup"
		if buckets > 1 {
			script = "bucket_set" // the script that writes a bucket from MySQL's figure
		}
		s.p.LoseNext(script)
		wantError(t, s.warmVia(s.cut), 503, "UNAVAILABLE")
		if s.p.Lost() != 1 {
			t.Fatalf("%d answers lost, want 1", s.p.Lost())
		}
		// The restock's retry first (a bucketed item may still miss the
		// buckets the warm-up did not reach), then the warm-up's, then the
		// restock's once more.
		if r := s.restockVia(s.cut, "r1", 4); r.status != 200 {
			t.Fatalf("the restock's retry: %d %s", r.status, r.body)
		}
		if n := s.redisUnits(); n > 14 || (buckets == 1 && n != 14) {
			t.Fatalf("Redis holds %d units after the restock's retry, want 14 (at most 14 while buckets are missing)", n)
		}
		if r := s.warmVia(s.cut); r.status != 200 {
			t.Fatalf("the warm-up again: %d %s", r.status, r.body)
		}
		wantRestock(t, s.restockVia(s.cut, "r1", 4), 4, true, 14, ptr(14))
		s.wantUnits(t, "after the retries", 14)
		wantRestock(t, s.restockVia(s.cut, "r2", 3), 3, false, 17, ptr(17))
		s.wantUnits(t, "after a restock of the warmed item", 17)
		s.wantNoDrift()
	})
}

// repair runs the reconciler's repair on item under the reconcile lock, as
// `reconciler --repair` and the consumer's heal do; rdb is the client store
// runs on.
func repair(t *testing.T, rdb redis.UniversalClient, store *stockredis.Store, prefix string, db *mysqltest.DB, item int64) reconcile.ItemReport {
	t.Helper()
	ctx := context.Background()
	l, err := lock.New(rdb, lock.Options{Prefix: prefix}).TryLock(ctx, reconcile.LockName)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	c := &reconcile.Checker{Stock: store.Reconciler, DB: reconcile.DB{Reads: db.Reconcile, Restocks: db.Restocks, OrderLookup: db.Orders,
		Items: db.Activities, Pinger: db.DB}, Log: slog.New(slog.DiscardHandler), Recheck: 50 * time.Millisecond, Warmer: store.Stock}
	targets, err := c.Targets(ctx, reconcile.Selection{Items: []int64{item}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.Run(ctx, targets, reconcile.CheckAndRepair, l)
	if err != nil || len(rep.Items) != 1 {
		t.Fatalf("repair: %+v %v", rep, err)
	}
	return rep.Items[0]
}

// A warm-up reads MySQL's stock, then a restock commits and runs its Redis
// step, then the warm-up writes the stock it read: the restock is not in
// that figure, so its units must still reach Redis (by its retry), once.
// Cold: the restock's step finds no stock key. Warm: the item's Redis
// stock is above MySQL's (drift), so the warm-up lowers it, over the
// restock's units.
func TestWarmupReadBeforeRestockCommitted(t *testing.T) {
	t.Parallel()
	for _, warm := range []bool{false, true} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			t.Parallel()
			forBuckets(t, func(t *testing.T, buckets int) {
				ctx := context.Background()
				s := newRestockSeams(t, 10, buckets)
				if warm {
					if r := s.warmVia(s.plain); r.status != 200 {
						t.Fatalf("warm-up: %d %s", r.status, r.body)
					}
					// Two units too many in Redis (a drift the warm-up lowers).
					k := s.direct.Keys(reservation.One(s.item))
					key := k.Stock()
					if buckets > 1 {
						key = k.Bucket(0)
					}
					if err := s.p.Direct.IncrBy(ctx, key, 2).Err(); err != nil {
						t.Fatal(err)
					}
				}
				db := &readThen{Restocks: s.ts.db.Restocks, then: func() {
					if r := s.restockVia(s.plain, "r1", 4); r.status != 200 {
						t.Errorf("restock: %d %s", r.status, r.body)
					}
				}}
				if _, err := s.direct.Stock.WarmupFrom(ctx, reservation.One(s.item), buckets, time.Hour, db); err != nil {
					t.Fatal(err)
				}
				if n := s.redisUnits(); n > 14 {
					t.Fatalf("Redis holds %d units after the warm-up, MySQL 14", n)
				}
				wantRestock(t, s.restockVia(s.plain, "r1", 4), 4, true, 14, ptr(14))
				s.wantUnits(t, "after the retry", 14)
				s.wantNoDrift()
			})
		})
	}
}

// readThen is MySQL as a warm-up reads it, running then once right after
// the warm-up's first read.
type readThen struct {
	*orderdb.Restocks
	then func()
	once sync.Once
}

func (r *readThen) WarmupStock(ctx context.Context, item int64, pending []string) (int64, int64, []string, error) {
	stock, last, committed, err := r.Restocks.WarmupStock(ctx, item, pending)
	r.once.Do(r.then)
	return stock, last, committed, err
}
