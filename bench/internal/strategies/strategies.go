// Package strategies holds the stock-deduction strategies that the bench's
// compare scenario measures side by side with the real pipeline, after the
// table in the seed article (§4.5):
//
//   - Naive (UNSAFE): GET the stock, check it and the buyer's marker, then
//     DECRBY. Concurrent requests pass the check together, so it oversells
//     and lets one buyer order twice. It exists to show that failure.
//   - Lock: a SET NX PX lock around the same check-and-deduct. Correct,
//     but every request of the item queues for one lock.
//   - Lua: the check, the buyer's marker and the deduction in one script.
//     Correct and one round trip; it has no idempotency, no Kafka and no
//     MySQL behind it.
//
// These live only inside the bench tool (Go's internal rule keeps them
// there) and only ever touch Redis keys under the prefix they are given.
// Nothing in the product may import them.
package strategies

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Outcomes of one order attempt.
var (
	ErrSoldOut = errors.New("sold out")
	ErrAlready = errors.New("already purchased")
	// ErrBusy means the lock could not be had in time.
	ErrBusy = errors.New("lock wait timed out")
)

// Strategy takes stock for one order.
type Strategy interface {
	// Name is the row's name in the report.
	Name() string
	// Place takes qty units for user, or returns ErrSoldOut, ErrAlready,
	// ErrBusy or a Redis error.
	Place(ctx context.Context, user int64, qty int) error
	// keys are the strategy's Redis keys.
	keys() keys
}

// keys names one strategy's keys; all share one hash tag.
type keys struct{ base string }

func newKeys(prefix, name string) keys { return keys{base: prefix + ":" + name + ":{cmp}:"} }

func (k keys) stock() string            { return k.base + "stock" }
func (k keys) orders() string           { return k.base + "orders" }
func (k keys) lock() string             { return k.base + "lock" }
func (k keys) bought(user int64) string { return k.base + "bought:" + strconv.FormatInt(user, 10) }
func orderEntry(user int64, qty int) any {
	return strconv.FormatInt(user, 10) + ":" + strconv.Itoa(qty)
}

// markerTTL keeps buyers' markers and the orders list for a while after a
// run, then Redis forgets them.
const markerTTL = time.Hour

// Naive is the unsafe read-check-write strategy.
type Naive struct {
	rdb redis.UniversalClient
	k   keys
}

// NewNaive returns the naive strategy over keys under prefix.
func NewNaive(rdb redis.UniversalClient, prefix string) *Naive {
	return &Naive{rdb: rdb, k: newKeys(prefix, "naive")}
}

func (s *Naive) keys() keys { return s.k }
func (s *Lock) keys() keys  { return s.k }
func (s *Lua) keys() keys   { return s.k }

// Name implements Strategy.
func (s *Naive) Name() string { return "naive GET-check-DECRBY (unsafe)" }

// Place implements Strategy: four round trips, none of them guarded.
func (s *Naive) Place(ctx context.Context, user int64, qty int) error {
	return checkAndDeduct(ctx, s.rdb, s.k, user, qty)
}

// checkAndDeduct is the critical section both Naive and Lock run: safe only
// when something serialises it.
func checkAndDeduct(ctx context.Context, rdb redis.UniversalClient, k keys, user int64, qty int) error {
	stock, err := rdb.Get(ctx, k.stock()).Int64()
	if err != nil {
		return fmt.Errorf("read stock: %w", err)
	}
	if stock < int64(qty) {
		return ErrSoldOut
	}
	n, err := rdb.Exists(ctx, k.bought(user)).Result()
	if err != nil {
		return fmt.Errorf("read marker: %w", err)
	}
	if n > 0 {
		return ErrAlready
	}
	if err := rdb.DecrBy(ctx, k.stock(), int64(qty)).Err(); err != nil {
		return fmt.Errorf("deduct: %w", err)
	}
	if err := rdb.Set(ctx, k.bought(user), 1, markerTTL).Err(); err != nil {
		return fmt.Errorf("mark buyer: %w", err)
	}
	if err := rdb.RPush(ctx, k.orders(), orderEntry(user, qty)).Err(); err != nil {
		return fmt.Errorf("record order: %w", err)
	}
	return nil
}

// Lock runs the same check-and-deduct under a SET NX PX lock.
type Lock struct {
	rdb redis.UniversalClient
	k   keys
	// TTL is the lock's lifetime; Wait bounds how long a request queues.
	TTL, Wait time.Duration
}

// NewLock returns the lock strategy over keys under prefix.
func NewLock(rdb redis.UniversalClient, prefix string) *Lock {
	return &Lock{rdb: rdb, k: newKeys(prefix, "lock"), TTL: 2 * time.Second, Wait: 10 * time.Second}
}

// Name implements Strategy.
func (s *Lock) Name() string { return "SETNX lock around check-and-deduct" }

