//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// The Redis Cluster with replicas (scripts/services up redis-replicas): three
// masters, one replica each, on 7101-7106, cluster-node-timeout 2000 ms.
// Each scenario fails a master over in the middle of a sale of the hot item
// whose hash tag it holds, and ends with the cluster healthy again (three
// masters, each with a replica in sync), whichever nodes are masters then.

var replicaAddrs = []string{"127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103",
	"127.0.0.1:7104", "127.0.0.1:7105", "127.0.0.1:7106"}

// TestReplicatedRedisMasterKilled kills (SIGKILL) the master holding the
// hot item mid-sale, after its replica fell behind: the replica is frozen
// (SIGSTOP) and its replication link cut on the master (CLIENT KILL TYPE
// replica), the sale goes on against the master alone for a while, then
// the master dies and the replica resumes (SIGCONT). The cluster promotes
// it without what the master acknowledged since the cut: the test checks
// those reservations, answered 202 among them, are really gone. Then the
// pipeline keeps MySQL exact, brings every 202 to CREATED or FAILED, and
// the consumer's watch notices the new master and repairs Redis from MySQL
// on its own; the old master comes back as a replica of the new one.
//
// Why the lag is made and not waited for: a kill -9 alone loses only what
// the master wrote in the moment before it died, often nothing on a
// loopback link. Freezing the replica alone is not enough either: the
// master's writes wait in the kernel's socket buffers and reach the
// replica when it resumes, even after the master died. Cutting the link
// on the master makes its later writes exist only in the master's memory
// and AOF, which is what a replica that lagged behind a busy master, or a
// network partition between them, leaves. The replica still promotes on
// its own: its data age counts from when it saw the link go (on resuming),
// far under the validity limit (10 s + 10 x the node timeout).
func TestReplicatedRedisMasterKilled(t *testing.T) {
	masterKilledScenario(t, 1)
}

// TestReplicatedRedisMasterKilledBucketed is the same with the item's stock
// split over three hash tags (stock_buckets 3): the master killed is the
// one holding the item's own tag (reservations, quota and idempotency
// records); the buckets on the other masters lose nothing.
func TestReplicatedRedisMasterKilledBucketed(t *testing.T) {
	masterKilledScenario(t, 3)
}

