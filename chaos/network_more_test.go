//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// More lost Redis answers, for the scripts N5 and N6 do not cover: the
// bucket scripts, the lock scripts of the consumer's sweep, closer and
// data-loss watch, and the reconciler's repair scripts. Each answer is lost
// once through the proxies of network_test.go, on the single node and on
// the Redis Cluster.

// lockScript matches the lock script (lock_acquire, lock_renew,
// lock_release) run on the lock name of p's programs: its first key is
// <prefix>:lock:{name} (pkg/lock).
func lockScript(p *pipelinetest.Pipeline, script, name string) proxytest.Matcher {
	run := luaScript(script)
	key := p.Prefix + ":lock:{" + name + "}"
	return func(r proxytest.Request) bool { return run(r) && len(r.Args) > 3 && r.Args[3] == key }
}

// wantRedisStock fails the test unless the sale's Redis stock (for a
// bucketed item, the sum of its buckets) is want.
func wantRedisStock(t *testing.T, p *pipelinetest.Pipeline, sale pipelinetest.Sale, want int64, when string) {
	t.Helper()
	snap, err := p.Store.Stock.Stock(context.Background(), reservation.One(sale.ItemID))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stock != want {
		t.Fatalf("%s: Redis stock %d, want %d", when, snap.Stock, want)
	}
}

// refusedUsers are the users the load saw answered 503.
func refusedUsers(l *load) []int64 {
	var out []int64
	for u, code := range l.byUser {
		if code == 503 {
			out = append(out, u)
		}
	}
	return out
}

// waitStatus waits until every order is in MySQL with status s.
func waitStatus(t *testing.T, p *pipelinetest.Pipeline, orders map[string]int64, s order.Status, within time.Duration) {
	t.Helper()
	nos := keys(orders)
	waittest.Until(t, within, fmt.Sprintf("%d orders to be %s", len(nos), s), func() bool {
		got, err := p.DB.Orders.Orders(context.Background(), nos)
		if err != nil || len(got) != len(nos) {
			return false
		}
		for _, o := range got {
			if o.Status != s {
				return false
			}
		}
		return true
	})
}

// N7. A bucketed sale (3 buckets), the api talking to Redis through
// proxies; a bucket script's answer is lost four times: bucket_take (the
// api answers 503 and the units are back in their bucket); bucket_give
// after a reserve refused for a buyer who holds an order (409; the give
// ran); bucket_give of the api's 503 path (the reserve answer is lost, then
// the answer to the release's give-back, and the release is repeated); and
// bucket_give of a buyer's cancel (200; the consumer's closer finishes the
// release and gives nothing twice). Redis stock is checked exactly after
// each, and every refused buyer buys with the same key.
func TestChaosNetRedisBucketRepliesLost(t *testing.T) {
	fault(t)
	bucketRepliesLost(t, false)
}

// N8. N7 on the Redis Cluster, whose buckets live on different masters.
func TestChaosNetRedisClusterBucketRepliesLost(t *testing.T) {
	fault(t)
	bucketRepliesLost(t, true)
}

