//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Network faults: a real TCP proxy (internal/testkit/proxytest) between the programs and
// a service adds latency, cuts connections, or lets one chosen request
// through and loses its answer. The suite's own reads go to the services
// directly.

// mysqlProxy starts a proxy to the pipeline's MySQL and returns it with the
// environment entry that sends a program through it.
func mysqlProxy(t *testing.T, p *pipelinetest.Pipeline) (*proxytest.Proxy, string) {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(p.DB.DSN)
	if err != nil {
		t.Fatal(err)
	}
	px := proxytest.Start(t, cfg.Addr, proxytest.MySQL)
	cfg.Addr = px.Addr()
	countLost(t, px)
	return px, "SECKILL_MYSQL_DSN=" + cfg.FormatDSN()
}

// kafkaProxy starts the proxy in front of Kafka's PROXIED listener.
func kafkaProxy(t *testing.T) (*proxytest.Proxy, string) {
	t.Helper()
	px := proxytest.StartKafka(t)
	countLost(t, px)
	return px, "SECKILL_KAFKA_BROKERS=" + proxytest.KafkaProxiedAddr()
}

// redisProxies are proxies in front of every Redis node a program uses:
// faults are armed on each (a script runs on the one node that owns its
// item's hash tag) and counted over all.
type redisProxies []*proxytest.Proxy

// redisProxy starts a proxy in front of the single Redis node, or of each
// node of the Redis Cluster, and returns them with the environment entry
// that sends a program through them (for the cluster, the nodes' announced
// addresses mapped to their proxies).
func redisProxy(t *testing.T, cluster bool) (redisProxies, string) {
	t.Helper()
	if !cluster {
		px := proxytest.Start(t, redistest.Addr(), proxytest.RESP)
		countLost(t, px)
		return redisProxies{px}, "SECKILL_REDIS_ADDR=" + px.Addr()
	}
	var rs redisProxies
	var pairs []string
	for _, node := range redistest.ClusterAddrs() {
		px := proxytest.Start(t, node, proxytest.RESP)
		countLost(t, px)
		rs = append(rs, px)
		pairs = append(pairs, node+"="+px.Addr())
	}
	return rs, "SECKILL_REDIS_ADDR_MAP=" + strings.Join(pairs, ",")
}

func (rs redisProxies) LoseReply(m proxytest.Matcher, n int) {
	for _, px := range rs {
		px.LoseReply(m, n)
	}
}

func (rs redisProxies) LoseRequest(m proxytest.Matcher, n int) {
	for _, px := range rs {
		px.LoseRequest(m, n)
	}
}

// always arms a proxy fault for every matching request while the proxy
// lives.
const always = 1 << 30

// loseOne arms the loss of one answer to a request matching m, on the
// proxy of whichever node runs such a request first (LoseReply arms n on
// each node's proxy; a bucketed item's scripts run on several nodes).
//
// The script (a name in package lua) is loaded on every node first: the
// one-use match is taken by the first request, so that must be the one
// that runs, never an EVALSHA answered NOSCRIPT (a restarted Redis has
// forgotten its scripts).
func (rs redisProxies) loseOne(t *testing.T, script string, m proxytest.Matcher) {
	t.Helper()
	for _, px := range rs {
		c := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1})
		err := c.ScriptLoad(context.Background(), lua.Source(script)).Err()
		c.Close()
		if err != nil {
			t.Fatalf("load %s through %s: %v", script, px.Addr(), err)
		}
	}
	var taken atomic.Bool
	rs.LoseReply(func(r proxytest.Request) bool { return m(r) && taken.CompareAndSwap(false, true) }, 1)
}

func (rs redisProxies) Latency(base, jitter time.Duration) {
	for _, px := range rs {
		px.Latency(base, jitter)
	}
}

func (rs redisProxies) Cut(d time.Duration) {
	for _, px := range rs {
		px.Cut(d)
	}
}

func (rs redisProxies) Connections() int {
	var n int
	for _, px := range rs {
		n += px.Connections()
	}
	return n
}