func masterKilledScenario(t *testing.T, buckets int) {
	fault(t)
	ctx := context.Background()
	began := time.Now()
	p, api, cons, sale, hot := replicatedSale(t, 300, buckets)
	keys := p.Store.Keys(reservation.One(sale.ItemID))
	rpid := nodePid(t, hot.replica)
	// Whatever happens, the replica runs again and the old master is back
	// as a replica when the test ends.
	t.Cleanup(func() {
		_ = syscall.Kill(rpid, syscall.SIGCONT)
		if !nodeAnswers(hot.master) {
			if err := startNode(hot.master); err != nil {
				t.Errorf("the old master %s does not run again: %v", hot.master, err)
			}
		}
	})

	l := startLoad(api, sale, users(1, 500), 15*time.Second, 10)
	ordersFlowing(t, p, sale)

	// The replica falls behind: frozen, and its link cut on the master.
	mc := nodeClient(hot.master)
	defer mc.Close()
	if err := syscall.Kill(rpid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP the replica %s (pid %d): %v", hot.replica, rpid, err)
	}
	if n, err := mc.ClientKillByFilter(ctx, "TYPE", "replica").Result(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL TYPE replica on %s: %d %v", hot.master, n, err)
	}
	atCut := l.answered(202)
	waittest.Until(t, 30*time.Second, "orders accepted by the master alone", func() bool { return l.answered(202) >= atCut+40 })
	// What the master acknowledged, read from it just before it dies.
	acked := reservationKeys(t, mc, sale.ItemID, p.Prefix)
	ackedStock := stockOn(t, mc, keys.Stock(), buckets)
	accepted := l.acceptedSoFar()

	killNode(t, hot.master)
	if err := syscall.Kill(rpid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var promoted time.Time
	waittest.Until(t, 60*time.Second, "the replica "+hot.replica+" to be promoted", func() bool {
		if !isMasterOf(hot.replica, hot.slot) {
			return false
		}
		promoted = time.Now()
		return true
	})
	t.Logf("replica %s promoted %v after the master was killed", hot.replica, promoted.Sub(killed).Round(time.Millisecond))

	// The writes were lost: reservations the old master had, the new one
	// lacks; the stock the new master sells from is higher.
	rc := nodeClient(hot.replica)
	defer rc.Close()
	lost := 0
	lostAccepted := map[string]int64{} // order_no -> user: answered 202, reservation gone
	for no, k := range acked {
		n, err := rc.Exists(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			lost++
			if u, ok := accepted[no]; ok {
				lostAccepted[no] = u
			}
		}
	}
	promotedStock := stockOn(t, rc, keys.Stock(), buckets)
	t.Logf("replicated: redis writes lost in the failover: %d of %d reservations the old master held are missing on the promoted one (%d of them answered 202); stock %d on the old master, %d on the new (-1: in buckets elsewhere)",
		lost, len(acked), len(lostAccepted), ackedStock, promotedStock)
	if lost == 0 || len(lostAccepted) == 0 || (buckets == 1 && promotedStock <= ackedStock) {
		t.Fatalf("the failover lost nothing (lost %d, answered 202 %d, stock %d -> %d): the scenario proves nothing",
			lost, len(lostAccepted), ackedStock, promotedStock)
	}

	// The API sells from the promoted master while the old one is still
	// dead: its cluster client learns the new owner of the slot (no MOVED
	// comes from a node that refuses connections).
	probe := newProbe()
	var served time.Duration
	waittest.Until(t, 30*time.Second, "the API to serve the hot item from the promoted master", func() bool {
		if !probe.place(t, api, sale.ActivityID) {
			return false
		}
		served = time.Since(promoted)
		return true
	})
	t.Logf("replicated: the API answered from the promoted master %v after the promotion was seen (%d attempts answered 503 before)",
		served.Round(time.Millisecond), probe.answered(503))

	// The consumer's watch sees the new master and repairs Redis.
	var took time.Duration
	waittest.Until(t, 60*time.Second, "the consumer's watch to repair Redis", func() bool {
		if !healTook.MatchString(cons.Log()) {
			return false
		}
		took = time.Since(promoted)
		return true
	})
	if !strings.Contains(cons.Log(), `"reason":"new_master"`) {
		t.Fatalf("the watch did not name the promotion as the reason:\n%s", healLines(cons.Log()))
	}
	m := healTook.FindStringSubmatch(cons.Log())
	t.Logf("replicated: redis repair after failover took %v from the promotion seen (the watch: %s from its detection)",
		took.Round(time.Millisecond), m[1])
	fmt.Printf("chaos: %s: lost %d reservations (%d answered 202); repair after failover took %v from the promotion (watch: %s)\n",
		t.Name(), lost, len(lostAccepted), took.Round(time.Millisecond), m[1])

	// The old master comes back from its AOF, with the writes the cluster
	// lost, and rejoins as a replica of the promoted node, which overwrites
	// them.
	restart := time.Now()
	if err := startNode(hot.master); err != nil {
		t.Fatal(err)
	}
	replicasHealthy(t)
	if !isReplicaOf(t, hot.master, hot.replica) {
		t.Fatalf("the old master %s did not rejoin as a replica of %s", hot.master, hot.replica)
	}
	back := nodeClient(hot.master)
	defer back.Close()
	resurfaced := 0
	for no, k := range acked {
		if _, ok := accepted[no]; !ok {
			continue
		}
		// A replica answers reads of its master's slots after READONLY,
		// on the same connection.
		cmds, err := back.Pipelined(ctx, func(pl redis.Pipeliner) error {
			pl.ReadOnly(ctx)
			pl.Exists(ctx, k)
			return nil
		})
		if err != nil {
			t.Fatalf("EXISTS %s on %s: %v", k, hot.master, err)
		}
		exists, err := rc.Exists(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if cmds[1].(*redis.IntCmd).Val() != exists {
			resurfaced++
		}
	}
	if resurfaced > 0 {
		t.Fatalf("%d reservations differ between the old master, back as a replica, and the new master", resurfaced)
	}
	t.Logf("the old master rejoined as a replica of %s in %v (its AOF's extra writes replaced by the new master's data)",
		hot.replica, time.Since(restart).Round(time.Millisecond))

	l.wait()
	t.Logf("during the sale: %d accepted, refused %v, network errors %d", len(l.accepted), l.codes, l.neterrs)
	inv := settle(t, p, sale, acceptedBy(l, probe), 120*time.Second)
	refused := refusedHoldNothing(t, p, sale, l) + refusedHoldNothing(t, p, sale, probe)
	if inv.LiveOrders == 0 {
		t.Fatal("nothing was sold")
	}
	all := acceptedBy(l, probe)
	final := p.WaitFinal(all, time.Minute)
	failed := map[string]int{}
	for _, o := range final {
		if o.Status == order.Failed {
			failed[o.FailureReason]++
		}
	}
	t.Logf("after recovery: %+v; %d answered 503; answered 202 but FAILED: %v", inv, refused, failed)

	// The buyers whose reservations the failover lost: the repair put their
	// records back from MySQL. The same key gets the same order again; a
	// new one is refused while their order is live.
	for no, u := range lostAccepted {
		pl, err := api.PlaceOrder(u, fmt.Sprintf("k%d", u), sale.ActivityID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if (pl.Code != 202 && pl.Code != 200) || pl.OrderNo != no {
			t.Fatalf("user %d, answered 202 with %s whose reservation the failover lost, retried with the same key: %d %s %q",
				u, no, pl.Code, pl.Error, pl.OrderNo)
		}
		if final[no].Status != order.Created {
			continue
		}
		if pl, err = api.PlaceOrder(u, "again-"+no, sale.ActivityID, 1); err != nil {
			t.Fatal(err)
		}
		if pl.Error != "ALREADY_PURCHASED" {
			t.Fatalf("user %d holds live order %s (its quota key lost in the failover) but a second attempt got %d %s",
				u, no, pl.Code, pl.Error)
		}
	}
	t.Logf("%d buyers whose reservations were lost got their order back with their key and were refused a second one", len(lostAccepted))
	t.Logf("replicated: longest PENDING %v (202 to final, %d accepted)", longestPending(t, p, all), len(all))
	t.Logf("replicated: %s took %v", t.Name(), time.Since(began).Round(time.Second))
}

// TestReplicatedRedisManualFailover runs CLUSTER FAILOVER (graceful) on the
// replica of the hot item's master mid-sale: the master stops taking
// writes, the replica catches up, then takes over. Nothing is lost: every
// reservation the master held just before is on the new master, every
// order answered 202 is CREATED (stock suffices for everyone), and the
// consumer's watch, which notices the new master, finds nothing to repair.
func TestReplicatedRedisManualFailover(t *testing.T) {
	fault(t)
	ctx := context.Background()
	began := time.Now()
	p, api, cons, sale, hot := replicatedSale(t, 600, 1)

	l := startLoad(api, sale, users(1, 400), 12*time.Second, 10)
	ordersFlowing(t, p, sale)
	mc := nodeClient(hot.master)
	defer mc.Close()
	rc := nodeClient(hot.replica)
	defer rc.Close()
	held := reservationKeys(t, mc, sale.ItemID, p.Prefix)
	if err := rc.ClusterFailover(ctx).Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %s: %v", hot.replica, err)
	}
	start := time.Now()
	waittest.Until(t, 60*time.Second, "the replica "+hot.replica+" to take over", func() bool { return isMasterOf(hot.replica, hot.slot) })
	t.Logf("replica %s took over %v after CLUSTER FAILOVER", hot.replica, time.Since(start).Round(time.Millisecond))
	for no, k := range held {
		if n, err := rc.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Fatalf("reservation of %s, held by the old master, is not on the new one after a graceful failover (%d %v)", no, n, err)
		}
	}
	t.Logf("all %d reservations the old master held are on the new one", len(held))

	// The watch notices the new master, and its repair finds nothing lost.
	waittest.Until(t, 60*time.Second, "the consumer's watch to check Redis after the failover", func() bool {
		return healTook.MatchString(cons.Log())
	})

	l.wait()
	t.Logf("during the sale: %d accepted, refused %v, network errors %d", len(l.accepted), l.codes, l.neterrs)
	inv := settle(t, p, sale, l.accepted, 120*time.Second)
	// Checked once everything is drained: a lost reservation would show as
	// drift only when its order reaches MySQL, and be repaired then.
	lines := healLines(cons.Log())
	if strings.Count(lines, "Redis lost data") != 1 || !strings.Contains(lines, `"reason":"new_master"`) ||
		strings.Count(lines, `"repaired_anything":false`) != 1 || strings.Contains(lines, `"repaired_anything":true`) ||
		strings.Contains(lines, "more drift repaired") {
		t.Fatalf("after a graceful failover the watch repaired something, or saw more than the one new master:\n%s", lines)
	}
	t.Logf("the watch saw the new master and its repair found nothing to do:\n%s", lines)
	refused := refusedHoldNothing(t, p, sale, l)
	allCreated(t, p, l.accepted)
	if inv.LiveOrders != int64(len(l.accepted)) {
		t.Fatalf("accepted %d, live %d", len(l.accepted), inv.LiveOrders)
	}
	t.Logf("after recovery: %+v; %d answered 503", inv, refused)
	t.Logf("replicated: longest PENDING %v (202 to final, %d accepted)", longestPending(t, p, l.accepted), len(l.accepted))
	replicasHealthy(t)
	t.Logf("replicated: %s took %v", t.Name(), time.Since(began).Round(time.Second))
}

// replicatedSale waits until redis-replicas is healthy, starts an api and a
// consumer on it, creates a warmed sale of stock units (over buckets hash
// tags) and finds the nodes serving the item's own hash tag.
func replicatedSale(t *testing.T, stock int64, buckets int) (*pipelinetest.Pipeline, *pipelinetest.API, *pipelinetest.Proc, pipelinetest.Sale, hot) {
	t.Helper()
	replicasHealthy(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3, RedisClusterAddrs: replicaAddrs})
	api := p.StartAPI()
	cons := p.StartConsumer()
	sale := api.CreateBucketedSale(stock, 1, buckets)
	h := hotNodes(t, p.Store.Keys(reservation.One(sale.ItemID)).Inflight())
	t.Logf("the hot item's hash tag is on master %s, replica %s", h.master, h.replica)
	return p, api, cons, sale, h
}