func bucketRepliesLost(t *testing.T, cluster bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3, RedisCluster: cluster})
	rs, env := redisProxy(t, cluster)
	api := p.StartAPI(env)
	p.StartConsumer()
	logOnFailure(t, api.Proc, "release")
	sale := api.CreateBucketedSale(100, 1, 3)
	live := startLoad(api, sale, users(10001, 5), 0, 5).wait().accepted
	if len(live) != 5 || rs.Connections() == 0 {
		t.Fatalf("%d of 5 warm-up orders accepted, %d connections through the api's Redis proxies", len(live), rs.Connections())
	}
	held := func() int64 { return sale.Stock - int64(len(live)) }

	// bucket_take: the api cannot know whether units left the bucket.
	rs.loseOne(t, "bucket_take", luaScript("bucket_take"))
	l := startLoad(api, sale, users(1, 20), time.Second, 5)
	rs.WaitLost(t, 1, 30*time.Second)
	l.wait()
	if n := refusedHoldNothing(t, p, sale, l); n != 1 || len(l.accepted) != 19 {
		t.Fatalf("bucket_take answer lost: %d accepted, refused %v (network errors %d); want one 503", len(l.accepted), l.codes, l.neterrs)
	}
	live = merge(live, l.accepted)
	wantRedisStock(t, p, sale, held(), "after the lost bucket_take answer's 503")
	live = merge(live, retryAll(t, api, sale, refusedUsers(l)))

	// bucket_give after the reserve script refused: the buyer holds an order.
	var buyer int64
	var bought string
	for no, u := range l.accepted {
		buyer, bought = u, no
		break
	}
	rs.loseOne(t, "bucket_give", luaScript("bucket_give"))
	if pl, err := api.PlaceOrder(buyer, "another-key", sale.ActivityID, 1); err != nil || pl.Code != 409 || pl.Error != "ALREADY_PURCHASED" {
		t.Fatalf("user %d with a new key: %d %s (%v), want 409 ALREADY_PURCHASED", buyer, pl.Code, pl.Error, err)
	}
	rs.WaitLost(t, 2, 5*time.Second)
	wantRedisStock(t, p, sale, held(), "after the refused reserve's lost bucket_give answer")

	// The api's 503 path: the reserve answer is lost, so the api releases;
	// the answer to the release's give-back is lost too, and the release is
	// repeated (it finds RELEASED and gives again, which gives nothing).
	rs.loseOne(t, "reserve", luaScript("reserve"))
	rs.loseOne(t, "bucket_give", luaScript("bucket_give"))
	if pl, err := api.PlaceOrder(50001, "k50001", sale.ActivityID, 1); err != nil || pl.Code != 503 {
		t.Fatalf("reserve and give-back answers lost: %d %s (%v), want 503", pl.Code, pl.Error, err)
	}
	rs.WaitLost(t, 4, 5*time.Second)
	wantRedisStock(t, p, sale, held(), "after the 503 whose release's bucket_give answer was lost")
	live = merge(live, retryAll(t, api, sale, []int64{50001}))

	// A buyer cancels a CREATED order: the answer to its give-back is lost.
	p.WaitFinal(live, 30*time.Second)
	p.WaitDrained(sale.ItemID, 30*time.Second)
	rs.loseOne(t, "bucket_give", luaScript("bucket_give"))
	var body struct {
		Status string `json:"status"`
	}
	if code, err := api.Do("POST", "/api/v1/orders/"+bought+"/cancel", buyer, "", nil, nil, &body); err != nil || code != 200 || body.Status != string(order.Closed) {
		t.Fatalf("cancel of order %s: %d %q (%v), want 200 CLOSED", bought, code, body.Status, err)
	}
	rs.WaitLost(t, 5, 5*time.Second)
	delete(live, bought)
	wantRedisStock(t, p, sale, held(), "after the cancel whose bucket_give answer was lost")
	// MySQL records the release done (the consumer's closer finishes
	// releases the api could not confirm), and gives nothing twice.
	waittest.Until(t, 20*time.Second, "the cancelled order's release to be recorded", func() bool {
		var n int64
		p.DB.Gorm().Raw("SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'CLOSED' AND released_at IS NOT NULL", bought).Scan(&n)
		return n == 1
	})
	wantRedisStock(t, p, sale, held(), "after the cancelled order's release was finished")
	// The buyer's quota is free: a new key buys.
	pl, err := api.PlaceOrder(buyer, "after-cancel", sale.ActivityID, 1)
	if err != nil || pl.Code != 202 {
		t.Fatalf("user %d after the cancel: %d %s (%v), want 202", buyer, pl.Code, pl.Error, err)
	}
	live[pl.OrderNo] = buyer

	wantUnpublished(t, api, "released", 2)
	if rs.Lost() != 5 {
		t.Fatalf("%d answers lost, want 5", rs.Lost())
	}
	inv := settle(t, p, sale, merge(live, map[string]int64{bought: buyer}), 60*time.Second)
	if inv.LiveOrders != int64(len(live)) {
		t.Fatalf("live %d, want %d", inv.LiveOrders, len(live))
	}
}