func (rs redisProxies) Lost() int64 {
	var n int64
	for _, px := range rs {
		n += px.Lost()
	}
	return n
}

func (rs redisProxies) WaitLost(t *testing.T, n int64, within time.Duration) {
	t.Helper()
	waittest.Until(t, within, fmt.Sprintf("%d lost Redis answers (lost %d)", n, rs.Lost()), func() bool { return rs.Lost() >= n })
}

// luaScript matches the lua package's script name, run by EVALSHA or EVAL.
func luaScript(name string) proxytest.Matcher { return proxytest.RedisScript(lua.Source(name)) }

// countLost adds the answers px lost to the suite's tally when t ends.
func countLost(t *testing.T, px *proxytest.Proxy) {
	t.Cleanup(func() { lostRepliesIn(t, px.Lost()) })
}

// merge returns the union of order number -> user maps.
func merge(ms ...map[string]int64) map[string]int64 {
	all := map[string]int64{}
	for _, m := range ms {
		for no, u := range m {
			all[no] = u
		}
	}
	return all
}

// answersKept checks the promise behind every answer the loads got: a buyer
// answered 503 holds nothing, and the same Idempotency-Key then buys; every
// order answered 202 (the retries' included) ends CREATED or FAILED, and
// the same key returns the same order_no. It settles the sale and returns
// every accepted order.
func answersKept(t *testing.T, p *pipelinetest.Pipeline, api *pipelinetest.API, sale pipelinetest.Sale, loads ...*load) (map[string]int64, pipelinetest.Invariants) {
	t.Helper()
	var refused []int64
	for _, l := range loads {
		refusedHoldNothing(t, p, sale, l)
		if l.neterrs != 0 {
			t.Errorf("%d requests got no HTTP answer at all", l.neterrs)
		}
		for u, code := range l.byUser {
			if code == 503 {
				refused = append(refused, u)
			}
		}
	}
	accepted := merge(retryAll(t, api, sale, refused))
	for _, l := range loads {
		accepted = merge(accepted, l.accepted)
	}
	t.Logf("%d buyers answered 503 bought on their retry with the same key", len(refused))
	inv := settle(t, p, sale, accepted, 60*time.Second)
	final, err := p.DB.Orders.Orders(t.Context(), keys(accepted))
	if err != nil {
		t.Fatal(err)
	}
	for no, u := range accepted {
		if s := final[no].Status; s != order.Created && s != order.Failed {
			t.Errorf("order %s of user %d ended %s, want CREATED or FAILED", no, u, s)
		}
		pl, err := buyAgain(api, sale, final[no])
		if err != nil || pl.Code != 202 || pl.OrderNo != no {
			t.Errorf("user %d's key again: %d %s %q (%v), want 202 and order %s", u, pl.Code, pl.Error, pl.OrderNo, err, no)
		}
	}
	return accepted, inv
}

// logOnFailure logs, if t fails, the lines of pr's log that contain what
// (the harness keeps only the log's tail).
func logOnFailure(t *testing.T, pr *pipelinetest.Proc, what string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, line := range strings.Split(pr.Log(), "\n") {
			if strings.Contains(line, what) {
				t.Logf("%s: %s", pr.Name, line)
			}
		}
	})
}

func keys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// latencyScenario runs a sale while the proxy px adds 200 ms ± 100 ms each
// way for 10 s.
func latencyScenario(t *testing.T, p *pipelinetest.Pipeline, px *proxytest.Proxy, api *pipelinetest.API) {
	t.Helper()
	sale := api.CreateSale(200, 1)
	px.Latency(200*time.Millisecond, 100*time.Millisecond)
	l := startLoad(api, sale, users(1, 300), 12*time.Second, 20)
	time.Sleep(10 * time.Second)
	px.Latency(0, 0)
	l.wait()
	t.Logf("accepted %d, refused %v, network errors %d", len(l.accepted), l.codes, l.neterrs)
	refused := refusedHoldNothing(t, p, sale, l)
	if l.neterrs != 0 || len(l.accepted)+refused+l.codes["409 SOLD_OUT"] != 300 {
		t.Fatalf("unexpected answers: %v (network errors %d)", l.codes, l.neterrs)
	}
	inv := settle(t, p, sale, l.accepted, 60*time.Second)
	if inv.LiveOrders != int64(len(l.accepted)) {
		t.Fatalf("accepted %d, live %d", len(l.accepted), inv.LiveOrders)
	}
}

