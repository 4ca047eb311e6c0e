//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/heal"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// 12. Redis comes back from an older state (a restore from a backup, a
// failover to a lagging replica): acknowledged writes are gone. Stock is
// back up, reservations and quota keys of orders made since are gone,
// quota keys of orders cancelled since are back. The consumer's watch sees
// the restart (run_id) and repairs Redis from MySQL on its own, within a
// bounded time: no reconciler is run by the test. Every 202 reaches
// CREATED or FAILED, nothing is oversold, nobody holds two live orders,
// buyers whose orders were cancelled can buy again, every buyer answered
// 202 gets the same order_no again when retrying with the same
// Idempotency-Key (the records of orders made since the older state are
// restored from MySQL), and once drained Redis stock equals MySQL stock.
func TestChaosRedisRestoredFromOlderState(t *testing.T) {
	restoreScenario(t, 1, false)
}

// 12s. 12 with a sale in eight sizes of uneven stock, some buyers
// clicking on two sizes at once: the watch repairs each size's stock and
// the sale-wide quota keys and idempotency records, so a buyer with a live
// order cannot buy another size either.
func TestChaosRedisRestoredFromOlderStateSized(t *testing.T) {
	restoreScenario(t, 1, true)
}

// 12b. The same with a bucketed item, whose older state is from before the
// sale was even warmed: the bucket marker, the buckets, the quota keys are
// all missing after the restore. The watch lays the buckets out again from
// the activity's stock_buckets in MySQL.
func TestChaosRedisRestoredFromOlderStateBucketed(t *testing.T) {
	restoreScenario(t, 3, false)
}

// redisFiles are the Redis's data directory and pid file under
// scripts/services's folder (SECKILL_SERVICES_DIR, default .local).
func redisFiles(t *testing.T) (root, aof, pidFile string) {
	t.Helper()
	if os.Getenv("SECKILL_SERVICES") == "docker" {
		t.Skip("restoring Redis's files needs the native services (scripts/services)")
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root = filepath.Dir(strings.TrimSpace(string(out)))
	dir := servicesDir(t)
	aof = filepath.Join(dir, "data", "redis", "appendonlydir")
	pidFile = filepath.Join(dir, "run", "redis.pid")
	if _, err := os.Stat(aof); err != nil {
		t.Skipf("no AOF directory of the shared Redis: %v", err)
	}
	return root, aof, pidFile
}

func redisAnswers() bool {
	c, err := net.DialTimeout("tcp", redistest.Addr(), 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	b := make([]byte, 7)
	n, _ := c.Read(b)
	return strings.HasPrefix(string(b[:n]), "+PONG")
}

// copyDir copies src to dst as it is (cp -a), while Redis may be writing.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", src, dst, err, out)
	}
}

// killRedis sends SIGKILL to the shared redis-server and waits until it is
// gone.
func killRedis(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %q", pidFile, b)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 redis-server (pid %d): %v", pid, err)
	}
	waittest.Until(t, 10*time.Second, "redis-server to die", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) && !redisAnswers()
	})
}

var healTook = regexp.MustCompile(`"msg":"Redis repaired from MySQL after data loss".*?"took":"([^"]+)"`)

