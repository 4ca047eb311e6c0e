package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// reconReport is the reconciler's --json output (what the tests read).
type reconReport struct {
	ExitCode int `json:"exit_code"`
	Items    []struct {
		ItemID     int64  `json:"item_id"`
		MySQLStock int64  `json:"mysql_stock"`
		RedisStock *int64 `json:"redis_stock"`
		InFlight   int64  `json:"in_flight"`
		Drift      int64  `json:"drift"`
		Verdict    string `json:"verdict"`
		Detail     struct {
			Pending int `json:"pending_orders"`
		} `json:"in_flight_detail"`
		Activities []struct {
			ActivityID   int64        `json:"activity_id"`
			LiveOrders   int          `json:"live_orders"`
			QuotaMissing []quotaIssue `json:"quota_missing"`
			QuotaStale   []quotaIssue `json:"quota_stale"`
		} `json:"activities"`
		Repairs []string `json:"repairs"`
	} `json:"items"`
}

type quotaIssue struct {
	UserID  string `json:"user_id"`
	OrderNo string `json:"order_no"`
	Holder  string `json:"holder"`
}

// reconcile runs the reconciler once with --json and args, and checks its
// exit code and that it reports exactly the sale's item.
func reconcile(t *testing.T, p *pipelinetest.Pipeline, wantCode int, args ...string) reconReport {
	t.Helper()
	res := p.Reconcile(append([]string{"--json", "--recheck", "100ms"}, args...)...)
	if wantCode == 0 && !slices.Contains(args, "--repair") && strings.Contains(res.Stderr, "item read disagrees") {
		t.Logf("reconciler %v saw a passing mismatch and read again:\n%s", args, res.Stderr)
	}
	var rep reconReport
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("reconciler %v: exit %d, output is not the JSON report (%v):\n%s\nstderr:\n%s", args, res.Code, err, res.Stdout, res.Stderr)
	}
	if res.Code != wantCode || rep.ExitCode != wantCode || len(rep.Items) != 1 {
		t.Fatalf("reconciler %v: exit %d (report says %d, %d items), want %d:\n%s\nstderr:\n%s",
			args, res.Code, rep.ExitCode, len(rep.Items), wantCode, res.Stdout, res.Stderr)
	}
	return rep
}

func redisOf(t *testing.T, rep reconReport) int64 {
	t.Helper()
	if rep.Items[0].RedisStock == nil {
		t.Fatal("report: Redis stock key missing")
	}
	return *rep.Items[0].RedisStock
}