// newProbe is a load placed by hand, one order at a time, by new users.
func newProbe() *load {
	return &load{accepted: map[string]int64{}, byUser: map[int64]int{}, codes: map[string]int{}, done: make(chan struct{})}
}

// place places one order as a new user and reports whether the reserve
// script answered (202, or a 409 such as SOLD_OUT), not 503.
func (l *load) place(t *testing.T, api *pipelinetest.API, activity int64) bool {
	t.Helper()
	l.mu.Lock()
	u := int64(1_000_000 + len(l.byUser) + l.neterrs)
	l.mu.Unlock()
	pl, err := api.PlaceOrder(u, fmt.Sprintf("probe%d", u), activity, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.neterrs++
		return false
	}
	l.byUser[u] = pl.Code
	if pl.Code == 202 {
		l.accepted[pl.OrderNo] = u
	} else {
		l.codes[fmt.Sprintf("%d %s", pl.Code, pl.Error)]++
	}
	return pl.Code == 202 || pl.Code == 409
}

// stockOn reads the main stock key on one node; -1 for a bucketed item
// (its stock lives in buckets, under other tags).
func stockOn(t *testing.T, c *redis.Client, key string, buckets int) int64 {
	t.Helper()
	if buckets > 1 {
		return -1
	}
	n, err := c.Get(context.Background(), key).Int64()
	if err != nil {
		t.Fatalf("stock on %s: %v", c.Options().Addr, err)
	}
	return n
}

