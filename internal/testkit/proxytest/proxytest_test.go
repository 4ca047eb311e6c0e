package proxytest_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
)

// proxiedClient is a go-redis client to Redis through a fresh proxy, with
// client retries off (a retry would run the command twice).
func proxiedClient(t *testing.T) (*proxytest.Proxy, *redis.Client) {
	t.Helper()
	p := proxytest.Start(t, redistest.Addr(), proxytest.RESP)
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { c.Close() })
	return p, c
}

// pipelineSetIncr sends SET key 41 and INCR key through p in one write and
// returns all that comes back until the connection closes (5 s at most).
func pipelineSetIncr(t *testing.T, p *proxytest.Proxy, key string) ([]byte, error) {
	t.Helper()
	raw, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	req := fmt.Sprintf("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$2\r\n41\r\n*2\r\n$4\r\nincr\r\n$%d\r\n%s\r\n",
		len(key), key, len(key), key)
	if _, err := raw.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	return io.ReadAll(raw)
}

func TestRedisLostReplyRan(t *testing.T) {
	direct, prefix := redistest.New(t)
	ctx := context.Background()
	p, c := proxiedClient(t)
	key := prefix + ":n"

	// Pipelined requests are framed one by one: the lost answer is the
	// INCR's; the SET's before it arrives, then the connection closes.
	p.LoseReply(proxytest.RedisCommand("incr"), 1)
	got, err := pipelineSetIncr(t, p, key)
	if string(got) != "+OK\r\n" || err != nil {
		t.Fatalf("pipelined SET, INCR answered %q, %v; want +OK and then the connection closed", got, err)
	}
	p.WaitLost(t, 1, 5*time.Second)
	if got, err := direct.Get(ctx, key).Int(); err != nil || got != 42 {
		t.Fatalf("after the lost INCR the value is %d (%v), want 42: the command ran", got, err)
	}

	// go-redis sees an error for a lost answer.
	p.LoseReply(proxytest.RedisCommand("INCR"), 1)
	if err := c.Incr(ctx, key).Err(); err == nil {
		t.Fatal("INCR answered through a lost reply")
	}
	p.WaitLost(t, 2, 5*time.Second)
	if got, err := direct.Get(ctx, key).Int(); err != nil || got != 43 {
		t.Fatalf("after the second lost INCR the value is %d (%v), want 43", got, err)
	}

	// The next INCR is answered (the fault fired once), on a new connection.
	if got, err := c.Incr(ctx, key).Result(); err != nil || got != 44 {
		t.Fatalf("next INCR = %d, %v; want 44", got, err)
	}
	if p.Lost() != 2 {
		t.Fatalf("Lost() = %d, want 2", p.Lost())
	}
}

func TestRedisLostRequestNeverRan(t *testing.T) {
	direct, prefix := redistest.New(t)
	ctx := context.Background()
	p, c := proxiedClient(t)
	key := prefix + ":n"

	// Pipelined requests are framed one by one: the SET before the lost
	// INCR reaches Redis (its answer may be lost with the connection), the
	// INCR never does.
	p.LoseRequest(proxytest.RedisCommand("incr"), 1)
	if got, err := pipelineSetIncr(t, p, key); err != nil || len(got) > len("+OK\r\n") {
		t.Fatalf("pipelined SET, INCR answered %q, %v; want at most +OK and then the connection closed", got, err)
	}
	p.WaitLost(t, 1, 5*time.Second)
	// The SET went out on the proxy's own connection to Redis, which Redis
	// may read after this test's direct GET: wait for it to land. Had the
	// INCR gone out behind it, Redis would run both from one read.
	waittest.Until(t, 5*time.Second, "the SET before the lost INCR ran", func() bool {
		return direct.Exists(ctx, key).Val() == 1
	})
	if got, err := direct.Get(ctx, key).Int(); err != nil || got != 41 {
		t.Fatalf("after the lost INCR request the value is %d (%v), want 41: the command never ran", got, err)
	}

	// go-redis sees an error, as for a lost answer, and nothing ran.
	p.LoseRequest(proxytest.RedisCommand("INCR"), 1)
	if err := c.Incr(ctx, key).Err(); err == nil {
		t.Fatal("INCR answered through a lost request")
	}
	p.WaitLost(t, 2, 5*time.Second)
	if got, err := direct.Get(ctx, key).Int(); err != nil || got != 41 {
		t.Fatalf("after the second lost INCR request the value is %d (%v), want 41", got, err)
	}

	// The next INCR runs (the fault fired twice, then is spent).
	if got, err := c.Incr(ctx, key).Result(); err != nil || got != 42 {
		t.Fatalf("next INCR = %d, %v; want 42", got, err)
	}
}