// N1. 200 ms ± 100 ms on every MySQL round trip of the api and the
// consumer for 10 s of a sale.
func TestChaosNetMySQLLatency(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	px, dsn := mysqlProxy(t, p)
	api := p.StartAPI(dsn)
	p.StartConsumer(dsn)
	latencyScenario(t, p, px, api)
}

// N2. The same on Kafka: the api's produces and the consumer's fetches,
// group and offset traffic.
func TestChaosNetKafkaLatency(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	px, brokers := kafkaProxy(t)
	api := p.StartAPI(brokers)
	p.StartConsumer(brokers)
	latencyScenario(t, p, px, api)
	if px.Connections() == 0 {
		t.Fatal("no connection through the Kafka proxy: the programs bypassed it")
	}
}

// N3. The consumer's MySQL link is cut for 5 s right when a batch commits:
// the COMMIT ran, the consumer never heard. It must resolve the unknown
// outcome and end exact: each order once, nothing oversold.
func TestChaosNetMySQLCommitCut(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	px, dsn := mysqlProxy(t, p)
	api := p.StartAPI()
	admin := pipelinetest.FreeAddr(t)
	p.StartConsumer(dsn, "SECKILL_CONSUMER_BATCH=50", "SECKILL_ADMIN_ADDR="+admin, noSweep)
	sale := api.CreateSale(150, 1)
	// One order first, so the consumer is reading when the cut is armed.
	first := startLoad(api, sale, users(10001, 1), 0, 1).wait()
	p.WaitFinal(first.accepted, 60*time.Second)
	px.CutAfter(proxytest.MySQLQuery("COMMIT"), 5*time.Second)
	l := startLoad(api, sale, users(1, 200), 2*time.Second, 20)
	px.WaitLost(t, 1, 30*time.Second)
	l.wait()
	all := merge(first.accepted, l.accepted)
	inv := settle(t, p, sale, all, 90*time.Second)
	if len(all) != 150 || inv.LiveOrders != 150 {
		t.Fatalf("accepted %d (%v), live %d; want 150 of each", len(all), l.codes, inv.LiveOrders)
	}
	rows := p.Count("SELECT COUNT(*) FROM orders WHERE item_id = ?", sale.ItemID)
	if rows != int64(len(all)) {
		t.Fatalf("%d order rows for %d accepted orders", rows, len(all))
	}
	// The consumer did not hear its COMMIT: it retried the batch.
	if got := pipelinetest.ScrapeMetrics(t, "http://"+admin+"/metrics").Value("seckill_consumer_batch_retries_total"); got < 1 {
		t.Fatalf("seckill_consumer_batch_retries_total = %v after the consumer's COMMIT answer was lost", got)
	}
}

// N4. The api's produce reaches the broker, then the link is cut before
// the answer (and refused for 3 s, past the api's write timeout): the
// outcome is unknown to the api. A buyer answered 503 holds nothing and
// buys with the same key; every 202 ends final.
func TestChaosNetKafkaProduceCut(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	px, brokers := kafkaProxy(t)
	api := p.StartAPI(brokers, "SECKILL_KAFKA_WRITE_TIMEOUT=1s")
	p.StartConsumer()
	sale := api.CreateSale(1000, 1)
	warm := startLoad(api, sale, users(10001, 5), 0, 5).wait()
	if px.Connections() == 0 {
		t.Fatal("no connection through the Kafka proxy: the api bypassed it")
	}
	px.CutAfter(proxytest.KafkaRequest(proxytest.KafkaProduce), 3*time.Second)
	l := startLoad(api, sale, users(1, 100), 2*time.Second, 20)
	px.WaitLost(t, 1, 30*time.Second)
	l.wait()
	t.Logf("produce cut: %d accepted, refused %v", len(l.accepted), l.codes)
	accepted, inv := answersKept(t, p, api, sale, warm, l)
	if inv.LiveOrders != 105 || len(accepted) != 105 {
		t.Fatalf("live %d, accepted %d; want every one of 105 buyers to hold one order", inv.LiveOrders, len(accepted))
	}
}

