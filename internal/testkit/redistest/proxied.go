package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
)

// Proxied is the test's Redis (the single node or the cluster) behind fault
// proxies, one per node, for tests that lose answers at the wire.
type Proxied struct {
	// Direct reaches Redis without the proxies, to read the truth with.
	Direct redis.UniversalClient
	Prefix string
	// Config routes a program's connections through the proxies (a
	// cluster client through the proxy of each node it is sent to).
	Config  stockredis.Config
	Proxies []*proxytest.Proxy
}

// NewProxied starts the proxies and loads scripts (names in package lua) on
// every node, so that the answer a test loses is never a NOSCRIPT.
func NewProxied(t testing.TB, cluster bool, scripts ...string) Proxied {
	t.Helper()
	p := Proxied{Config: stockredis.Config{Addrs: []string{Addr()}}}
	p.Direct, p.Prefix = New(t)
	if cluster {
		p.Direct, p.Prefix = NewCluster(t)
		p.Config = stockredis.Config{Addrs: ClusterAddrs(), Cluster: true}
	}
	err := ForEachNode(context.Background(), p.Direct, func(ctx context.Context, n redis.UniversalClient) error {
		for _, s := range scripts {
			if err := n.ScriptLoad(ctx, lua.Source(s)).Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	byAddr := map[string]*proxytest.Proxy{}
	for _, a := range p.Config.Addrs {
		byAddr[a] = proxytest.Start(t, a, proxytest.RESP)
		p.Proxies = append(p.Proxies, byAddr[a])
	}
	if cluster {
		p.Config.Dialer = proxytest.ClusterDialer(byAddr)
	} else {
		p.Config.Addrs = []string{p.Proxies[0].Addr()}
	}
	return p
}

// Client is a client as the programs make it (stockredis.NewClient),
// through the proxies; it is closed when the test ends.
func (p Proxied) Client(t testing.TB) redis.UniversalClient {
	c := stockredis.NewClient(p.Config)
	t.Cleanup(func() { c.Close() })
	return c
}

// LoseNext makes the next answer to script (a name in package lua) lost
// after Redis ran it, on whichever node it goes to.
func (p Proxied) LoseNext(script string) {
	for _, x := range p.Proxies {
		x.LoseReply(proxytest.RedisScript(lua.Source(script)), 1)
	}
}

// Lost is how many answers the proxies dropped.
func (p Proxied) Lost() int64 {
	var n int64
	for _, x := range p.Proxies {
		n += x.Lost()
	}
	return n
}