func restoreScenario(t *testing.T, buckets int, sized bool) {
	fault(t)
	root, aof, pidFile := redisFiles(t)
	older := filepath.Join(t.TempDir(), "appendonlydir")
	crashed := aof + ".crashed-" + strconv.Itoa(os.Getpid())
	// Whatever happens, the shared Redis runs again when the test ends: from
	// the restored files, or else from the files it crashed with.
	t.Cleanup(func() {
		if redisAnswers() {
			_ = os.RemoveAll(crashed)
			return
		}
		if _, err := os.Stat(aof); err != nil {
			// Stopped between moving the crashed files aside and putting
			// the older copy in place: start from the crashed files.
			_ = os.Rename(crashed, aof)
		}
		start := func() error {
			out, err := exec.Command(filepath.Join(root, "scripts", "services"), "start", "redis").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}
		err := start()
		if err != nil && !redisAnswers() {
			if _, serr := os.Stat(crashed); serr == nil {
				_ = os.RemoveAll(aof)
				_ = os.Rename(crashed, aof)
				err = start()
			}
		}
		if err != nil || !redisAnswers() {
			t.Errorf("the shared Redis does not run again after the test: %v", err)
		}
		_ = os.RemoveAll(crashed)
	})

	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	cons := p.StartConsumer()
	const stock = 400
	var sale pipelinetest.Sale
	var cancelled map[int64]string  // user -> order cancelled after the copy
	var beforeCopy map[string]int64 // orders accepted before the copy was taken
	if buckets > 1 {
		// The older state is from before the sale: nothing of it in Redis.
		beforeCopy = map[string]int64{}
		copyDir(t, aof, older)
		sale = api.CreateBucketedSale(stock, 1, buckets)
	} else {
		sale = newSale(api, stock, sized)
	}
	l := startLoad(api, sale, users(1, 600), 8*time.Second, 20)
	waittest.Until(t, 30*time.Second, "the first orders to be accepted", func() bool { return l.answered(202) >= 60 })
	if buckets == 1 {
		// Ten orders all the way through (CREATED, reservation
		// CONFIRMED), then the copy: Redis's older state has them, and
		// then they are cancelled. After the restore their quota keys are
		// back, held by orders MySQL has closed.
		cancelled = confirmedOrders(t, p, sale, l, 10)
		beforeCopy = l.acceptedSoFar()
		copyDir(t, aof, older)
		for u, no := range cancelled {
			var out struct {
				Status string `json:"status"`
			}
			if code, err := api.Do("POST", "/api/v1/orders/"+no+"/cancel", u, "", nil, nil, &out); err != nil || code != 200 {
				t.Fatalf("cancel %s of user %d: %d %v", no, u, code, err)
			}
		}
	}
	atCopy := l.answered(202)
	// Keep selling: everything from here on is lost with the restore.
	waittest.Until(t, 30*time.Second, "more orders accepted after the copy", func() bool { return l.answered(202) >= atCopy+120 })
	t.Logf("copied Redis's AOF with %d orders accepted; restoring it with %d accepted", atCopy, l.answered(202))

	killRedis(t, pidFile)
	if err := os.Rename(aof, crashed); err != nil {
		t.Fatal(err)
	}
	copyDir(t, older, aof)
	services(t, "start", "redis")
	waittest.Until(t, 30*time.Second, "Redis to answer", redisAnswers)
	back := time.Now()

	// The consumer's watch repairs Redis within a bounded time.
	const bound = 30 * time.Second
	var took time.Duration
	waittest.Until(t, bound, "the consumer's watch to repair Redis", func() bool {
		if !healTook.MatchString(cons.Log()) {
			return false
		}
		took = time.Since(back)
		return true
	})
	m := healTook.FindStringSubmatch(cons.Log())
	t.Logf("Redis repaired by the consumer's watch %v after it answered again (the watch: %s from its detection)",
		took.Round(time.Millisecond), m[1])
	fmt.Printf("chaos: %s: Redis repaired %v after it answered again (watch: %s after detecting)\n",
		t.Name(), took.Round(time.Millisecond), m[1])
	l.wait()
	t.Logf("during the sale: %d accepted, refused %v, network errors %d", len(l.accepted), l.codes, l.neterrs)

	all := map[string]int64{}
	for no, u := range l.accepted {
		all[no] = u
	}
	// Buyers whose orders were cancelled since the older state can buy
	// again: their stale quota keys were removed by the repair.
	for u := range cancelled {
		pl, err := buy(api, sale, u, fmt.Sprintf("again-%d", u))
		if err != nil {
			t.Fatal(err)
		}
		if pl.Error == "ALREADY_PURCHASED" {
			t.Fatalf("user %d, whose order %s was cancelled, is still blocked by a stale quota key after the repair", u, cancelled[u])
		}
		if pl.Code == 202 {
			all[pl.OrderNo] = u
		}
	}

	waitHealed(t, p, bound)
	inv := settle(t, p, sale, all, 90*time.Second)

	// Every buyer answered 202 retries with the same Idempotency-Key (and
	// size) and gets the same order back. The older state had no
	// idempotency record of the orders accepted after the copy; the repair
	// restored them.
	given, err := p.DB.Orders.Orders(ctx, orderNos(l.accepted))
	if err != nil {
		t.Fatal(err)
	}
	gap := 0
	for no, u := range l.accepted {
		if _, ok := beforeCopy[no]; !ok {
			gap++
		}
		pl, err := buyAgain(api, sale, given[no])
		if err != nil {
			t.Fatal(err)
		}
		if (pl.Code != 202 && pl.Code != 200) || pl.OrderNo != no {
			_, gapOrder := beforeCopy[no]
			t.Fatalf("user %d, answered 202 with %s (accepted after the copy: %v), retried with the same key: %d %s %q",
				u, no, !gapOrder, pl.Code, pl.Error, pl.OrderNo)
		}
	}
	if gap == 0 {
		t.Fatal("no order was accepted after the copy")
	}
	t.Logf("%d buyers answered 202 retried with their key and got the same order_no; %d of them accepted after the copy", len(l.accepted), gap)
	refused := refusedHoldNothing(t, p, sale, l)
	t.Logf("after recovery: %+v; %d users were answered 503", inv, refused)

	// No buyer with a live order can buy a second time: their quota keys
	// are back (the older state had none of the orders made since).
	final, err := p.DB.Orders.Orders(ctx, orderNos(all))
	if err != nil {
		t.Fatal(err)
	}
	tried := 0
	for no, o := range final {
		if o.Status != order.Created || tried == 50 {
			continue
		}
		tried++
		// In a sale in sizes, of another size.
		item := int64(0)
		if sale.Sized() {
			item = nextSize(sale, o.ItemID)
		}
		pl, err := api.PlaceOrderOf(o.UserID, "second-"+no, sale.ActivityID, item, 1)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Error != "ALREADY_PURCHASED" {
			t.Fatalf("user %s holds live order %s but a second attempt got %d %s", o.UserID, no, pl.Code, pl.Error)
		}
	}
	if buckets > 1 {
		k := p.Store.Keys(reservation.One(sale.ItemID))
		rdb := p.Redis
		if n, err := rdb.Get(ctx, k.BucketMarker()).Int(); err != nil || n != buckets {
			t.Fatalf("bucket marker %d (%v), want %d from the activity", n, err, buckets)
		}
		if rdb.Exists(ctx, k.Stock()).Val() != 0 {
			t.Fatal("the repair created a main-tag stock key for a bucketed item")
		}
	}
	// A final check: no oversell, no second live order, Redis = MySQL.
	p.Check(sale)
}