func TestRedisScriptMatchesEvalshaAndEval(t *testing.T) {
	direct, prefix := redistest.New(t)
	ctx := context.Background()
	p, c := proxiedClient(t)
	src := "-- proxytest " + prefix + "\nreturn redis.call('INCR', KEYS[1])"
	script := redis.NewScript(src)
	key := prefix + ":s"

	// Not loaded yet: go-redis sends EVALSHA (NOSCRIPT), then EVAL; the EVAL's
	// answer is lost.
	p.LoseReply(proxytest.RedisScript(src), 1)
	if err := script.Run(ctx, c, []string{key}).Err(); err == nil {
		t.Fatal("script answered through a lost reply")
	}
	p.WaitLost(t, 1, 5*time.Second)
	// Loaded now: EVALSHA runs it, and its answer is lost.
	p.LoseReply(proxytest.RedisScript(src), 1)
	if err := script.Run(ctx, c, []string{key}).Err(); err == nil {
		t.Fatal("EVALSHA answered through a lost reply")
	}
	p.WaitLost(t, 2, 5*time.Second)
	if got, err := direct.Get(ctx, key).Int(); err != nil || got != 2 {
		t.Fatalf("value %d (%v) after two lost script runs, want 2", got, err)
	}
	// Another script and plain commands pass.
	if err := redis.NewScript("return 1").Run(ctx, c, nil).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := script.Run(ctx, c, []string{key}).Int(); err != nil || got != 3 {
		t.Fatalf("third run = %d, %v; want 3", got, err)
	}
}