// N5. The answer to each state-changing Redis script is lost once, with the
// api and the consumer talking to Redis through proxies: reserve; release
// (the api's 503 path: its produce reaches the broker and the answer is cut,
// the consumer's Redis is cut meanwhile so the reservation is still
// RESERVED, and the answer to the release is lost too); claim; confirm. A
// buyer answered 503 holds nothing and buys with the same key; every 202
// ends final and its key returns the same order_no.
func TestChaosNetRedisScriptRepliesLost(t *testing.T) {
	fault(t)
	scriptRepliesLost(t, false, false)
}

// N6. N5 on the Redis Cluster, a proxy in front of each node (the cluster
// client must not resend a script whose answer it lost either).
func TestChaosNetRedisClusterScriptRepliesLost(t *testing.T) {
	fault(t)
	scriptRepliesLost(t, true, false)
}

// N6s. N6 with a sale in eight sizes of uneven stock, some buyers clicking
// on two sizes at once: every key of the sale is under its first item's
// hash tag, on one node, and each lost answer is resolved per size.
func TestChaosNetRedisClusterScriptRepliesLostSized(t *testing.T) {
	fault(t)
	scriptRepliesLost(t, true, true)
}

func scriptRepliesLost(t *testing.T, cluster, sized bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3, RedisCluster: cluster})
	apiRedis, apiRedisEnv := redisProxy(t, cluster)
	consumerRedis, consumerRedisEnv := redisProxy(t, cluster)
	kp, brokers := kafkaProxy(t)
	api := p.StartAPI(apiRedisEnv, brokers, "SECKILL_KAFKA_WRITE_TIMEOUT=1s")
	p.StartConsumer(consumerRedisEnv, "SECKILL_CONSUMER_BATCH=20")
	logOnFailure(t, api.Proc, "not confirmed")
	sale := newSale(api, 1000, sized)
	loads := []*load{startLoad(api, sale, users(10001, 5), 0, 5).wait()}
	for name, rs := range map[string]redisProxies{"api": apiRedis, "consumer": consumerRedis} {
		// The consumer connects when it first claims: give it a moment.
		waittest.Until(t, 20*time.Second, "a connection through the "+name+"'s Redis proxies (else it bypassed them)",
			func() bool { return rs.Connections() > 0 })
	}
	phase := func(name string, from int64, px redisProxies, want int64, arm func()) {
		t.Helper()
		arm()
		l := startLoad(api, sale, users(from, 30), time.Second, 10)
		px.WaitLost(t, want, 30*time.Second)
		l.wait()
		t.Logf("%s answer lost: %d accepted, refused %v", name, len(l.accepted), l.codes)
		loads = append(loads, l)
	}
	phase("reserve", 101, apiRedis, 1, func() { apiRedis.LoseReply(luaScript("reserve"), 1) })
	phase("release", 201, apiRedis, 2, func() {
		consumerRedis.Cut(4 * time.Second)
		kp.CutAfter(proxytest.KafkaRequest(proxytest.KafkaProduce), 3*time.Second)
		apiRedis.LoseReply(luaScript("release"), 1)
	})
	if kp.Lost() != 1 {
		t.Fatalf("the api's produce was not cut after reaching the broker (lost %d)", kp.Lost())
	}
	phase("claim", 301, consumerRedis, 1, func() { consumerRedis.LoseReply(luaScript("claim"), 1) })
	phase("confirm", 401, consumerRedis, 2, func() { consumerRedis.LoseReply(luaScript("confirm"), 1) })
	accepted, inv := answersKept(t, p, api, sale, loads...)
	if inv.LiveOrders != 125 || len(accepted) != 125 {
		t.Fatalf("live %d, accepted %d; want every one of 125 buyers to hold one order", inv.LiveOrders, len(accepted))
	}
}