var unlock = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// Place implements Strategy: acquire with exponential backoff and jitter
// (1ms doubling to 32ms), run the critical section, release only our own
// lock.
func (s *Lock) Place(ctx context.Context, user int64, qty int) error {
	token := newToken()
	deadline := time.Now().Add(s.Wait)
	for attempt := 0; ; attempt++ {
		ok, err := s.rdb.SetNX(ctx, s.k.lock(), token, s.TTL).Result()
		if err != nil {
			return fmt.Errorf("take lock: %w", err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return ErrBusy
		}
		d := time.Millisecond << min(attempt, 5)
		d = d/2 + rand.N(d/2+1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	err := checkAndDeduct(ctx, s.rdb, s.k, user, qty)
	if uerr := unlock.Run(context.WithoutCancel(ctx), s.rdb, []string{s.k.lock()}, token).Err(); uerr != nil && err == nil {
		err = fmt.Errorf("release lock: %w", uerr)
	}
	return err
}

func newToken() string {
	b := make([]byte, 12)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// Lua checks and deducts in one script, as in the seed's §4.2.
type Lua struct {
	rdb redis.UniversalClient
	k   keys
}

// NewLua returns the Lua strategy over keys under prefix.
func NewLua(rdb redis.UniversalClient, prefix string) *Lua {
	return &Lua{rdb: rdb, k: newKeys(prefix, "lua")}
}

// Name implements Strategy.
func (s *Lua) Name() string { return "Lua check-and-deduct script" }

// deduct: KEYS[1] stock, KEYS[2] buyer marker, KEYS[3] orders list;
// ARGV[1] quantity, ARGV[2] marker ttl (ms), ARGV[3] order entry.
// Returns -1 not loaded, -2 sold out, -3 already bought, else the stock left.
var deduct = redis.NewScript(`
local stock = redis.call('GET', KEYS[1])
if not stock then return -1 end
if tonumber(stock) < tonumber(ARGV[1]) then return -2 end
if not redis.call('SET', KEYS[2], 1, 'NX', 'PX', ARGV[2]) then return -3 end
redis.call('RPUSH', KEYS[3], ARGV[3])
return redis.call('DECRBY', KEYS[1], ARGV[1])`)

// Place implements Strategy.
func (s *Lua) Place(ctx context.Context, user int64, qty int) error {
	n, err := deduct.Run(ctx, s.rdb, []string{s.k.stock(), s.k.bought(user), s.k.orders()},
		qty, markerTTL.Milliseconds(), orderEntry(user, qty)).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("deduct script: %w", err)
	case n == -1:
		return errors.New("stock not loaded")
	case n == -2:
		return ErrSoldOut
	case n == -3:
		return ErrAlready
	}
	return nil
}

// ByName returns the strategy called name ("naive", "lock" or "lua") over
// keys under prefix.
func ByName(name string, rdb redis.UniversalClient, prefix string) (Strategy, error) {
	switch name {
	case "naive":
		return NewNaive(rdb, prefix), nil
	case "lock":
		return NewLock(rdb, prefix), nil
	case "lua":
		return NewLua(rdb, prefix), nil
	case "floor":
		return Floor{k: newKeys(prefix, "floor")}, nil
	}
	return nil, fmt.Errorf("no strategy %q (want naive, lock, lua or floor)", name)
}

// Floor answers every order sold out without any further work: served by
// Serve, a request costs only what every strategy and the api pay before
// they touch stock (HTTP, the bearer token, the Idempotency-Key and the
// JSON body), the floor under the api's CPU per sold-out answer.
type Floor struct{ k keys }

// Name implements Strategy.
func (Floor) Name() string { return "floor: Gin, token, key and body; then 409" }

// Place implements Strategy: always sold out.
func (Floor) Place(context.Context, int64, int) error { return ErrSoldOut }

func (f Floor) keys() keys { return f.k }

// Names lists the strategies in the order the compare table shows them.
var Names = []string{"naive", "lock", "lua"}

// Tally is what a strategy did, read back from Redis.
type Tally struct {
	Orders     int64 `json:"orders"`
	Units      int64 `json:"units"`
	Buyers     int64 `json:"distinct_buyers"`
	Duplicates int64 `json:"duplicate_orders"`
	FinalStock int64 `json:"final_stock"`
}

// Load sets the strategy's stock and forgets earlier buyers and orders.
func Load(ctx context.Context, rdb redis.UniversalClient, s Strategy, stock int64) error {
	k := s.keys()
	if err := rdb.Del(ctx, k.orders(), k.lock()).Err(); err != nil {
		return err
	}
	return rdb.Set(ctx, k.stock(), stock, markerTTL).Err()
}

// Count reads back what the strategy sold: orders, units, distinct buyers,
// orders beyond one per buyer, and the stock left (negative when it
// oversold).
func Count(ctx context.Context, rdb redis.UniversalClient, s Strategy) (Tally, error) {
	k := s.keys()
	var t Tally
	stock, err := rdb.Get(ctx, k.stock()).Int64()
	if err != nil {
		return t, fmt.Errorf("read stock: %w", err)
	}
	t.FinalStock = stock
	entries, err := rdb.LRange(ctx, k.orders(), 0, -1).Result()
	if err != nil {
		return t, fmt.Errorf("read orders: %w", err)
	}
	buyers := map[string]bool{}
	for _, e := range entries {
		user, qty, _ := strings.Cut(e, ":")
		n, _ := strconv.ParseInt(qty, 10, 64)
		t.Orders++
		t.Units += n
		buyers[user] = true
	}
	t.Buyers = int64(len(buyers))
	t.Duplicates = t.Orders - t.Buyers
	return t, nil
}