// N9. The consumer talks to Redis through proxies, and the answer to each
// lock script it runs is lost once, during a sale with a 2 s payment
// window: the closer's acquire and release; the sweep's acquire and
// release while an api that died after reserving leaves a reservation
// stranded; the closer's renewal, in a pass that 200 ms of latency on each
// Redis answer makes last past a third of the lease; and the acquire and
// release of the reconcile lock by the data-loss watch's repair pass (its
// generation marker deleted by hand). Each lock is taken again afterwards
// (none stays held), no pass fails, no loss is counted, and every order
// ends CLOSED once with its stock back exactly once.
func TestChaosNetRedisLockRepliesLost(t *testing.T) {
	fault(t)
	lockRepliesLost(t, false)
}

// N10. N9 on the Redis Cluster.
func TestChaosNetRedisClusterLockRepliesLost(t *testing.T) {
	fault(t)
	lockRepliesLost(t, true)
}

// healMarker is the data-loss watch's generation marker of the pipeline
// (consumer/internal/redisloss.MarkerKey: under the key prefix).
func healMarker(p *pipelinetest.Pipeline) string { return p.Prefix + ":heal:generation" }

func lockRepliesLost(t *testing.T, cluster bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3, RedisCluster: cluster})
	rs, env := redisProxy(t, cluster)
	api := p.StartAPI()
	admin := pipelinetest.FreeAddr(t)
	consumer := p.StartConsumer(env, "SECKILL_ADMIN_ADDR="+admin, "SECKILL_SWEEP_AFTER=1s", "SECKILL_SWEEP_EVERY=250ms")
	logOnFailure(t, consumer, "lock")
	url := "http://" + admin + "/metrics"
	sale := api.CreateSaleWith(200, pipelinetest.SaleOptions{PerUserLimit: 1, PaymentWindow: 2 * time.Second})
	all := map[string]int64{}
	// takenAgain waits until the lock name is taken twice more, well
	// within its 15 s lease: a lost release or acquire answer left nothing
	// held (the closer tries every second, the sweep every 250 ms).
	takenAgain := func(name string) {
		t.Helper()
		taken := func() float64 {
			return pipelinetest.ScrapeMetrics(t, url).Value("seckill_lock_acquisitions_total", "lock", name)
		}
		before := taken()
		waittest.Until(t, 8*time.Second, "the "+name+" lock to be taken again", func() bool { return taken() >= before+2 })
	}

	// The closer's acquire and release answers, while unpaid orders come due.
	l := startLoad(api, sale, users(1, 20), 0, 20).wait()
	if len(l.accepted) != 20 {
		t.Fatalf("accepted %d of 20: %v", len(l.accepted), l.codes)
	}
	p.WaitFinal(l.accepted, 30*time.Second)
	if rs.Connections() == 0 {
		t.Fatal("no connection through the consumer's Redis proxies: it bypassed them")
	}
	rs.loseOne(t, "lock_acquire", lockScript(p, "lock_acquire", "closer"))
	rs.loseOne(t, "lock_release", lockScript(p, "lock_release", "closer"))
	rs.WaitLost(t, 2, 15*time.Second)
	takenAgain("closer")
	all = merge(all, l.accepted)

	// The sweep's acquire and release answers, a reservation stranded.
	dying := p.StartAPI("SECKILL_FAILPOINTS=api-after-reserve")
	rs.loseOne(t, "lock_acquire", lockScript(p, "lock_acquire", "sweep"))
	rs.loseOne(t, "lock_release", lockScript(p, "lock_release", "sweep"))
	if pl, err := dying.PlaceOrder(7777, "doomed", sale.ActivityID, 1); err == nil {
		t.Fatalf("the failpoint did not fire: %+v", pl)
	}
	<-dying.Done()
	rs.WaitLost(t, 4, 15*time.Second)
	takenAgain("sweep")
	// The sweep re-publishes the stranded reservation: the order reaches
	// MySQL (and the closer closes it).
	waittest.Until(t, 20*time.Second, "the stranded reservation to reach MySQL", func() bool {
		pl, err := api.PlaceOrder(7777, "doomed", sale.ActivityID, 1)
		if err != nil || pl.Code != 202 {
			return false
		}
		_, err = p.DB.Orders.Order(context.Background(), pl.OrderNo)
		if err == nil {
			all[pl.OrderNo] = 7777
		}
		return err == nil
	})

	// The closer's renewal answer, in a pass slowed by latency.
	l = startLoad(api, sale, users(201, 40), 0, 40).wait()
	if len(l.accepted) != 40 {
		t.Fatalf("accepted %d of 40: %v", len(l.accepted), l.codes)
	}
	p.WaitFinal(l.accepted, 30*time.Second)
	// 40 orders come due within a moment; the larger part of them is
	// closed in one pass, 400 ms of Redis round trip each: the pass lasts
	// past the watchdog's first renewal (a third of the 15 s lease).
	rs.Latency(200*time.Millisecond, 0)
	rs.loseOne(t, "lock_renew", lockScript(p, "lock_renew", "closer"))
	rs.WaitLost(t, 5, 40*time.Second)
	rs.Latency(0, 0)
	takenAgain("closer")
	all = merge(all, l.accepted)

	// The reconcile lock of the watch's repair pass.
	rs.loseOne(t, "lock_acquire", lockScript(p, "lock_acquire", "reconcile"))
	rs.loseOne(t, "lock_release", lockScript(p, "lock_release", "reconcile"))
	if err := p.Redis.Del(context.Background(), healMarker(p)).Err(); err != nil {
		t.Fatal(err)
	}
	rs.WaitLost(t, 7, 20*time.Second)
	heal := pipelinetest.ScrapeUntil(t, url, "a repair pass after the marker was deleted", func(s pipelinetest.Scrape) bool {
		return s.Value("seckill_heal_repair_passes_total", "outcome", "clean")+s.Value("seckill_heal_repair_passes_total", "outcome", "repaired") >= 1
	})
	if d, f := heal.Value("seckill_heal_detections_total", "reason", "marker"), heal.Value("seckill_heal_repair_passes_total", "outcome", "failed"); d < 1 || f != 0 {
		t.Fatalf("the watch's marker detections %v, failed repair passes %v; want a detection and no failed pass", d, f)
	}
	lockKey := p.Prefix + ":lock:{reconcile}"
	waittest.Until(t, 5*time.Second, "the reconcile lock to be free", func() bool {
		return p.Redis.Exists(context.Background(), lockKey).Val() == 0
	})

	if rs.Lost() != 7 {
		t.Fatalf("%d answers lost, want 7", rs.Lost())
	}
	waitStatus(t, p, all, order.Closed, 30*time.Second)
	inv := settle(t, p, sale, all, 60*time.Second)
	if inv.LiveOrders != 0 || inv.DBStock != sale.Stock {
		t.Fatalf("after every order was closed: live %d, MySQL stock %d of %d", inv.LiveOrders, inv.DBStock, sale.Stock)
	}
	m := pipelinetest.ScrapeMetrics(t, url)
	for _, c := range []struct {
		name string
		want float64
	}{
		{"seckill_lock_losses_total", 0},
		{"seckill_closer_errors_total", 0},
		{"seckill_sweep_errors_total", 0},
		{"seckill_closer_orders_closed_total", float64(len(all))},
		{"seckill_closer_releases_finished_total", 0},
	} {
		if got := m.Value(c.name); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

// N11. The reconciler runs with --repair through proxies against drift made
// by hand, and the answer of each repair script is lost once:
// reconcile_set_stock (Redis stock raised with SET), reconcile_restore_quota
// (a live order's quota key deleted), reconcile_remove_quota (a quota key
// naming an order that does not exist). The run exits 2 (it could not
// run: the outcome is unknown); the next exits 0 with every item "ok",
// nothing left to repair; Redis stock equals MySQL's exactly.
func TestChaosNetRedisRepairRepliesLost(t *testing.T) {
	fault(t)
	repairRepliesLost(t, false)
}

// N12. N11 on the Redis Cluster.
func TestChaosNetRedisClusterRepairRepliesLost(t *testing.T) {
	fault(t)
	repairRepliesLost(t, true)
}

func repairRepliesLost(t *testing.T, cluster bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3, RedisCluster: cluster})
	api := p.StartAPI()
	// The watch would repair drift it did not cause only after a
	// detection; it is off so that nothing but the reconciler writes.
	p.StartConsumer("SECKILL_HEAL_EVERY=off")
	sale := api.CreateSale(20, 1)
	l := startLoad(api, sale, users(1, 3), 0, 3).wait()
	if len(l.accepted) != 3 {
		t.Fatalf("accepted %d of 3: %v", len(l.accepted), l.codes)
	}
	settle(t, p, sale, l.accepted, 30*time.Second)
	var first string
	for no, u := range l.accepted {
		if u == 1 {
			first = no
		}
	}

	rs, env := redisProxy(t, cluster)
	reconcile := func(extra ...string) pipelinetest.RunResult {
		t.Helper()
		args := append([]string{"--item", fmt.Sprint(sale.ItemID), "--repair", "--recheck", "100ms"}, extra...)
		return p.StartArgs("reconciler", args, env).Wait(t, time.Minute)
	}
	ctx := context.Background()
	rdb, k := p.Redis, p.Store.Keys(reservation.One(sale.ItemID))
	stale := order.NewNumberGenerator().Next(sale.ItemID)
	for i, c := range []struct {
		script string
		drift  func() error
		fixed  func() bool
		// then is the verdict of the run after: ok when the lost script
		// was the repair's last write, repaired when writes after it were
		// left for that run.
		then string
	}{
		{"reconcile_set_stock",
			func() error { return rdb.IncrBy(ctx, k.Stock(), 6).Err() },
			nil, "ok"}, // p.Check compares the stock
		{"reconcile_restore_quota", // a key holding an order number that never was
			func() error { return rdb.Set(ctx, k.Quota(sale.ActivityID, "1"), stale, time.Hour).Err() },
			func() bool { return rdb.Get(ctx, k.Quota(sale.ActivityID, "1")).Val() == first }, "ok"},
		// A missing key: the idempotency records' restore runs the script
		// first, so its answer is the one lost, and the quota key comes
		// back in the run after.
		{"reconcile_restore_missing",
			func() error { return rdb.Del(ctx, k.Quota(sale.ActivityID, "1")).Err() },
			func() bool { return rdb.Get(ctx, k.Quota(sale.ActivityID, "1")).Val() == first }, "repaired"},
		{"reconcile_remove_quota",
			func() error { return rdb.Set(ctx, k.Quota(sale.ActivityID, "99"), stale, time.Hour).Err() },
			func() bool { return rdb.Exists(ctx, k.Quota(sale.ActivityID, "99")).Val() == 0 }, "ok"},
	} {
		if err := c.drift(); err != nil {
			t.Fatal(err)
		}
		rs.loseOne(t, c.script, luaScript(c.script))
		// An unknown outcome stops the item's repair, not the run: the
		// item is unchecked, named with the error, exit 1.
		lost := reconcile()
		if lost.Code != 1 || rs.Lost() != int64(i+1) || !strings.Contains(lost.Stdout, "unchecked") ||
			!strings.Contains(lost.Stderr, "may have run") {
			t.Fatalf("%s answer lost (lost %d, want %d): exit %d, want 1 and the item unchecked\n%s\n%s", c.script, rs.Lost(), i+1, lost.Code, lost.Stdout, lost.Stderr)
		}
		t.Logf("%s answer lost: exit 1: %s", c.script, lastLine(lost.Stderr))
		r := reconcile("--json")
		var rep struct {
			Items []struct {
				Verdict string   `json:"verdict"`
				Repairs []string `json:"repairs"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil || r.Code != 0 || len(rep.Items) != 1 || rep.Items[0].Verdict != c.then {
			t.Fatalf("the run after the lost %s answer: exit %d (%v), want 0 and the item %s:\n%s\n%s", c.script, r.Code, err, c.then, r.Stdout, r.Stderr)
		}
		if c.fixed != nil && !c.fixed() {
			t.Fatalf("after the lost %s answer and a clean run, the drift is still there", c.script)
		}
		// Redis stock equals MySQL's, nothing in flight: applied once.
		if inv := p.Check(sale); t.Failed() {
			t.Fatalf("after the lost %s answer: %+v", c.script, inv)
		}
	}
	settle(t, p, sale, l.accepted, 30*time.Second)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