// pacedCrowd sends one order for each user, the users arriving evenly over
// d, each request on its own; it returns the accepted orders.
func pacedCrowd(t *testing.T, api *pipelinetest.API, activity int64, users []int64, d time.Duration) map[string]int64 {
	t.Helper()
	var (
		mu       sync.Mutex
		accepted = map[string]int64{}
		wg       sync.WaitGroup
	)
	tick := time.NewTicker(d / time.Duration(len(users)))
	defer tick.Stop()
	for _, u := range users {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := api.PlaceOrder(u, fmt.Sprintf("k-%d", u), activity, 1)
			if err != nil {
				t.Errorf("user %d: %v", u, err)
				return
			}
			if p.Code == 202 {
				mu.Lock()
				accepted[p.OrderNo] = u
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return accepted
}

// The reconciler, run again and again while 1000 buyers go for 300 units,
// never reports drift: reservations in flight and orders committed but not
// yet confirmed are accounted for.
func TestReconcilerAgreesDuringSale(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	// The sale must sell out for the counts below: a publish slowed past
	// the default 3 s by a busy machine (the whole suite runs at once)
	// would be answered 503 and leave units unsold.
	api := p.StartAPI("SECKILL_KAFKA_WRITE_TIMEOUT=20s")
	// A long linger keeps orders on their way (reserved, not yet in MySQL)
	// for longer, so more runs see some.
	p.StartConsumer("SECKILL_CONSUMER_LINGER=200ms")
	sale := api.CreateSale(300, 1)

	done := make(chan struct{})
	var accepted map[string]int64
	go func() {
		defer close(done)
		accepted = pacedCrowd(t, api, sale.ActivityID, userRange(1, 1000), 8*time.Second)
	}()
	// Some buyers cancel while the sale goes on: closes give units back to
	// MySQL first and to Redis a moment later.
	cancelled := make(chan int)
	go func() {
		n := 0
		defer func() { cancelled <- n }()
		for n < 20 {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var rows []struct {
				OrderNo string
				UserID  int64
			}
			p.DB.Gorm().Raw("SELECT order_no, user_id FROM orders WHERE item_id = ? AND status = 'CREATED' ORDER BY id DESC LIMIT 2",
				sale.ItemID).Scan(&rows)
			for _, r := range rows {
				var b struct{ Status string }
				if code, err := api.Do("POST", "/api/v1/orders/"+r.OrderNo+"/cancel", r.UserID, "", nil, nil, &b); err == nil && code == 200 {
					n++
				}
			}
		}
	}()
	runs, busy := 0, 0
	for selling := true; selling; {
		select {
		case <-done:
			selling = false
		default:
		}
		rep := reconcile(t, p, 0)
		runs++
		if it := rep.Items[0]; it.InFlight != 0 || it.Detail.Pending != 0 {
			busy++
		}
	}
	n := <-cancelled
	if len(accepted) < 300 || len(accepted) > 300+n {
		t.Fatalf("accepted %d orders with %d cancelled, want 300 to %d", len(accepted), n, 300+n)
	}
	// And while the consumer finishes the backlog.
	waittest.UntilEvery(t, 60*time.Second, time.Millisecond, "nothing in flight", func() bool {
		rep := reconcile(t, p, 0)
		runs++
		if rep.Items[0].InFlight == 0 && rep.Items[0].Detail.Pending == 0 {
			return true
		}
		busy++
		return false
	})
	t.Logf("%d reconciler runs, %d of them with orders in flight; %d orders cancelled", runs, busy, n)
	if busy == 0 {
		t.Fatalf("none of %d reconciler runs saw an order in flight; the test proves nothing", runs)
	}

	p.WaitFinal(accepted, 60*time.Second)
	p.WaitDrained(sale.ItemID, 10*time.Second)
	rep := reconcile(t, p, 0)
	it := rep.Items[0]
	inv := p.Check(sale)
	if it.MySQLStock != inv.DBStock || redisOf(t, rep) != inv.DBStock || it.InFlight != 0 || it.Drift != 0 ||
		it.Verdict != "ok" || int64(it.Activities[0].LiveOrders) != inv.LiveOrders {
		t.Fatalf("after the sale: %+v, stores %+v", it, inv)
	}
}

// Drift injected by hand is found with the right numbers, repaired, and
// gone on the next run.
func TestReconcilerRepairsInjectedDrift(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSale(50, 1)
	accepted, _ := crowd(t, api, sale.ActivityID, userRange(1, 10), 10)
	p.WaitFinal(accepted, 60*time.Second)
	p.WaitDrained(sale.ItemID, 10*time.Second)
	ctx := context.Background()
	rdb := p.Redis
	keys := p.Store.Keys(reservation.One(sale.ItemID))
	reconcile(t, p, 0)

	// (a) Redis stock changed by hand.
	rdb.IncrBy(ctx, keys.Stock(), 7)
	rep := reconcile(t, p, 1)
	if it := rep.Items[0]; it.MySQLStock != 40 || redisOf(t, rep) != 47 || it.InFlight != 0 || it.Drift != 7 || it.Verdict != "drift" {
		t.Fatalf("(a) Redis raised by 7: %+v", it)
	}
	rep = reconcile(t, p, 0, "--repair")
	if it := rep.Items[0]; it.Verdict != "repaired" || len(it.Repairs) != 1 {
		t.Fatalf("(a) repair: %+v", it)
	}
	if rep = reconcile(t, p, 0); redisOf(t, rep) != 40 {
		t.Fatalf("(a) after repair Redis has %d, want 40", redisOf(t, rep))
	}

	// (b) a live order's quota key deleted.
	var user int64
	var orderNo string
	for no, u := range accepted {
		user, orderNo = u, no
		break
	}
	rdb.Del(ctx, keys.Quota(sale.ActivityID, strconv.FormatInt(user, 10)))
	rep = reconcile(t, p, 1)
	q := rep.Items[0].Activities[0]
	if rep.Items[0].Drift != 0 || rep.Items[0].Verdict != "drift" || q.LiveOrders != 10 ||
		!slices.Equal(q.QuotaMissing, []quotaIssue{{UserID: strconv.FormatInt(user, 10), OrderNo: orderNo}}) || len(q.QuotaStale) != 0 {
		t.Fatalf("(b) quota key deleted: %+v", rep.Items[0])
	}
	reconcile(t, p, 0, "--repair")
	reconcile(t, p, 0)
	if pl, err := api.PlaceOrder(user, "after-repair", sale.ActivityID, 1); err != nil || pl.Error != "ALREADY_PURCHASED" {
		t.Fatalf("(b) user %d buying again after the repair: %+v %v, want ALREADY_PURCHASED", user, pl, err)
	}

	// (c) MySQL stock changed by hand (a restock of 5).
	if err := p.DB.Activities.SetItemStock(ctx, sale.ItemID, 45); err != nil {
		t.Fatal(err)
	}
	rep = reconcile(t, p, 1)
	if it := rep.Items[0]; it.MySQLStock != 45 || redisOf(t, rep) != 40 || it.InFlight != 0 || it.Drift != -5 || it.Verdict != "drift" {
		t.Fatalf("(c) MySQL raised by 5: %+v", it)
	}
	reconcile(t, p, 0, "--repair")
	if rep = reconcile(t, p, 0); redisOf(t, rep) != 45 {
		t.Fatalf("(c) after repair Redis has %d, want 45", redisOf(t, rep))
	}

	// (d) a stale quota key: its order never existed.
	ghost := order.NewNumberGenerator().Next(sale.ItemID)
	rdb.Set(ctx, keys.Quota(sale.ActivityID, "5000"), ghost, time.Hour)
	rep = reconcile(t, p, 1)
	if q := rep.Items[0].Activities[0]; !slices.Equal(q.QuotaStale, []quotaIssue{{UserID: "5000", Holder: ghost}}) {
		t.Fatalf("(d) stale quota key: %+v", q)
	}
	reconcile(t, p, 0, "--repair")
	reconcile(t, p, 0)

	// The rest sells exactly: 45 more units, user 5000 among the buyers.
	more, _ := crowd(t, api, sale.ActivityID, append(userRange(100, 99), 5000), 50)
	if len(more) != 45 {
		t.Fatalf("accepted %d after the repairs, want 45", len(more))
	}
	p.WaitFinal(more, 60*time.Second)
	p.WaitDrained(sale.ItemID, 10*time.Second)
	restocked := sale
	restocked.Stock = 55
	p.Check(restocked)
	reconcile(t, p, 0)
}

// Redis restarted with no data: every key of the pipeline is gone. The
// reconciler reports the item not warmed with every quota missing; the
// repair restores both, so nobody buys twice and the rest sells exactly.
func TestReconcilerRestoresEmptyRedis(t *testing.T) {
	t.Parallel()
	restoresEmptyRedis(t, false)
}

// The same on a 3-master Redis Cluster.
func TestReconcilerRestoresEmptyRedisCluster(t *testing.T) {
	t.Parallel()
	restoresEmptyRedis(t, true)
}

func restoresEmptyRedis(t *testing.T, cluster bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, RedisCluster: cluster})
	api := p.StartAPI()
	// The consumer's data-loss watch would repair the lost prefix (its
	// marker goes with it) before the reconciler looks: this test is the
	// reconciler's.
	p.StartConsumer("SECKILL_HEAL_EVERY=off")
	sale := api.CreateSale(20, 1)
	accepted, _ := crowd(t, api, sale.ActivityID, userRange(1, 8), 8)
	p.WaitFinal(accepted, 60*time.Second)
	p.WaitDrained(sale.ItemID, 10*time.Second)

	// Every key of this test's prefix, on every node: SCAN + DEL.
	deletePrefix(t, p)

	rep := reconcile(t, p, 1)
	it := rep.Items[0]
	if it.Verdict != "not warmed" || it.RedisStock != nil || it.MySQLStock != 12 || it.Drift != -12 ||
		len(it.Activities[0].QuotaMissing) != 8 || it.Activities[0].LiveOrders != 8 {
		t.Fatalf("after Redis lost its data: %+v", it)
	}
	rep = reconcile(t, p, 0, "--repair")
	// 8 reservations, 8 idempotency records, 8 quota keys (a line each),
	// stock.
	if it := rep.Items[0]; it.Verdict != "repaired" || len(it.Repairs) != 4 {
		t.Fatalf("repair: %+v", it)
	}
	if rep = reconcile(t, p, 0); redisOf(t, rep) != 12 {
		t.Fatalf("after repair Redis has %d, want 12", redisOf(t, rep))
	}

	// Earlier buyers cannot buy again: a new key hears ALREADY_PURCHASED,
	// their old one gets their order back (its record was restored).
	for no, u := range accepted {
		pl, err := api.PlaceOrder(u, "after-restart", sale.ActivityID, 1)
		if err != nil || pl.Error != "ALREADY_PURCHASED" {
			t.Fatalf("user %d (order %s) buying again with a new key: %+v %v", u, no, pl, err)
		}
		pl, err = api.PlaceOrder(u, fmt.Sprintf("k-%d", u), sale.ActivityID, 1)
		if err != nil || pl.Code != 202 || pl.OrderNo != no {
			t.Fatalf("user %d (order %s) retrying with the same key: %+v %v, want 202 with the same order_no", u, no, pl, err)
		}
	}
	// New buyers take exactly what is left.
	more, codes := crowd(t, api, sale.ActivityID, userRange(100, 30), 30)
	if len(more) != 12 || codes["SOLD_OUT"] != 18 {
		t.Fatalf("new buyers: %d accepted, refusals %v; want 12 and 18 SOLD_OUT", len(more), codes)
	}
	p.WaitFinal(more, 60*time.Second)
	p.WaitDrained(sale.ItemID, 10*time.Second)
	if inv := p.Check(sale); inv.LiveOrders != 20 {
		t.Fatalf("final %+v, want 20 live orders", inv)
	}
	reconcile(t, p, 0)
}