// waitHealed waits until the consumer has handled every event and its
// watch owes no repair. An order whose event was still on its way when
// Redis lost its reservation (its batch waiting out the router's backoff
// while Redis was down) may reach MySQL after the watch closed its
// incident; the consumer then records a loss again before the event is
// final (fulfil.Handler.Losses), and the watch repairs Redis after that
// order, at its next tick. Until then Redis is one unit high and the buyer
// has no quota key: checking Redis against MySQL right after the last
// order reached MySQL would find the repair that is due, not drift.
func waitHealed(t *testing.T, p *pipelinetest.Pipeline, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	waittest.Until(t, within, "the consumer to handle every event", func() bool {
		lag, err := p.GroupLag(ctx, p.Group)
		return err == nil && lag == 0
	})
	// redisloss.MarkerKey(p.Prefix) (consumer/internal: not importable
	// from here).
	marker := p.Prefix + ":heal:generation"
	var rec heal.RedisWatch
	waittest.Until(t, within, "the consumer's watch to owe no repair", func() bool {
		var err error
		rec, err = p.DB.RedisWatches.RedisWatch(ctx, marker)
		return err == nil && rec.Losses > 0 && rec.Healed >= rec.Losses
	})
	if rec.Losses > 1 {
		t.Logf("the watch repaired %d losses (the restore, and orders that reached MySQL after it repaired: %s)", rec.Losses, rec.LastLoss)
	}
}

// confirmedOrders waits until n of the load's accepted orders are CREATED
// in MySQL with their reservations CONFIRMED in Redis, and returns them by
// user.
func confirmedOrders(t *testing.T, p *pipelinetest.Pipeline, sale pipelinetest.Sale, l *load, n int) map[int64]string {
	t.Helper()
	ctx := context.Background()
	out := map[int64]string{}
	waittest.Until(t, 30*time.Second, fmt.Sprintf("%d orders created and confirmed", n), func() bool {
		l.mu.Lock()
		acc := make(map[string]int64, len(l.accepted))
		for no, u := range l.accepted {
			acc[no] = u
		}
		l.mu.Unlock()
		got, err := p.DB.Orders.Orders(ctx, orderNos(acc))
		if err != nil {
			return false
		}
		for no, o := range got {
			if len(out) == n {
				break
			}
			if o.Status != order.Created {
				continue
			}
			r, err := p.Store.Reservations.Reservation(ctx, no)
			if err == nil && r.State == reservation.StateConfirmed {
				out[acc[no]] = no
			}
		}
		return len(out) == n
	})
	return out
}

func orderNos(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// acceptedSoFar copies the load's accepted orders (order number -> user)
// while it runs.
func (l *load) acceptedSoFar() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int64, len(l.accepted))
	for no, u := range l.accepted {
		out[no] = u
	}
	return out
}
