//go:build chaos || soak

package chaos

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis Cluster's nodes as CLUSTER NODES lists them, shared by the
// failover scenarios (replicated_redis_test.go) and the replicated soak
// (soak_replicated_test.go).

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, masterID string
	master, failing    bool
	slots              [][2]int64
}

func nodeClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, PoolSize: 2})
}

// clusterNodes reads CLUSTER NODES from the node at addr.
func clusterNodes(addr string) ([]clusterNode, error) {
	c := nodeClient(addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{id: f[0], addr: addr, master: strings.Contains(f[2], "master"),
			failing: strings.Contains(f[2], "fail"), masterID: f[3]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.ParseInt(lo, 10, 64)
			b, err2 := strconv.ParseInt(hi, 10, 64)
			if err1 == nil && err2 == nil {
				n.slots = append(n.slots, [2]int64{a, b})
			}
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

func (n clusterNode) serves(slot int64) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// nodeName is scripts/services' name of the Redis node at addr
// ("redis-7101").
func nodeName(addr string) string {
	_, port, _ := strings.Cut(addr, ":")
	return "redis-" + port
}