// Two reconcilers started together: one works, the other exits 3 saying
// another is running; with --wait the second waits its turn instead.
func TestReconcilerRunsOneAtATime(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	sale := api.CreateSale(10, 1)
	// Drift keeps the first one busy for its recheck pause.
	p.Redis.IncrBy(context.Background(), p.Store.Keys(reservation.One(sale.ItemID)).Stock(), 3)

	args := []string{"--recheck", "2s"}
	a, b := p.StartArgs("reconciler", args), p.StartArgs("reconciler", args)
	ra, rb := a.Wait(t, time.Minute), b.Wait(t, time.Minute)
	codes := []int{ra.Code, rb.Code}
	slices.Sort(codes)
	if !slices.Equal(codes, []int{1, 3}) {
		t.Fatalf("exit codes %v, want one 1 (drift) and one 3 (busy)\nA:\n%s%s\nB:\n%s%s", codes, ra.Stdout, ra.Stderr, rb.Stdout, rb.Stderr)
	}
	busy, worked := ra, rb
	if rb.Code == 3 {
		busy, worked = rb, ra
	}
	if !strings.Contains(busy.Stderr, "another reconciler is running") || busy.Stdout != "" {
		t.Fatalf("the busy one said:\n%s\nstdout %q", busy.Stderr, busy.Stdout)
	}
	if !strings.Contains(worked.Stdout, "drift") {
		t.Fatalf("the working one printed:\n%s", worked.Stdout)
	}

	// With --wait and --repair: one repairs, the other waits and then finds
	// nothing left to repair.
	args = []string{"--recheck", "1s", "--wait", "30s", "--repair"}
	a, b = p.StartArgs("reconciler", args), p.StartArgs("reconciler", args)
	ra, rb = a.Wait(t, time.Minute), b.Wait(t, time.Minute)
	if ra.Code != 0 || rb.Code != 0 {
		t.Fatalf("with --wait: exit codes %d and %d, want 0 and 0\nA:\n%s%s\nB:\n%s%s", ra.Code, rb.Code, ra.Stdout, ra.Stderr, rb.Stdout, rb.Stderr)
	}
	outs := []string{ra.Stdout, rb.Stdout}
	if strings.Contains(outs[0], "repaired") == strings.Contains(outs[1], "repaired") {
		t.Fatalf("want exactly one run to repair:\nA:\n%s\nB:\n%s", outs[0], outs[1])
	}
	if rep := reconcile(t, p, 0); redisOf(t, rep) != 10 {
		t.Fatalf("Redis %d after the repair, want 10", redisOf(t, rep))
	}
}
