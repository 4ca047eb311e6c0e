package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// restocked is the answer to a restock.
type restocked struct {
	Code       int
	RestockID  int64  `json:"restock_id"`
	Quantity   int64  `json:"quantity"`
	Replayed   bool   `json:"replayed"`
	DBStock    int64  `json:"db_stock"`
	RedisStock *int64 `json:"redis_stock"`
}

func restock(t *testing.T, api *pipelinetest.API, item int64, key string, qty int64) restocked {
	t.Helper()
	var r restocked
	code, err := api.Do("POST", fmt.Sprintf("/admin/v1/items/%d/restock", item), 1, auth.RoleAdmin,
		map[string]string{"Idempotency-Key": key}, map[string]any{"quantity": qty}, &r)
	if err != nil {
		t.Errorf("restock %s: %v", key, err)
	}
	r.Code = code
	return r
}

// restockDuringSale runs a flash sale with more buyers than units while
// restocks land (each sent twice at once with its key, as a client that
// retries would), then checks that every unit sold exactly once: initial
// plus restocked units became orders, nobody holds two, Redis equals MySQL,
// and the reconciler finds nothing to say.
func restockDuringSale(t *testing.T, buckets int, cluster bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3, RedisCluster: cluster})
	api := p.StartAPI()
	p.StartConsumer()
	const initial, restocks, each = 60, 6, 15
	sale := api.CreateBucketedSale(initial, 1, buckets)

	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := map[int64]int{}
	accepted := map[string]int64{}
	codes := map[string]int{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		a, c := crowd(t, api, sale.ActivityID, userRange(1, 600), 100)
		mu.Lock()
		defer mu.Unlock()
		for no, u := range a {
			accepted[no] = u
		}
		for k, n := range c {
			codes[k] += n
		}
	}()
	for i := range restocks {
		time.Sleep(20 * time.Millisecond) // spread the restocks over the sale
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := restock(t, api, sale.ItemID, fmt.Sprintf("restock-%d", i), each)
				if r.Code != 200 || r.Quantity != each {
					t.Errorf("restock %d: %+v, want 200 with quantity %d", i, r, each)
				}
				mu.Lock()
				defer mu.Unlock()
				if !r.Replayed {
					firsts[r.RestockID]++
				}
			}()
		}
	}
	wg.Wait()
	// Buyers who come after the last restock answered take what is left.
	a, c := crowd(t, api, sale.ActivityID, userRange(1001, 400), 100)
	for no, u := range a {
		accepted[no] = u
	}
	for k, n := range c {
		codes[k] += n
	}

	if len(firsts) != restocks {
		t.Fatalf("restocks applied as new: %v, want %d restock ids, each once", firsts, restocks)
	}
	for id, n := range firsts {
		if n != 1 {
			t.Fatalf("restock %d answered as new %d times, want once", id, n)
		}
	}
	total := int64(initial + restocks*each)
	if int64(len(accepted)) != total || codes["SOLD_OUT"] != 1000-int(total) {
		t.Fatalf("accepted %d, refused %v; want %d accepted (initial + restocked) and the rest SOLD_OUT", len(accepted), codes, total)
	}
	t.Logf("sale over: %d accepted, refused %v", len(accepted), codes)
	final := p.WaitFinal(accepted, 60*time.Second)
	if got := countStatus(final); got[order.Created] != int(total) {
		t.Fatalf("statuses %v, want %d CREATED", got, total)
	}
	p.WaitDrained(sale.ItemID, 10*time.Second)
	sale.Stock = total
	inv := p.Check(sale)
	if inv.DBStock != 0 || inv.RedisStock != 0 || inv.LiveUnits != total {
		t.Fatalf("after the sale: %+v, want every unit sold", inv)
	}
	if n := p.Count("SELECT COUNT(*) FROM restocks WHERE item_id = ? AND applied_at IS NOT NULL", sale.ItemID); n != restocks {
		t.Fatalf("%d restocks recorded as applied, want %d", n, restocks)
	}
	t.Logf("orders final, stores agree")
	if res := p.Reconcile("--item", fmt.Sprint(sale.ItemID)); res.Code != 0 {
		t.Fatalf("reconciler exit %d after the sale:\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	t.Logf("reconciler: no drift")
}

func TestRestockDuringFlashSale(t *testing.T) {
	t.Parallel()
	restockDuringSale(t, 1, false)
}

func TestRestockDuringFlashSaleBucketed(t *testing.T) {
	t.Parallel()
	restockDuringSale(t, 3, false)
}

// The same on the 3-master Redis Cluster: the buckets' shares and their
// markers live on other masters than the item's own keys.
func TestRestockDuringFlashSaleBucketedOnCluster(t *testing.T) {
	t.Parallel()
	restockDuringSale(t, 3, true)
}

// Issue 27, item 1, with the real programs: an api instance that cannot
// reach Redis restocks an item before its sale is warmed (503: MySQL has
// the units, its Redis step never ran); the consumer's scheduled warm-up
// then loads MySQL's stock, the restock included; the operator's retry
// with the same key, through another instance, adds nothing more; the
// crowd buys exactly the initial and restocked units, and the reconciler
// agrees.
func TestRestockNotRunThenScheduledWarmupThenRetry(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 2})
	api := p.StartAPI()
	link := proxytest.Start(t, redistest.Addr(), proxytest.RESP)
	cut := p.StartAPI("SECKILL_REDIS_ADDR=" + link.Addr())
	link.Cut(time.Hour) // this instance's Redis is gone from here on
	p.StartConsumer("SECKILL_WARMUP_LEAD=2s")
	const stock, added = 20, 5
	var item struct {
		ItemID int64 `json:"item_id"`
	}
	if code, err := api.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil, map[string]any{"name": "drop", "stock": stock}, &item); err != nil || code != 201 {
		t.Fatalf("create item: %d %v", code, err)
	}
	starts := time.Now().UTC().Add(4 * time.Second).Truncate(time.Millisecond)
	var act struct {
		ActivityID int64 `json:"activity_id"`
	}
	if code, err := api.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil, map[string]any{"item_id": item.ItemID,
		"starts_at": starts, "ends_at": starts.Add(time.Hour)}, &act); err != nil || code != 201 {
		t.Fatalf("create activity: %d %v", code, err)
	}
	if r := restock(t, cut, item.ItemID, "r1", added); r.Code != 503 {
		t.Fatalf("restock through the instance without Redis: %+v, want 503", r)
	}
	waittest.UntilEvery(t, 30*time.Second, 10*time.Millisecond, "the consumer to warm the activity up", func() bool {
		snap, err := p.Store.Stock.Stock(context.Background(), reservation.One(item.ItemID))
		return err == nil && snap.Warmed
	})
	r := restock(t, api, item.ItemID, "r1", added)
	if r.Code != 200 || !r.Replayed || r.DBStock != stock+added || r.RedisStock == nil || *r.RedisStock != stock+added {
		t.Fatalf("the retry with the same key: %+v, want 200 replayed, %d in MySQL and Redis", r, stock+added)
	}
	waittest.Until(t, 10*time.Second, "the sale to start", func() bool { return time.Now().After(starts.Add(100 * time.Millisecond)) })
	const total = stock + added
	accepted, codes := crowd(t, api, act.ActivityID, userRange(1, 60), 30)
	if len(accepted) != total || codes["SOLD_OUT"] != 60-total {
		t.Fatalf("accepted %d, refused %v; want %d accepted (initial + restocked, once), the rest SOLD_OUT", len(accepted), codes, total)
	}
	final := p.WaitFinal(accepted, 60*time.Second)
	if got := countStatus(final); got[order.Created] != total {
		t.Fatalf("statuses %v, want %d CREATED", got, total)
	}
	p.WaitDrained(item.ItemID, 10*time.Second)
	sale := pipelinetest.Sale{ItemID: item.ItemID, ActivityID: act.ActivityID, Stock: total}
	if inv := p.Check(sale); inv.DBStock != 0 || inv.RedisStock != 0 || inv.LiveUnits != total {
		t.Fatalf("after the sale: %+v, want every unit sold once", inv)
	}
	if n := p.Count("SELECT COUNT(*) FROM restocks WHERE item_id = ? AND applied_at IS NULL", item.ItemID); n != 0 {
		t.Fatalf("%d restocks pending, want none", n)
	}
	if res := p.Reconcile("--item", fmt.Sprint(item.ItemID)); res.Code != 0 {
		t.Fatalf("reconciler exit %d after the sale:\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
}
