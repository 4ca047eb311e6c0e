// Package stockredis is the Redis side of the pipeline: the item's sellable
// stock, the per-user quota, idempotency records and the reservation state
// machine (RESERVED -> CLAIMED -> CONFIRMED, and -> RELEASED from any of
// them), each transition one Lua script from package lua.
//
// Every key of one item shares the hash tag {i<item>}, so every script runs
// on Redis Cluster without CROSSSLOT errors. A hot item's stock may be split
// into buckets with hash tags of their own (buckets.go).
package stockredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// Config says where Redis is and how keys are named.
type Config struct {
	// Addrs is one address for a single node, or the seed nodes of a cluster.
	Addrs []string
	// Cluster switches to the cluster client.
	Cluster bool
	// Prefix starts every key (default "sk"); tests use their own.
	Prefix string
	// AddrMap translates addresses before dialing (announced -> reachable):
	// for cluster nodes that announce addresses this host cannot reach as
	// they are (NAT, port forwarding, a proxy in front of each node).
	AddrMap map[string]string
	// Dialer, when set, opens every connection (to each cluster node too)
	// instead of a plain TCP dial; the fault tests route connections
	// through a proxy with it.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

// dialer is cfg's Dialer, with AddrMap applied; nil means go-redis's own.
func (cfg Config) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if len(cfg.AddrMap) == 0 {
		return cfg.Dialer
	}
	next := cfg.Dialer
	if next == nil {
		d := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 5 * time.Minute}
		next = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := cfg.AddrMap[addr]; ok {
			addr = to
		}
		return next(ctx, network, addr)
	}
}

// clusterStateReload bounds how old the cluster client's map of slots to
// masters gets. go-redis reloads it at once on a MOVED answer, but a master
// that died answers nothing: after its replica is promoted, every command
// for its slots still goes to its dead address, and every retry too (the
// slot's master is the only node tried), until the map is reloaded:
// go-redis's default of 60 s meant up to a minute of 503s for the items of
// that master after the failover. A reload asks one node for CLUSTER SLOTS,
// in the background, when a command finds the map older than this.
const clusterStateReload = time.Second

// NewClient connects to Redis as cfg says.
func NewClient(cfg Config) redis.UniversalClient {
	opts := &redis.UniversalOptions{
		Addrs:        cfg.Addrs,
		PoolSize:     256,
		MinIdleConns: 16,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
		DialTimeout:  2 * time.Second,
		// No silent retries: go-redis would re-send a script after a broken
		// connection although Redis may have run it already. Callers retry
		// themselves, knowing which scripts are safe to repeat, and
		// MayHaveRun needs the error of the one attempt.
		MaxRetries: -1,
		Dialer:     cfg.dialer(),
	}
	if cfg.Cluster {
		// The cluster client has a retry loop of its own beside
		// MaxRetries (for MOVED, ASK and network errors alike): the hook on
		// every node keeps it from sending a script again after it may have
		// run. MOVED, ASK and refused connections still retry: those
		// scripts did not run.
		co := opts.Cluster()
		co.ClusterStateReloadInterval = clusterStateReload
		c := redis.NewClusterClient(co)
		c.OnNewNode(func(node *redis.Client) { node.AddHook(noResend{}) })
		return c
	}
	c := redis.NewClient(opts.Simple())
	c.AddHook(noResend{})
	return c
}

// Store is the stock keys' stores, one per aggregate, sharing one client,
// one key prefix and one tracer (core). New builds them all.
type Store struct {
	*core

	// Reservations reserves, releases, claims and confirms orders' stock.
	Reservations *Reservations
	// Stock loads, restocks and reads items' stock.
	Stock *Stock
	// Rooms runs the sales' waiting rooms.
	Rooms *Rooms
	// Entries takes draw sales' entries.
	Entries *Entries
	// Codes loads and writes the sales' presale codes.
	Codes *Codes
	// Reconciler checks and repairs the keys for the reconciler.
	Reconciler *Reconciler
}

// core is what every store shares: the client, the key prefix and the
// tracer (Trace sets it for all of them at once).
type core struct {
	rdb    redis.UniversalClient
	prefix string
	tracer *tracing.Tracer // nil: no spans
}