func TestLatencyIsObserved(t *testing.T) {
	_, _ = redistest.New(t)
	ctx := context.Background()
	p, c := proxiedClient(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.Latency(100*time.Millisecond, 20*time.Millisecond)
	start := time.Now()
	for range 3 {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Each PING crosses the proxy twice, each time delayed at least 80 ms.
	if took := time.Since(start); took < 3*160*time.Millisecond {
		t.Fatalf("3 PINGs took %v with 100±20 ms latency each way, want >= 480ms", took)
	}
	p.Latency(0, 0)
	start = time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("PING after clearing the latency: %v", time.Since(start))
}

func TestLatencyKeepsByteOrder(t *testing.T) {
	direct, prefix := redistest.New(t)
	ctx := context.Background()
	p, c := proxiedClient(t)
	p.Latency(5*time.Millisecond, 5*time.Millisecond)
	key := prefix + ":list"
	for i := range 50 {
		if err := c.RPush(ctx, key, i).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := direct.LRange(ctx, key, 0, -1).Result()
	if err != nil || len(got) != 50 {
		t.Fatalf("list %v, %v", got, err)
	}
	for i, v := range got {
		if v != strconv.Itoa(i) {
			t.Fatalf("element %d is %s: bytes reordered", i, v)
		}
	}
}

func TestCutBreaksRefusesAndHeals(t *testing.T) {
	_, _ = redistest.New(t)
	ctx := context.Background()
	p, c := proxiedClient(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n := p.Connections(); n != 1 {
		t.Fatalf("Connections() = %d, want 1", n)
	}
	p.Cut(2 * time.Second)
	cutAt := time.Now()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered right after a cut")
	}
	// A new connection is accepted and closed at once.
	raw, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = raw.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	_ = raw.SetReadDeadline(time.Now().Add(time.Second))
	if line, err := bufio.NewReader(raw).ReadString('\n'); err == nil {
		t.Fatalf("a connection during the cut was answered %q", line)
	}
	raw.Close()
	// It heals.
	waittest.Until(t, 10*time.Second, "Redis answers through the proxy after a 2s cut", func() bool { return c.Ping(ctx).Err() == nil })
	if healed := time.Since(cutAt); healed < 2*time.Second-50*time.Millisecond {
		t.Fatalf("healed after %v, before the 2s cut ended", healed)
	}
	if p.Lost() != 0 {
		t.Fatalf("Lost() = %d after a plain cut", p.Lost())
	}
}

func TestClusterDialerRoutesThroughNodeProxies(t *testing.T) {
	_, prefix := redistest.NewCluster(t)
	proxies := map[string]*proxytest.Proxy{}
	for _, a := range redistest.ClusterAddrs() {
		proxies[a] = proxytest.Start(t, a, proxytest.RESP)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: redistest.ClusterAddrs(), Dialer: proxytest.ClusterDialer(proxies), MaxRetries: -1,
	})
	defer c.Close()
	ctx := context.Background()
	for i := range 30 {
		if err := c.Set(ctx, prefix+":"+strconv.Itoa(i), i, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for a, p := range proxies {
		if p.Connections() == 0 {
			t.Fatalf("no connection through the proxy of %s", a)
		}
	}
}

// proxiedMySQL is a test database with a table proxied (id), and
// connections to it through a fresh proxy and directly.
func proxiedMySQL(t *testing.T) (p *proxytest.Proxy, viaProxy, direct *sql.DB) {
	t.Helper()
	db := mysqltest.New(t)
	cfg, err := mysqldrv.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	p = proxytest.Start(t, cfg.Addr, proxytest.MySQL)
	cfg.Addr = p.Addr()
	if viaProxy, err = sql.Open("mysql", cfg.FormatDSN()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { viaProxy.Close() })
	if direct, err = sql.Open("mysql", db.DSN); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	if _, err := direct.Exec("CREATE TABLE proxied (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return p, viaProxy, direct
}

func TestMySQLLostCommitCommitted(t *testing.T) {
	p, viaProxy, direct := proxiedMySQL(t)
	ctx := context.Background()

	tx, err := viaProxy.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO proxied (id) VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	p.LoseReply(proxytest.MySQLQuery("commit"), 1)
	if err := tx.Commit(); err == nil {
		t.Fatal("COMMIT answered through a lost reply")
	} else {
		t.Logf("commit: %v", err)
	}
	p.WaitLost(t, 1, 5*time.Second)
	var n int
	if err := direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM proxied WHERE id = 7").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows after the lost COMMIT: %d (%v), want 1: it committed", n, err)
	}
	// The proxy still serves queries.
	if err := viaProxy.QueryRowContext(ctx, "SELECT COUNT(*) FROM proxied").Scan(&n); err != nil || n != 1 {
		t.Fatalf("count through the proxy: %d, %v", n, err)
	}
}

func TestMySQLCutAfterCommit(t *testing.T) {
	// The driver logs every refused reconnect.
	_ = mysqldrv.SetLogger(log.New(io.Discard, "", 0))
	p, viaProxy, _ := proxiedMySQL(t)
	ctx := context.Background()
	p.CutAfter(proxytest.MySQLQuery("COMMIT"), time.Second)
	tx, err := viaProxy.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO proxied (id) VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err == nil {
		t.Fatal("COMMIT answered through a cut")
	}
	p.WaitLost(t, 1, 5*time.Second)
	if err := viaProxy.PingContext(ctx); err == nil {
		t.Fatal("a new connection was served during the cut")
	}
	var n int
	waittest.Until(t, 10*time.Second, "MySQL answers through the proxy after the cut", func() bool {
		return viaProxy.QueryRowContext(ctx, "SELECT COUNT(*) FROM proxied").Scan(&n) == nil
	})
	if n != 1 {
		t.Fatalf("%d rows after the cut COMMIT, want 1", n)
	}
}

func TestKafkaProduceCutAfterRequestLanded(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1)
	p := proxytest.StartKafka(t)
	w := &kafka.Writer{
		Addr: kafka.TCP(p.Addr()), Topic: topic, RequiredAcks: kafka.RequireAll,
		Balancer: &kafka.Hash{}, MaxAttempts: 1, WriteTimeout: 5 * time.Second,
	}
	defer w.Close()
	ctx := context.Background()
	// Warm up: metadata and a connection to the (proxied) leader; a fresh
	// topic may be unknown to the writer's first metadata.
	waittest.UntilEvery(t, 30*time.Second, 100*time.Millisecond, "a first write through the proxy", func() bool {
		return w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("first")}) == nil
	})
	if p.Connections() == 0 {
		t.Fatal("the writer is not connected through the proxy: is the PROXIED listener configured?")
	}
	p.CutAfter(proxytest.KafkaRequest(proxytest.KafkaProduce), 2*time.Second)
	err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("second")})
	if err == nil {
		t.Fatal("the produce was acknowledged through a cut")
	}
	t.Logf("writer: %v", err)
	p.WaitLost(t, 1, 5*time.Second)

	// Both messages are in the topic, read directly from the broker.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: kafkatest.Brokers(), Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var got []string
	for len(got) < 2 {
		m, err := r.ReadMessage(rctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				break
			}
			t.Fatal(err)
		}
		got = append(got, string(m.Value))
	}
	if len(got) != 2 || got[0] != "first" || got[1] != "second" {
		t.Fatalf("topic holds %q, want [first second]: the cut produce landed", got)
	}
}
