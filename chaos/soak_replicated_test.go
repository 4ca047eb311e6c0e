//go:build soak

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
)

// The soak on the replicated topology (`make soak TOPOLOGY=replicated`):
// the three services of docs/replicated.md (kafka-cluster, redis-replicas,
// mysql-standby) started by scripts/services in the soak's own folder, on
// ports from SOAK_PORT_BASE, and the faults that topology adds.
//
// What runs of the single-node faults, and why not the others: the
// programs reach MySQL through their own proxies, as on the single node,
// so lost COMMIT and UPDATE answers, latency and cut links on MySQL,
// mysql-stall (of the primary), kill-program and clock-skew all run. The
// programs reach Redis and Kafka directly: a Redis Cluster client follows
// the nodes' own addresses from CLUSTER SLOTS and a Kafka client the
// brokers' advertised listeners, so a proxy in front of them would need
// every node started with its announced address at the proxy's; lost
// Redis and Kafka answers and their latency stay the single-node soak's.
// kill-service and redis-restore become the node faults below, and the
// pinned flushes empty every master.
//
// A broker cut off from the other two (cut-broker, brokerCuts) is
// `scripts/services cut`: iptables drops the brokers' own traffic (their
// internal and controller listeners, which the programs never use), so the
// cut node still answers the programs, as leader of what it led.

// replicatedKinds are the faults drawn on the replicated topology, with
// their weights.
var replicatedKinds = []struct {
	kind string
	w    int
}{
	{faultLoseMySQL, 2}, {faultLatency, 2}, {faultCut, 2}, {faultKillProg, 3}, {faultStall, 2}, {faultSkew, 1},
	{faultKillBroker, 3}, {faultKillMaster, 2}, {faultRedisFailover, 2}, {faultMySQLFailover, 1},
}

// drawReplicated draws the target and times of a fault of the replicated
// topology's own kinds.
func drawReplicated(f *soakFault, intN func(int) int, between func(lo, hi time.Duration) time.Duration) {
	switch f.Kind {
	case faultKillBroker:
		f.Target, f.For = fmt.Sprintf("kafka-%d", 1+intN(3)), between(time.Second, 10*time.Second)
	case faultKillMaster:
		// N=1: the replica is made to lag first (lagMaster), so the
		// promotion loses what the master acknowledged since.
		f.Target, f.N, f.For = fmt.Sprintf("redis-shard-%d", intN(3)), intN(2), between(5*time.Second, 15*time.Second)
	case faultRedisFailover:
		f.Target, f.For = fmt.Sprintf("redis-shard-%d", intN(3)), between(2*time.Second, 6*time.Second)
	case faultMySQLFailover:
		// For: from the crash until the old primary is started again (it
		// comes back as the standby).
		f.Target, f.For = "mysql", between(10*time.Second, 25*time.Second)
	}
}

// heldAs is what a fault holds: the nodes of one service are held as the
// service, so that one broker, one Redis shard's failover and one MariaDB
// switch are under way at a time (two brokers down stop every write; two
// Redis failovers at once may leave a shard without a replica; a second
// switch needs the standby back).
func heldAs(f soakFault) string {
	switch f.Kind {
	case faultKillBroker, faultCutBroker:
		return "kafka"
	case faultKillMaster, faultRedisFailover:
		return "redis"
	}
	return f.Target
}

// brokerCuts draws the cut-broker faults: one broker of the three cut off
// from the others for 3-15 s, about one every 45 s (as often as a weight of
// 2 among replicatedKinds would draw it), placed where no other broker
// fault holds the cluster. They come from a PCG stream of their own, as the
// slow stretches do, so that a seed's other faults are those it gave before
// cuts were added (the documented runs replay).
func brokerCuts(seed uint64, d time.Duration, held *holds) []soakFault {
	r := rand.New(rand.NewPCG(seed, 0x5eedc075))
	between := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(r.Int64N(int64(hi-lo)+1))).Round(10 * time.Millisecond)
	}
	var out []soakFault
	end := d - time.Second
	for at := time.Second; ; {
		at += time.Duration(r.ExpFloat64() * float64(45*time.Second)).Round(10 * time.Millisecond)
		if at >= end {
			return out
		}
		f := soakFault{At: at, Kind: faultCutBroker, Target: fmt.Sprintf("kafka-%d", 1+r.IntN(3)),
			For: min(between(3*time.Second, 15*time.Second), end-at)}
		if held.free(f) {
			held.take(f)
			out = append(out, f)
		}
	}
}