// Reservations runs the reservation state machine: reserve (batched,
// bucketed or not), release, claim and confirm, and the reads of
// reservations, quotas and pending lists.
type Reservations struct {
	*core
	buckets *buckets

	lookups  *batcher
	reserves *reserver

	claim, confirm, releaseScript, bucketTake *redis.Script
}

// Stock loads an item's stock from MySQL (warm-up), adds restocks, and
// reads the stock and the warmed items back.
type Stock struct {
	*core
	buckets *buckets

	warmup, warmupBuckets, restock *redis.Script
}

// buckets is the bucketed layout's internals (buckets.go): reads and
// compare-and-sets of an item's bucket keys, for the reservations, the
// warm-up and the reconciler.
type buckets struct {
	*core

	bucketGive, bucketSet *redis.Script
}

// Rooms runs the sales' waiting rooms: joins (batched), looks, advances,
// builds and reads of their members.
type Rooms struct {
	*core
	joins *roomJoiner
}

// New returns the stores over rdb with the given key prefix ("" means "sk").
func New(rdb redis.UniversalClient, prefix string) *Store {
	if prefix == "" {
		prefix = "sk"
	}
	c := &core{rdb: rdb, prefix: prefix}
	b := &buckets{
		core:       c,
		bucketGive: redis.NewScript(lua.Source("bucket_give")),
		bucketSet:  redis.NewScript(lua.Source("bucket_set")),
	}
	stock := &Stock{
		core:          c,
		buckets:       b,
		warmup:        redis.NewScript(lua.Source("warmup")),
		warmupBuckets: redis.NewScript(lua.Source("warmup_buckets")),
		restock:       redis.NewScript(lua.Source("restock")),
	}
	rooms := &Rooms{core: c}
	rooms.joins = &roomJoiner{rooms: rooms}
	return &Store{
		core: c,
		Reservations: &Reservations{
			core:          c,
			buckets:       b,
			lookups:       &batcher{rdb: rdb},
			reserves:      newReserver(rdb, prefix),
			claim:         redis.NewScript(lua.Source("claim")),
			confirm:       redis.NewScript(lua.Source("confirm")),
			releaseScript: redis.NewScript(lua.Source("release")),
			bucketTake:    redis.NewScript(lua.Source("bucket_take")),
		},
		Stock:      stock,
		Rooms:      rooms,
		Entries:    &Entries{core: c},
		Codes:      &Codes{core: c},
		Reconciler: newReconciler(c, b, stock),
	}
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// MayHaveRun reports whether a command that failed with err may still have
// run in Redis: the connection broke, or the wait ran out, after it was
// sent (errors.Is(err, order.ErrOutcomeUnknown), which unavailable marks).
// It is false for domain errors and for failures that happen before
// anything is sent (no connection could be made or taken from the pool).
func MayHaveRun(err error) bool { return errors.Is(err, order.ErrOutcomeUnknown) }

// sentBeforeFailing reports whether a Redis failure err (one unavailable
// wraps) came after the command may have been sent: not a dial, not the
// pool, not a closed client, not a script never sent.
func sentBeforeFailing(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return !errors.Is(err, redis.ErrPoolTimeout) && !errors.Is(err, redis.ErrPoolExhausted) &&
		!errors.Is(err, redis.ErrClosed) && !errors.Is(err, errNotSent)
}

// unavailable wraps a Redis failure so callers see order.ErrUnavailable,
// and order.ErrOutcomeUnknown too when the command may have run
// (sentBeforeFailing).
func unavailable(op string, err error) error {
	wrapped := fmt.Errorf("redis %s: %w: %w", op, order.ErrUnavailable, err)
	if sentBeforeFailing(err) {
		return outcomeUnknown{wrapped}
	}
	return wrapped
}

// outcomeUnknown marks a failure after which the command may have run:
// errors.Is finds order.ErrOutcomeUnknown in it, and its text is the
// failure's.
type outcomeUnknown struct{ error }

func (e outcomeUnknown) Unwrap() error { return e.error }

func (e outcomeUnknown) Is(target error) bool { return target == order.ErrOutcomeUnknown }
