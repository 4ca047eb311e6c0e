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

// New returns a client and a fresh key prefix; the test fails if Redis does
// not answer. Keys under the prefix are deleted when the test ends.
func New(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: Addr(), PoolSize: 64})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("redistest: Redis at %s does not answer (run `scripts/services up`): %v", Addr(), err)
	}
	prefix := "t" + randHex(6)
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			rdb.Del(ctx, keys[:n]...)
			keys = keys[n:]
		}
		rdb.Close()
	})
	return rdb, prefix
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}