// saleHShard is the target of the pinned master kill: the master that
// holds sale H's hash tag.
const saleHShard = "redis-sale-H"

// pinnedReplicated are the replicated topology's pinned faults: the flushes
// and the endpoint down as on the single node; in place of the restores,
// the master holding sale H killed right after its draw while its replica
// lags (the draw's writes lost on Redis), and a MariaDB switch while H's
// alternates are under way.
func pinnedReplicated(d time.Duration) []soakFault {
	if d < time.Minute {
		return nil
	}
	closeAt := drawCloseIn(d)
	return []soakFault{
		{At: d / 5, Kind: faultFlush, Target: "redis", For: 5 * time.Second, Why: "sale G's room emptied while it admits"},
		{At: closeAt + time.Second, Kind: faultKillMaster, Target: saleHShard, N: 1, For: 8 * time.Second,
			Why: "sale H's master killed after its draw, its replica lagging"},
		{At: d * 2 / 5, Kind: faultMySQLFailover, Target: "mysql", For: 15 * time.Second,
			Why: "the primary crashed while sale H's alternates are under way"},
		{At: d * 3 / 5, Kind: faultFlush, Target: "redis", For: 5 * time.Second,
			Why: "sale G's room emptied again, sale H's alternates under way"},
		{At: d / 5, Kind: faultHookDown, Target: hookFaulty, For: hookDownFor(d),
			Why: "an endpoint down: its deliveries wait on the retry schedule"},
	}
}

// soakTopology is SOAK_TOPOLOGY: single (the default) or replicated.
func soakTopology() (string, error) {
	switch v := os.Getenv("SOAK_TOPOLOGY"); v {
	case "", topologySingle:
		return topologySingle, nil
	case topologyReplicated:
		return topologyReplicated, nil
	default:
		return "", fmt.Errorf("SOAK_TOPOLOGY=%q: want %s or %s", v, topologySingle, topologyReplicated)
	}
}

// replicatedServices are the names scripts/services starts the replicated
// topology by.
var replicatedServices = []string{"kafka-cluster", "redis-replicas", "mysql-standby"}

// replicatedPorts places the replicated topology on ports from base (the
// single node's ports from base are not used then) and returns the
// environment scripts/services reads them from.
func (ps *privateServices) replicatedPorts(base int) map[string]string {
	join := func(ports []int) string {
		s := make([]string, len(ports))
		for i, p := range ports {
			s[i] = strconv.Itoa(p)
		}
		return strings.Join(s, " ")
	}
	var kafka, controllers, internal, redisPorts []int
	for i := range 3 {
		kafka = append(kafka, base+111+i)
		controllers = append(controllers, base+121+i)
		internal = append(internal, base+131+i)
		ps.brokers = append(ps.brokers, fmt.Sprintf("127.0.0.1:%d", base+111+i))
	}
	for i := range 6 {
		redisPorts = append(redisPorts, base+701+i)
		ps.redisAddrs = append(ps.redisAddrs, fmt.Sprintf("127.0.0.1:%d", base+701+i))
	}
	ps.mysqlPorts = []int{base + 307, base + 308}
	ps.primary = ps.mysqlPorts[0]
	ps.mysql = ps.primary
	return map[string]string{
		"SECKILL_KAFKA_CLUSTER_PORTS":            join(kafka),
		"SECKILL_KAFKA_CLUSTER_CONTROLLER_PORTS": join(controllers),
		"SECKILL_KAFKA_CLUSTER_INTERNAL_PORTS":   join(internal),
		"SECKILL_REDIS_REPLICAS_PORTS":           join(redisPorts),
		"SECKILL_MYSQL_STANDBY_PORTS":            join(ps.mysqlPorts),
	}
}

// mysqlNode is the name scripts/services gives the MariaDB the programs
// write to: "mysql", or the replicated topology's primary of the moment.
func (ps *privateServices) mysqlNode() string {
	if ps.replicated {
		return fmt.Sprintf("mysql-%d", ps.primary)
	}
	return "mysql"
}

// servicesTry runs scripts/services in the soak's folder and returns its
// output and error, for the steps a failure of which the soak handles.
func (s *soak) servicesTry(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(s.svc.root, "scripts", "services"), args...)
	cmd.Dir = s.svc.root
	b, err := cmd.CombinedOutput()
	out := strings.TrimSpace(string(b))
	s.t.Logf("services %s: %s", strings.Join(args, " "), tail(out, 600))
	return out, err
}