// hot names the nodes serving one key's slot.
type hot struct {
	slot            int64
	master, replica string // addresses
}

func nodeAnswers(addr string) bool {
	c := nodeClient(addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err() == nil
}

// hotNodes finds the master serving key's slot and its replica.
func hotNodes(t *testing.T, key string) hot {
	t.Helper()
	var h hot
	for _, addr := range replicaAddrs {
		nodes, err := clusterNodes(addr)
		if err != nil {
			continue
		}
		c := nodeClient(addr)
		h.slot, err = c.ClusterKeySlot(context.Background(), key).Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		var mid string
		for _, n := range nodes {
			if n.master && !n.failing && n.serves(h.slot) {
				h.master, mid = n.addr, n.id
			}
		}
		for _, n := range nodes {
			if !n.master && !n.failing && mid != "" && n.masterID == mid {
				h.replica = n.addr
			}
		}
		if h.master == "" || h.replica == "" {
			t.Fatalf("slot %d of %s: master %q, replica %q in\n%+v", h.slot, key, h.master, h.replica, nodes)
		}
		return h
	}
	t.Fatal("no node of redis-replicas answers CLUSTER NODES")
	return h
}

// isMasterOf reports whether the node at addr says it is the master
// serving slot.
func isMasterOf(addr string, slot int64) bool {
	nodes, err := clusterNodes(addr)
	if err != nil {
		return false
	}
	for _, n := range nodes {
		if n.addr == addr {
			return n.master && n.serves(slot)
		}
	}
	return false
}

// isReplicaOf reports whether the node at addr replicates the one at master.
func isReplicaOf(t *testing.T, addr, master string) bool {
	t.Helper()
	nodes, err := clusterNodes(addr)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, n := range nodes {
		ids[n.id] = n.addr
	}
	for _, n := range nodes {
		if n.addr == addr {
			return !n.master && ids[n.masterID] == master
		}
	}
	return false
}

// replicasHealthy waits until redis-replicas is whole: every node agrees
// cluster_state is ok, three masters serve slots, each with a replica whose
// replication link is up.
func replicasHealthy(t *testing.T) {
	t.Helper()
	last := ""
	waittest.Until(t, 90*time.Second, "redis-replicas to be healthy (run `scripts/services up redis-replicas`)", func() bool {
		why := replicasProblem()
		if why != last && why != "" {
			t.Logf("redis-replicas not healthy yet: %s", why)
		}
		last = why
		return why == ""
	})
}

func replicasProblem() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, addr := range replicaAddrs {
		c := nodeClient(addr)
		info, err := c.ClusterInfo(ctx).Result()
		c.Close()
		if err != nil {
			return fmt.Sprintf("%s: %v", addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return addr + ": cluster_state not ok"
		}
	}
	nodes, err := clusterNodes(replicaAddrs[0])
	if err != nil {
		return err.Error()
	}
	masters := 0
	for _, m := range nodes {
		if !m.master || m.failing || len(m.slots) == 0 {
			continue
		}
		masters++
		synced := false
		for _, r := range nodes {
			if r.master || r.failing || r.masterID != m.id {
				continue
			}
			c := nodeClient(r.addr)
			info, err := c.Info(ctx, "replication").Result()
			c.Close()
			synced = synced || (err == nil && strings.Contains(info, "master_link_status:up"))
		}
		if !synced {
			return "master " + m.addr + " has no replica in sync"
		}
	}
	if masters != 3 {
		return fmt.Sprintf("%d masters serve slots", masters)
	}
	return ""
}

// reservationKeys lists the reservation hashes of item on one node, by
// order number.
func reservationKeys(t *testing.T, c *redis.Client, item int64, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	base := fmt.Sprintf("%s:{i%d}:r:", prefix, item)
	out := map[string]string{}
	iter := c.Scan(ctx, 0, base+"*", 1000).Iterator()
	for iter.Next(ctx) {
		out[strings.TrimPrefix(iter.Val(), base)] = iter.Val()
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no reservation of item %d on %s", item, c.Options().Addr)
	}
	return out
}

// servicesDir is scripts/services's folder (SECKILL_SERVICES_DIR or the
// module's .local).
func servicesDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("SECKILL_SERVICES_DIR"); d != "" {
		return d
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), ".local")
}

