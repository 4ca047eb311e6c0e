// Package proxytest is a real TCP fault proxy for tests: it sits between a
// program and Redis, MySQL or Kafka and breaks the network the way a real
// network breaks, at a chosen moment.
//
// Toxiproxy works on bytes, so it cannot target "the reply to this
// particular Redis script" or "the answer to this COMMIT". This proxy
// understands the request framing of the three protocols (RESP arrays of
// bulk strings, MySQL packets, Kafka size-prefixed frames), so a test can
// let one chosen request through to the service and lose its answer: the
// command ran, the client never hears (LoseReply, CutAfter). It also adds
// latency (Latency) and cuts every connection for a while (Cut).
//
// Replies are matched to requests exactly: by reply order for RESP (the
// proxy frames the service's replies too), by correlation id for Kafka, and
// as the next bytes the server sends for MySQL (a MySQL client never sends
// a command before it has read the previous answer).
//
// A Proxy listens on loopback and is closed when the test ends. For Redis
// Cluster, whose nodes announce their own addresses, put one proxy in front
// of each node and give the client ClusterDialer.
package proxytest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/waittest"
)

// Protocol is the wire protocol a Proxy frames requests in.
type Protocol int

// The protocols a Proxy understands. Raw frames nothing: no Matcher ever
// matches, but Latency and Cut work.
const (
	Raw Protocol = iota
	RESP
	MySQL
	Kafka
)

func (p Protocol) String() string {
	switch p {
	case Raw:
		return "raw"
	case RESP:
		return "resp"
	case MySQL:
		return "mysql"
	case Kafka:
		return "kafka"
	}
	return "unknown"
}

// Proxy is a TCP proxy to one target. Its methods are safe for concurrent
// use.
type Proxy struct {
	ln     net.Listener
	target string
	proto  Protocol

	lost     atomic.Int64
	accepted atomic.Int64

	mu          sync.Mutex
	conns       map[*conn]struct{}
	rules       []*rule
	refuseUntil time.Time
	base        time.Duration
	jitter      time.Duration
	closed      bool

	wg sync.WaitGroup
}

// rule is an armed fault: the next n requests matching m lose their answer;
// cut > 0 makes the loss cut every connection and refuse new ones for cut;
// request makes the request itself the loss (it never reaches the service).
type rule struct {
	m       Matcher
	n       int
	cut     time.Duration
	request bool
}

// Start starts a proxy to target on 127.0.0.1 (a free port); it is closed
// when the test ends.
func Start(t testing.TB, target string, proto Protocol) *Proxy {
	t.Helper()
	return StartOn(t, "127.0.0.1:0", target, proto)
}