// nodes reads CLUSTER NODES from the first node that answers, without the
// nodes flagged failing.
func (s *soak) nodes() ([]clusterNode, error) {
	var last error
	for _, a := range s.svc.redisAddrs {
		all, err := clusterNodes(a)
		if err != nil {
			last = err
			continue
		}
		var out []clusterNode
		for _, n := range all {
			if !n.failing {
				out = append(out, n)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("no node of the cluster answers: %w", last)
}

// shard finds the master serving a target's slot ("redis-shard-N": slot
// N×5461; saleHShard: the slot of sale H's keys) and a replica of it.
func (s *soak) shard(target string) (master, replica clusterNode, err error) {
	var slot int64
	if target == saleHShard {
		var h *soakSale
		for _, sl := range s.sales {
			if sl.name == "H" {
				h = sl
			}
		}
		if h == nil {
			return master, replica, fmt.Errorf("no sale H")
		}
		key := s.p.Store.Keys(soakItem{sale: h, ID: h.ItemID}.key()).Inflight()
		c := redis.NewClient(&redis.Options{Addr: s.svc.redisAddrs[0]})
		slot, err = c.ClusterKeySlot(context.Background(), key).Result()
		_ = c.Close()
		if err != nil {
			return master, replica, err
		}
	} else {
		n, err := strconv.Atoi(strings.TrimPrefix(target, "redis-shard-"))
		if err != nil {
			return master, replica, fmt.Errorf("target %q: %w", target, err)
		}
		slot = int64(n) * 5461
	}
	nodes, err := s.nodes()
	if err != nil {
		return master, replica, err
	}
	for _, n := range nodes {
		if n.master && n.serves(slot) {
			master = n
		}
	}
	if master.id == "" {
		return master, replica, fmt.Errorf("no master serves slot %d", slot)
	}
	for _, n := range nodes {
		if !n.master && n.masterID == master.id {
			replica = n
		}
	}
	if replica.id == "" {
		return master, replica, fmt.Errorf("master %s (slot %d) has no replica", master.addr, slot)
	}
	return master, replica, nil
}

// redisHealthy waits (up to 30 s) until every master has a replica in sync,
// so that a Redis fault starts on a cluster that can fail over; it says
// whether it got there.
func (s *soak) redisHealthy() bool {
	ok := pollUntil(time.Now().Add(30*time.Second), 200*time.Millisecond, func() bool {
		_, err := s.servicesTry("status", "redis-replicas")
		return err == nil
	})
	if !ok {
		s.t.Logf("soak: redis-replicas not healthy after 30 s; the fault goes on")
	}
	return ok
}

// lane runs step after the steps queued before it on the same lane (one
// lane per service, heldAs), in a goroutine of its own: a node's restart
// or a switch-over takes seconds to half a minute, and the schedule's
// other faults go on meanwhile, on time. waitLanes waits for every lane.
func (s *soak) lane(name string, step func()) {
	s.lanesMu.Lock()
	defer s.lanesMu.Unlock()
	if s.lanes == nil {
		s.lanes = map[string]chan func(){}
	}
	q, ok := s.lanes[name]
	if !ok {
		q = make(chan func(), 64)
		s.lanes[name] = q
		s.lanesWG.Add(1)
		go func() {
			defer s.lanesWG.Done()
			for step := range q {
				step()
			}
		}()
	}
	q <- step
}

// setKilled records the node fault i killed (the lanes run at once).
func (s *soak) setKilled(i int, node string) {
	s.lanesMu.Lock()
	defer s.lanesMu.Unlock()
	s.killed[i] = node
}

// killedBy is the node fault i killed, if any.
func (s *soak) killedBy(i int) string {
	s.lanesMu.Lock()
	defer s.lanesMu.Unlock()
	return s.killed[i]
}

// waitLanes waits until every step queued on a lane ran.
func (s *soak) waitLanes() {
	s.lanesMu.Lock()
	for name, q := range s.lanes {
		close(q)
		delete(s.lanes, name)
	}
	s.lanesMu.Unlock()
	s.lanesWG.Wait()
}

// startReplicated starts a service fault on the replicated topology, on
// its service's lane.
func (s *soak) startReplicated(i int, f soakFault) {
	s.lane(heldAs(f), func() { s.startOnLane(i, f) })
}

// endReplicated ends a service fault on the replicated topology, on its
// service's lane.
func (s *soak) endReplicated(i int, f soakFault) {
	s.lane(heldAs(f), func() { s.endOnLane(i, f) })
}

func (s *soak) startOnLane(i int, f soakFault) {
	switch f.Kind {
	case faultStall:
		s.signalNode(s.svc.mysqlNode(), syscall.SIGSTOP)
	case faultFlush:
		s.flushReplicated()
		s.lost()
	case faultKillBroker:
		if _, err := s.servicesTry("kill", f.Target); err != nil {
			s.t.Logf("soak: %s: %v", f, err)
		}
	case faultCutBroker:
		if _, err := s.servicesTry("cut", f.Target); err != nil {
			s.t.Errorf("soak: %s: %v", f, err)
		}
	case faultKillMaster:
		s.redisHealthy()
		m, r, err := s.shard(f.Target)
		if err != nil {
			s.t.Logf("soak: %s: %v", f, err)
			return
		}
		if f.N == 1 {
			s.lagReplica(m, r)
		}
		s.lost() // what the replica did not have
		if _, err := s.servicesTry("kill", nodeName(m.addr)); err != nil {
			s.t.Logf("soak: %s: %v", f, err)
		}
		if f.N == 1 {
			s.signalNode(nodeName(r.addr), syscall.SIGCONT)
		}
		s.setKilled(i, nodeName(m.addr))
	case faultRedisFailover:
		s.redisHealthy()
		m, r, err := s.shard(f.Target)
		if err != nil {
			s.t.Logf("soak: %s: %v", f, err)
			return
		}
		c := redis.NewClient(&redis.Options{Addr: r.addr})
		defer c.Close()
		if err := c.Do(context.Background(), "CLUSTER", "FAILOVER").Err(); err != nil {
			s.t.Logf("soak: CLUSTER FAILOVER on %s (replica of %s): %v", r.addr, m.addr, err)
			return
		}
		if !pollUntil(time.Now().Add(5*time.Second), 50*time.Millisecond, func() bool {
			role, err := c.Do(context.Background(), "ROLE").Slice()
			return err == nil && len(role) > 0 && role[0] == "master"
		}) {
			s.t.Logf("soak: %s did not take over from %s within 5 s", r.addr, m.addr)
		}
	case faultMySQLFailover:
		s.mysqlFailover(i)
	}
}

func (s *soak) endOnLane(i int, f soakFault) {
	switch f.Kind {
	case faultStall:
		s.signalNode(s.svc.mysqlNode(), syscall.SIGCONT)
	case faultKillBroker:
		if _, err := s.servicesTry("start", f.Target); err != nil {
			s.t.Logf("soak: %s: %v", f, err)
		}
	case faultCutBroker:
		if _, err := s.servicesTry("heal", f.Target); err != nil {
			s.t.Errorf("soak: %s: %v", f, err)
		}
	case faultKillMaster:
		if node := s.killedBy(i); node != "" {
			// It comes back as a replica of the node promoted in its place.
			if _, err := s.servicesTry("start", node); err != nil {
				s.t.Logf("soak: %s: %v", f, err)
			}
		}
	case faultMySQLFailover:
		if old := s.killedBy(i); old != "" {
			s.rejoin(old)
		}
	}
}

// lagReplica makes r fall behind its master m, as docs/replicated.md's
// TestReplicatedRedisMasterKilled does: r frozen, its link cut on m, the
// sale going on against m alone for a second; the caller kills m and
// resumes r, which is promoted without that second.
func (s *soak) lagReplica(m, r clusterNode) {
	s.signalNode(nodeName(r.addr), syscall.SIGSTOP)
	c := redis.NewClient(&redis.Options{Addr: m.addr})
	defer c.Close()
	if err := c.Do(context.Background(), "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		s.t.Logf("soak: CLIENT KILL TYPE replica on %s: %v", m.addr, err)
	}
	time.Sleep(time.Second) // the lag: a second of the sale on m alone
}

// signalNode sends sig to one node scripts/services started (logged, not
// fatal: the node may be down already).
func (s *soak) signalNode(node string, sig syscall.Signal) {
	pid, err := s.svc.pid(node)
	if err == nil {
		err = syscall.Kill(pid, sig)
	}
	if err != nil {
		s.t.Logf("soak: signal %v to %s: %v", sig, node, err)
	}
}

// mysqlFailover crashes the primary and promotes the standby by the
// runbook (docs/operations.md: `scripts/services promote`), then repoints
// the programs as docs/replicated.md says: restarted with a DSN naming the
// new primary (here: new proxies to it).
func (s *soak) mysqlFailover(i int) {
	old := s.svc.primary
	standby := s.svc.mysqlPorts[0]
	if standby == old {
		standby = s.svc.mysqlPorts[1]
	}
	s.t.Logf("soak: mysql-failover: kill -9 of the primary mysql-%d", old)
	if _, err := s.servicesTry("kill", fmt.Sprintf("mysql-%d", old)); err != nil {
		s.t.Logf("soak: mysql-failover: %v", err)
		return
	}
	s.setKilled(i, fmt.Sprintf("mysql-%d", old))
	if _, err := s.servicesTry("promote", fmt.Sprintf("mysql-%d", standby)); err != nil {
		// The standby refused (it had not applied what it received within
		// a minute): the old primary comes back as the primary.
		s.t.Logf("soak: mysql-failover: promote refused: %v; the old primary is started again", err)
		s.setKilled(i, "")
		if _, err := s.servicesTry("start", fmt.Sprintf("mysql-%d", old)); err != nil {
			s.t.Errorf("soak: mysql-failover: neither promoted nor the old primary back: %v", err)
			return
		}
		// Restarted, it commits asynchronously until the standby is
		// connected again: the fault lasts until then (seed 3 crashed it
		// again within those seconds, the next failover queued behind
		// this one's minute, and lost what it had committed alone).
		s.semiSyncWhole(fmt.Sprintf("mysql-%d", standby))
		return
	}
	s.svc.primary = standby
	s.repointMySQL(standby)
}

// repointMySQL points every program and the checker at the primary on
// port: each program gets a proxy to it and is restarted (SIGTERM, a
// deploy) with that DSN; the checker opens the run's database there.
func (s *soak) repointMySQL(port int) {
	cfg, err := mysqldrv.ParseDSN(s.p.DB.DSN)
	if err != nil {
		s.t.Errorf("soak: repoint: %v", err)
		return
	}
	cfg.Addr = fmt.Sprintf("127.0.0.1:%d", port)
	db, err := orderdb.Open(orderdb.Config{DSN: cfg.FormatDSN(), MaxOpenConns: 8})
	if err != nil {
		s.t.Errorf("soak: open the run's database on the new primary: %v", err)
		return
	}
	s.t.Cleanup(func() { db.Close() })
	s.p.DB = &mysqltest.DB{DB: db, Name: s.p.DB.Name, DSN: cfg.FormatDSN()}
	var wg sync.WaitGroup
	for _, pr := range s.programs {
		px := proxytest.Start(s.t, cfg.Addr, proxytest.MySQL)
		pc := *cfg
		pc.Addr = px.Addr()
		pr.mu.Lock()
		pr.mysqlPx = px
		for j, e := range pr.env {
			if strings.HasPrefix(e, "SECKILL_MYSQL_DSN=") {
				pr.env[j] = "SECKILL_MYSQL_DSN=" + pc.FormatDSN()
			}
		}
		pr.mu.Unlock()
		wg.Add(1)
		go func() { defer wg.Done(); s.restartClean(pr) }()
	}
	wg.Wait()
	s.t.Logf("soak: the programs restart on the new primary 127.0.0.1:%d", port)
}

// rejoin starts the old primary again: it comes back as the standby of the
// new one. When it holds transactions the new primary never received (it
// crashed after writing them to its binlog, before the standby had them),
// it refuses to follow, and is copied anew (`scripts/services reseed`, the
// runbook's step for that case); the soak notes it, since those are the
// transactions the crash cost.
//
// The fault lasts until the pair is whole again: the primary back in
// semi-synchronous replication with it (it runs asynchronously while the
// standby catches up, and a crash then would lose what the standby had not
// received: a second fault of the same service, which the schedule never
// overlaps).
func (s *soak) rejoin(node string) {
	if _, err := s.servicesTry("start", node); err != nil {
		s.log.mu.Lock()
		s.reseeded = append(s.reseeded, node)
		s.log.mu.Unlock()
		if _, err := s.servicesTry("reseed", node); err != nil {
			s.t.Logf("soak: reseed %s: %v", node, err)
			return
		}
	}
	s.semiSyncWhole(node)
}

// semiSyncWhole waits (up to a minute) until the primary has its standby,
// node, connected as a semi-synchronous client again, and logs how long
// it took. `start` of a standby returns once it has received all the
// primary had written; semi-sync needs it connected as a semi-sync client
// too (the status alone says ON with no client at all).
func (s *soak) semiSyncWhole(node string) {
	start := time.Now()
	if !pollUntil(start.Add(60*time.Second), 100*time.Millisecond, func() bool {
		var st struct{ Clients, Status string }
		err := s.p.DB.Gorm().Raw(`SELECT
			(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_CLIENTS') AS clients,
			(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_STATUS') AS status`).Scan(&st).Error
		return err == nil && st.Clients != "" && st.Clients != "0" && st.Status == "ON"
	}) {
		s.t.Logf("soak: the primary is not semi-synchronous with %s after 60 s", node)
		return
	}
	s.t.Logf("soak: the primary is semi-synchronous with %s again after %v", node, time.Since(start).Round(time.Millisecond))
}

// flushReplicated empties every master of the cluster (FLUSHALL, which
// their replicas follow).
func (s *soak) flushReplicated() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, ok := s.p.Redis.(*redis.ClusterClient)
	if !ok {
		s.t.Error("the replicated soak's Redis client is not a cluster client")
		return
	}
	if err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.FlushAll(ctx).Err() }); err != nil {
		s.t.Logf("soak: FLUSHALL on the masters: %v", err)
	}
}

