// Package redistest connects tests to the running Redis (scripts/services)
// and gives each test its own key prefix, so tests run in parallel without
// seeing each other's keys. An unreachable Redis fails the test.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Addr is the Redis address tests use: SECKILL_REDIS_ADDR or 127.0.0.1:6379.
func Addr() string {
	if a := os.Getenv("SECKILL_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// ClusterAddrs are the Redis Cluster seed nodes cluster tests use:
// SECKILL_REDIS_CLUSTER_ADDRS or the three masters scripts/services starts.
func ClusterAddrs() []string {
	if a := os.Getenv("SECKILL_REDIS_CLUSTER_ADDRS"); a != "" {
		return strings.Split(a, ",")
	}
	return []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}
}

// New returns a client and a fresh key prefix; the test fails if Redis does
// not answer. Keys under the prefix are deleted when the test ends.
func New(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	return connect(t, redis.NewClient(&redis.Options{Addr: Addr(), PoolSize: 64}), Addr())
}

// NewCluster is New on the Redis Cluster (scripts/services up redis-cluster).
func NewCluster(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	return NewClusterAt(t, ClusterAddrs())
}

// NewClusterAt is NewCluster on the cluster with the given seed nodes.
func NewClusterAt(t testing.TB, addrs []string) (redis.UniversalClient, string) {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 64})
	return connect(t, rdb, strings.Join(addrs, ","))
}

func connect(t testing.TB, rdb redis.UniversalClient, addr string) (redis.UniversalClient, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("redistest: Redis at %s does not answer (run `scripts/services up`): %v", addr, err)
	}
	prefix := "t" + randHex(6)
	t.Cleanup(func() {
		defer rdb.Close()
		if t.Failed() {
			t.Logf("redistest: the failed test's keys are kept: %s:* on %s", prefix, addr)
			return
		}
		ctx := context.Background()
		_ = ForEachNode(ctx, rdb, func(ctx context.Context, node redis.UniversalClient) error {
			iter := node.Scan(ctx, 0, prefix+":*", 1000).Iterator()
			for iter.Next(ctx) {
				node.Del(ctx, iter.Val())
			}
			return iter.Err()
		})
	})
	return rdb, prefix
}

// ForEachNode runs f on every master of a cluster client, or on the client
// itself for a single node (SCAN sees one node's keys only).
func ForEachNode(ctx context.Context, rdb redis.UniversalClient, f func(context.Context, redis.UniversalClient) error) error {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return f(ctx, n) })
	}
	return f(ctx, rdb)
}

// Keys returns the keys matching pattern on every node (SCAN).
func Keys(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	var mu sync.Mutex // the nodes are visited concurrently
	var keys []string
	err := ForEachNode(ctx, rdb, func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	})
	return keys, err
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}