// StartOn starts a proxy to target listening on listen (for a fixed address,
// such as the one Kafka advertises for its proxied listener). While another
// test still holds the address, it retries for up to 30 s.
func StartOn(t testing.TB, listen, target string, proto Protocol) *Proxy {
	t.Helper()
	var ln net.Listener
	var err error
	defer func() {
		if t.Failed() && err != nil {
			t.Logf("proxytest: listen on %s: %v", listen, err)
		}
	}()
	waittest.UntilEvery(t, 30*time.Second, 100*time.Millisecond, "proxytest: "+listen+" free to listen on", func() bool {
		ln, err = net.Listen("tcp", listen)
		return err == nil
	})
	p := &Proxy{ln: ln, target: target, proto: proto, conns: map[*conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// KafkaProxied is where the dev broker's PROXIED listener says it is
// (scripts/services, docker-compose.yml), so a proxy listening there is
// what clients reach after bootstrap, for every partition; the listener is
// bound on KafkaProxiedBound, the proxy's target.
const (
	KafkaProxied      = "127.0.0.1:19092"
	KafkaProxiedBound = "127.0.0.1:19093"
)

// KafkaProxiedAddr is KafkaProxied, or 127.0.0.1 with the port
// SECKILL_KAFKA_PROXIED_PORT names: the listener of a private broker that
// scripts/services started on other ports (the same variable sets it).
func KafkaProxiedAddr() string { return portFromEnv("SECKILL_KAFKA_PROXIED_PORT", KafkaProxied) }

// KafkaProxiedBoundAddr is KafkaProxiedBound, or 127.0.0.1 with the port
// SECKILL_KAFKA_PROXIED_BOUND_PORT names.
func KafkaProxiedBoundAddr() string {
	return portFromEnv("SECKILL_KAFKA_PROXIED_BOUND_PORT", KafkaProxiedBound)
}

func portFromEnv(name, def string) string {
	if p := os.Getenv(name); p != "" {
		return "127.0.0.1:" + p
	}
	return def
}

// StartKafka starts a proxy in front of the broker's PROXIED listener;
// clients given KafkaProxiedAddr() as their broker stay behind it.
func StartKafka(t testing.TB) *Proxy {
	t.Helper()
	return StartOn(t, KafkaProxiedAddr(), KafkaProxiedBoundAddr(), Kafka)
}

// Addr is the address clients dial: host:port on 127.0.0.1.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// LoseReply arms a fault: the next n requests matching m are forwarded to
// the service; once the service's answer to one starts arriving, the proxy
// drops it and closes that client connection (and its upstream). The
// command ran; the client never hears. It returns at once. A connection that
// closes before its answer arrives gives the loss back to the rule.
func (p *Proxy) LoseReply(m Matcher, n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	p.rules = append(p.rules, &rule{m: m, n: n})
	p.mu.Unlock()
}

// LoseRequest arms a fault: the next n requests matching m never reach the
// service; the proxy forwards what came before it on that connection, then
// closes the connection (and its upstream), so the answers to those may be
// lost too. The command did not run; the client, which sent it, cannot tell
// that from a lost answer. It returns at once.
func (p *Proxy) LoseRequest(m Matcher, n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	p.rules = append(p.rules, &rule{m: m, n: n, request: true})
	p.mu.Unlock()
}

// CutAfter arms a fault: when the next request matching m has been
// forwarded and the service starts answering it, the proxy drops the
// answer, closes every connection and refuses new ones for d.
func (p *Proxy) CutAfter(m Matcher, d time.Duration) {
	p.mu.Lock()
	p.rules = append(p.rules, &rule{m: m, n: 1, cut: max(d, time.Nanosecond)})
	p.mu.Unlock()
}

// Lost is how many answers LoseReply and CutAfter, and requests LoseRequest,
// have dropped so far.
func (p *Proxy) Lost() int64 { return p.lost.Load() }

// WaitLost polls until Lost() >= n, and fails the test after within.
func (p *Proxy) WaitLost(t testing.TB, n int64, within time.Duration) {
	t.Helper()
	waittest.UntilEvery(t, within, 10*time.Millisecond, fmt.Sprintf("proxytest: %s proxy to %s losing %d answers", p.proto, p.target, n),
		func() bool { return p.Lost() >= n })
}

// Latency delays every chunk of bytes in both directions by base ± a random
// jitter (uniform, never below zero), keeping the byte order of each
// connection. Latency(0, 0) clears it.
func (p *Proxy) Latency(base, jitter time.Duration) {
	p.mu.Lock()
	p.base, p.jitter = base, jitter
	p.mu.Unlock()
}

func (p *Proxy) delay() time.Duration {
	p.mu.Lock()
	base, jitter := p.base, p.jitter
	p.mu.Unlock()
	if jitter > 0 {
		base += time.Duration(rand.Int64N(int64(2*jitter)+1)) - jitter
	}
	return max(base, 0)
}

// Cut closes every open connection now; for d, new connections are
// accepted and closed at once.
func (p *Proxy) Cut(d time.Duration) {
	p.refuse(d)
	p.closeAll()
}

// refuse makes the proxy close new connections at once for d.
func (p *Proxy) refuse(d time.Duration) {
	p.mu.Lock()
	if until := time.Now().Add(d); until.After(p.refuseUntil) {
		p.refuseUntil = until
	}
	p.mu.Unlock()
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Accepted is the number of client connections served so far.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Connections is the number of open client connections.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// ClusterDialer returns a dialer for go-redis (Options.Dialer,
// ClusterOptions.Dialer) that dials the proxy in front of the node address
// asked for (proxies is keyed by the address the node announces), and addr
// itself when there is none.
func ClusterDialer(proxies map[string]*Proxy) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p, ok := proxies[addr]; ok {
			addr = p.Addr()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// Close closes the proxy now: its listener (its port then refuses
// connections) and every open connection, dropping the bytes a Latency
// still held. The test's end closes it too.
func (p *Proxy) Close() { p.close() }

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.closeAll()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		p.mu.Lock()
		refuse := p.closed || time.Now().Before(p.refuseUntil)
		var c *conn
		if !refuse {
			c = newConn(p, cc)
			p.conns[c] = struct{}{}
			p.accepted.Add(1)
			p.wg.Add(1)
		}
		p.mu.Unlock()
		if refuse {
			_ = cc.Close()
			continue
		}
		go c.run()
	}
}

// match returns the armed rule req triggers, consuming one of its uses.
func (p *Proxy) match(req Request) *rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, r := range p.rules {
		if r.n > 0 && r.m(req) {
			r.n--
			if r.n == 0 {
				p.rules = append(p.rules[:i:i], p.rules[i+1:]...)
			}
			return r
		}
	}
	return nil
}

// giveBack returns an unused loss to its rule (the connection closed before
// the answer came).
func (p *Proxy) giveBack(r *rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.n == 0 {
		p.rules = append(p.rules, r)
	}
	r.n++
}

// lose counts a dropped answer and carries out what r says after it: a
// cut refuses new connections before the loss is counted, so a test that
// waits for the loss finds the proxy refusing.
func (p *Proxy) lose(r *rule) {
	if r.cut > 0 {
		p.refuse(r.cut)
		p.lost.Add(1)
		p.closeAll()
		return
	}
	p.lost.Add(1)
}

func (p *Proxy) forget(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}