// healReplicated brings every node of the replicated topology back (a
// frozen Redis replica resumed and every broker healed of a cut first) and
// waits until each service is
// whole: three brokers, three masters with a replica in sync each, the
// primary with its standby replicating.
func (s *soak) healReplicated() {
	for _, a := range s.svc.redisAddrs {
		if pid, err := s.svc.pid(nodeName(a)); err == nil {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	for _, p := range s.svc.mysqlPorts {
		if pid, err := s.svc.pid(fmt.Sprintf("mysql-%d", p)); err == nil {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	if _, err := s.servicesTry("heal", "kafka-cluster"); err != nil {
		s.t.Errorf("soak: heal every broker: %v", err)
	}
	if _, err := s.servicesTry(append([]string{"up"}, replicatedServices...)...); err != nil {
		s.t.Errorf("soak: the replicated topology did not come back whole: %v", err)
	}
}

// The replicated schedule keeps the single one's rules with its own kinds:
// a pure function of the seed; one fault at a time per service's nodes
// (heldAs), at most three service faults at once; links only MySQL's; the
// pinned faults in every run of a minute or more; and across seeds every
// kind of the topology drawn, a lagging replica among the master kills.
func TestSoakReplicatedSchedule(t *testing.T) {
	a, b := makeScheduleOn(7, 5*time.Minute, topologyReplicated), makeScheduleOn(7, 5*time.Minute, topologyReplicated)
	if a.String() != b.String() || len(a.Faults) == 0 {
		t.Fatalf("seed 7 gave two schedules:\n%s\n%s", a, b)
	}
	if a.String() == makeSchedule(7, 5*time.Minute).String() {
		t.Fatal("the replicated schedule is the single node's")
	}
	allowed := map[string]bool{faultHookDown: true, faultHookSlow: true, faultFlush: true, faultCutBroker: true}
	for _, k := range replicatedKinds {
		allowed[k.kind] = true
	}
	seen := map[string]int{}
	lagging := 0
	for seed := uint64(1); seed <= 50; seed++ {
		s := makeScheduleOn(seed, 3*time.Minute, topologyReplicated)
		pinned := 0
		for i, f := range s.Faults {
			seen[f.Kind]++
			if f.Why != "" {
				pinned++
			}
			if f.Kind == faultKillMaster && f.N == 1 {
				lagging++
			}
			if !allowed[f.Kind] {
				t.Fatalf("seed %d: %s is no fault of the replicated topology", seed, f)
			}
			if (f.Kind == faultLatency || f.Kind == faultCut || f.Kind == faultLoseMySQL) && !strings.HasSuffix(f.Target, "/mysql") {
				t.Fatalf("seed %d: %s holds a link the replicated soak does not proxy", seed, f)
			}
			if f.At+f.For > s.Duration {
				t.Fatalf("seed %d: %s ends after the run", seed, f)
			}
			if why := holdBreach(s, i, 3); why != "" {
				t.Fatalf("seed %d: %s", seed, why)
			}
		}
		if pinned != len(pinnedReplicated(s.Duration)) {
			t.Fatalf("seed %d: %d pinned faults, want the %d of pinnedReplicated", seed, pinned, len(pinnedReplicated(s.Duration)))
		}
	}
	for k := range allowed {
		if seen[k] == 0 {
			t.Errorf("no %s in 50 seeds of 3 minutes: %s", k, countsLine(seen))
		}
	}
	if lagging < 50 {
		t.Errorf("%d master kills with a lagging replica in 50 seeds, want one a run at least", lagging)
	}
}