// nodePid is the pid of the node scripts/services started at addr.
func nodePid(t *testing.T, addr string) int {
	t.Helper()
	if os.Getenv("SECKILL_SERVICES") == "docker" {
		t.Skip("freezing and killing one Redis node needs the native services (scripts/services)")
	}
	f := filepath.Join(servicesDir(t), "run", nodeName(addr)+".pid")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %q", f, b)
	}
	return pid
}

// killNode sends SIGKILL to the node at addr and waits until it is gone
// (directly, not through scripts/services: its lock may be held by another
// `up` for a while, and the replica is frozen meanwhile).
func killNode(t *testing.T, addr string) {
	t.Helper()
	pid := nodePid(t, addr)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %s (pid %d): %v", addr, pid, err)
	}
	waittest.Until(t, 10*time.Second, addr+" to die", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || !nodeAnswers(addr)
	})
	t.Logf("%s killed (pid %d, SIGKILL)", nodeName(addr), pid)
}

// startNode starts the node at addr again from its data (scripts/services
// start redis-PORT).
func startNode(addr string) error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return err
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	b, err := exec.Command(filepath.Join(root, "scripts", "services"), "start", nodeName(addr)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("scripts/services start %s: %v\n%s", nodeName(addr), err, b)
	}
	return nil
}

var healLine = regexp.MustCompile(`(?m)^.*"msg":"(Redis lost data|Redis repaired|more drift repaired|Redis and MySQL agree|repair after Redis data loss)[^\n]*$`)

// healLines are the watch's lines of a consumer's log.
func healLines(log string) string {
	return strings.Join(healLine.FindAllString(log, -1), "\n")
}

// longestPending is the longest time one of the accepted orders stayed
// PENDING: from its reservation (just before the 202) to its row in MySQL
// (CREATED or FAILED).
func longestPending(t *testing.T, p *pipelinetest.Pipeline, accepted map[string]int64) time.Duration {
	t.Helper()
	us := p.Count("SELECT COALESCE(MAX(TIMESTAMPDIFF(MICROSECOND, reserved_at, created_at)), 0) FROM orders WHERE order_no IN ?", orderNos(accepted))
	return (time.Duration(us) * time.Microsecond).Round(time.Millisecond)
}
