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
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// State is where a reservation is in its life (docs/adr/0001): the
// reserve script writes it RESERVED, a consumer CLAIMED, its MySQL commit
// CONFIRMED, a release RELEASED. MISSING is no reservation at all.
type State string

// The reservation states, as the scripts write them.
const (
	StateReserved  State = "RESERVED"
	StateClaimed   State = "CLAIMED"
	StateConfirmed State = "CONFIRMED"
	StateReleased  State = "RELEASED"
	StateMissing   State = "MISSING"
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

// Item says where one item's keys are: the item, and its sale's tag, the
// item whose hash tag every key of the sale shares (a sale's first item,
// order.Activity.ItemID). One reserve script must see the buyer's quota
// in the sale and the chosen item's stock at once, so on Redis Cluster
// they share a slot. For a sale of one item the tag is the item itself and
// the keys are named as they were before sales had sizes.
type Item struct {
	ID  int64
	Tag int64 // 0: ID
}

// One is the item of a sale of one item (its own tag).
func One(id int64) Item { return Item{ID: id, Tag: id} }

// In is item of a sale whose first item is tag.
func In(tag, item int64) Item { return Item{ID: item, Tag: tag} }

// tagged is it with Tag filled in.
func (it Item) tagged() Item {
	if it.Tag == 0 {
		it.Tag = it.ID
	}
	return it
}

// own reports whether the item is its own tag (a sale's first item).
func (it Item) own() bool { return it.Tag == 0 || it.Tag == it.ID }

// member is the item's entry in the warmed-items set: its id, then
// "@<tag>" when it is not its own tag.
func (it Item) member() string {
	if it.own() {
		return strconv.FormatInt(it.ID, 10)
	}
	return strconv.FormatInt(it.ID, 10) + "@" + strconv.FormatInt(it.Tag, 10)
}

// parseMember reads member back; false for anything else.
func parseMember(m string) (Item, bool) {
	id, tag, grouped := strings.Cut(m, "@")
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return Item{}, false
	}
	if !grouped {
		return One(n), true
	}
	t, err := strconv.ParseInt(tag, 10, 64)
	if err != nil || t <= 0 {
		return Item{}, false
	}
	return In(t, n), true
}

// Keys names the keys of one item.
type Keys struct {
	prefix    string
	tag, item int64
}

// group is "<prefix>:{i<tag>}:", where the sale-wide keys (quota,
// idempotency records, reservations) are; built without fmt: every order
// names seven keys.
func (k Keys) group() string { return k.prefix + ":{i" + strconv.FormatInt(k.tag, 10) + "}:" }

// base is where the item's own keys are: group for the sale's first item
// (the layout of a sale of one item), "<group><item>:" for the others.
func (k Keys) base() string {
	if k.tag == k.item {
		return k.group()
	}
	return k.group() + strconv.FormatInt(k.item, 10) + ":"
}

// bucketTag is the hash tag of the item's bucket n: i<item>b<n>, with the
// sale's tag before it when the item is not its own tag.
func (k Keys) bucketTag(n int) string {
	if k.tag == k.item {
		return fmt.Sprintf("i%db%d", k.item, n)
	}
	return fmt.Sprintf("i%d.%db%d", k.tag, k.item, n)
}

// Stock is the units Redis may still sell.
func (k Keys) Stock() string { return k.base() + "stock" }

// Inflight is the sum of quantities in RESERVED or CLAIMED reservations.
func (k Keys) Inflight() string { return k.base() + "inflight" }

// Pending is the sorted set of unconfirmed order numbers by reserve time.
func (k Keys) Pending() string { return k.base() + "pending" }

// Reservation is the hash of one order's reservation (sale-wide: an order
// number is unique, and order.TagOf finds the tag from it).
func (k Keys) Reservation(orderNo string) string { return k.group() + "r:" + orderNo }

// Quota holds the order number that uses the user's quota in the activity,
// whichever of the sale's items it bought.
func (k Keys) Quota(activityID int64, userID string) string {
	return k.group() + "q:" + strconv.FormatInt(activityID, 10) + ":" + UserSegment(userID)
}

// Idem holds the order number the user's idempotency key produced, in any
// of the sale's items.
func (k Keys) Idem(userID, key string) string {
	return k.group() + "k:" + UserSegment(userID) + ":" + key
}

// quotaPattern matches every quota key of an activity (for SCAN).
func (k Keys) quotaPattern(activityID int64) string {
	return fmt.Sprintf("%sq:%d:*", k.group(), activityID)
}

// Store runs the stock scripts.
type Store struct {
	rdb    redis.UniversalClient
	prefix string

	claim, confirm, releaseScript, warmup *redis.Script

	lookups  *batcher
	reserves *reserver
	joins    *roomJoiner

	bucketTake, bucketGive, bucketSet, warmupBuckets *redis.Script

	restock *redis.Script

	tracer *tracing.Tracer // nil: no spans
}

// New returns a Store over rdb with the given key prefix ("" means "sk").
func New(rdb redis.UniversalClient, prefix string) *Store {
	if prefix == "" {
		prefix = "sk"
	}
	s := &Store{
		lookups:       &batcher{rdb: rdb},
		reserves:      newReserver(rdb, prefix),
		rdb:           rdb,
		prefix:        prefix,
		claim:         redis.NewScript(lua.Source("claim")),
		confirm:       redis.NewScript(lua.Source("confirm")),
		releaseScript: redis.NewScript(lua.Source("release")),
		warmup:        redis.NewScript(lua.Source("warmup")),
		bucketTake:    redis.NewScript(lua.Source("bucket_take")),
		bucketGive:    redis.NewScript(lua.Source("bucket_give")),
		bucketSet:     redis.NewScript(lua.Source("bucket_set")),
		warmupBuckets: redis.NewScript(lua.Source("warmup_buckets")),
		restock:       redis.NewScript(lua.Source("restock")),
	}
	s.joins = &roomJoiner{s: s}
	return s
}

// Keys returns the key names of item.
func (s *Store) Keys(item Item) Keys {
	item = item.tagged()
	return Keys{prefix: s.prefix, tag: item.Tag, item: item.ID}
}

func (s *Store) itemsKey() string { return s.prefix + ":items" }

// Reservation is a request to take stock for one order.
type Reservation struct {
	OrderNo        string
	UserID         string
	ItemID         int64
	ActivityID     int64
	Quantity       int
	IdempotencyKey string
	At             time.Time
	// QuotaTTL keeps the quota and idempotency records (until the activity
	// ends plus a margin); ReservationTTL keeps the reservation hash (past
	// the payment window, so cancel and timeout can release through it).
	QuotaTTL       time.Duration
	ReservationTTL time.Duration
	// Buckets is the number of stock buckets of the activity (0 or 1: the
	// item has one stock key).
	Buckets int
	// Tag is the sale's first item (order.Activity.ItemID), whose hash tag
	// the keys share; 0 means ItemID. The order number names it too.
	Tag int64
	// Room is true for a sale with a waiting room: the order must hold an
	// admission of the buyer's (see Room), and uses it up.
	Room bool
}

// item is where the reservation's keys are.
func (r Reservation) item() Item { return Item{ID: r.ItemID, Tag: r.Tag}.tagged() }

// ReserveResult says what the reserve script did.
type ReserveResult struct {
	// OrderNo is the new order's number, or the original one for a
	// duplicate idempotency key.
	OrderNo string
	// Duplicate is true when the key was used before; nothing was reserved.
	Duplicate bool
	// Left is the stock left after the reservation (or seen when sold out).
	Left int64
}

// Reserve runs the reserve script. It returns order.ErrNotWarmed,
// order.ErrAlreadyPurchased or order.ErrSoldOut for the refusals, and an
// error wrapping order.ErrUnavailable when Redis cannot be reached.
func (s *Store) Reserve(ctx context.Context, r Reservation) (ReserveResult, error) {
	switch {
	case r.Room && r.Buckets > 1:
		return ReserveResult{}, fmt.Errorf("reserve: a sale with a waiting room has one stock key an item: %w", order.ErrInvalidArgument)
	case r.Room:
		return s.runReserve(ctx, r, s.Keys(r.item()).Stock(), roomMode)
	case r.Buckets > 1:
		return s.reserveBucketed(ctx, r)
	}
	return s.runReserve(ctx, r, s.Keys(r.item()).Stock(), "")
}

// runReserve runs the reserve script with first as KEYS[1] and bucket as
// ARGV[2] (see reserve.lua), in a batch with concurrent reservations of the
// same item.
func (s *Store) runReserve(ctx context.Context, r Reservation, first, bucket string) (_ ReserveResult, err error) {
	_, span := s.span(ctx, "reserve", r.item())
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrOrderNo.String(r.OrderNo), tracing.AttrActivityID.Int64(r.ActivityID), tracing.AttrQuantity.Int(r.Quantity))
	}
	defer func() { endSpan(span, err) }()
	return s.reserves.reserve(ctx, r, first, bucket)
}

// Ref identifies a reservation and every key its release touches.
type Ref struct {
	OrderNo        string
	UserID         string
	ItemID         int64
	ActivityID     int64
	IdempotencyKey string
}

// item is where the reservation's keys are: its order number names the
// sale's tag (order.TagOf).
func (r Ref) item() Item { return In(order.TagOf(r.OrderNo), r.ItemID) }

// EventRef is the reservation of an order's create event.
func EventRef(e order.Event) Ref {
	return Ref{OrderNo: e.OrderNo, UserID: e.UserID, ItemID: e.ItemID, ActivityID: e.ActivityID, IdempotencyKey: e.IdempotencyKey}
}

// OrderRef is the reservation of an order MySQL holds.
func OrderRef(o order.Order) Ref {
	return Ref{OrderNo: o.OrderNo, UserID: o.UserID, ItemID: o.ItemID, ActivityID: o.ActivityID, IdempotencyKey: o.IdempotencyKey}
}

// ReleaseOptions says which reservation a release may give back, and how.
type ReleaseOptions struct {
	// Reason is recorded on the released reservation.
	Reason string
	// From are the states the reservation may be released from; in any
	// other state it is left as it is.
	From []State
	// FreeKey also deletes the idempotency record, so the same key buys
	// again (the API answered 503, which promised that).
	FreeKey bool
}

// Released is what a release did: whether it released the reservation,
// and the state it found it in (StateReleased for a release repeated).
type Released struct {
	Released bool
	State    State
}

// Gone reports whether nothing is held for the reservation any more: it
// was released now or before, or there is none.
func (r Released) Gone() bool {
	return r.Released || r.State == StateReleased || r.State == StateMissing
}

// Release gives the reservation's stock and quota back if its state is one
// of o.From.
func (s *Store) Release(ctx context.Context, r Ref, o ReleaseOptions) (Released, error) {
	return s.release(ctx, r, o, "")
}

// ReleaseCapped is Release for an order MySQL refused for lack of stock:
// after giving the reservation back it caps Redis stock at what MySQL can
// still fulfil (dbStock minus what is in flight), in the same script, so
// the units MySQL does not have are never offered to the next buyer.
func (s *Store) ReleaseCapped(ctx context.Context, r Ref, o ReleaseOptions, dbStock int64) (Released, error) {
	return s.release(ctx, r, o, strconv.FormatInt(dbStock, 10))
}

func (s *Store) release(ctx context.Context, r Ref, o ReleaseOptions, dbStock string) (_ Released, err error) {
	ctx, span := s.span(ctx, "release", r.item())
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrOrderNo.String(r.OrderNo), tracing.AttrActivityID.Int64(r.ActivityID), attribute.String("seckill.reason", o.Reason))
	}
	defer func() { endSpan(span, err) }()
	k := s.Keys(r.item())
	keys := []string{k.Stock(), k.Inflight(), k.Pending(), k.Reservation(r.OrderNo),
		k.Quota(r.ActivityID, r.UserID), k.Idem(r.UserID, r.IdempotencyKey)}
	forget := "0"
	if o.FreeKey {
		forget = "1"
		keys = append(keys, k.room(r.ActivityID, "adm"), k.room(r.ActivityID, "used"), k.room(r.ActivityID, "held"))
	}
	from := make([]string, len(o.From))
	for i, st := range o.From {
		from[i] = string(st)
	}
	res, err := s.releaseScript.Run(ctx, s.rdb, keys, r.OrderNo, strings.Join(from, ","), o.Reason, forget, dbStock).Slice()
	if err != nil {
		return Released{}, unavailable("release", err)
	}
	state, _ := res[1].(string)
	out := Released{Released: res[0].(int64) == 1, State: State(state)}
	switch {
	case len(res) == 4:
		// A bucketed reservation released now, or found released (a
		// repeated release): its units go back to the bucket they came
		// from, once (bucket_give is idempotent per order).
		if err := s.releaseToBucket(ctx, r.item(), r.OrderNo, res[2], dbStock); err != nil {
			return out, err
		}
	case out.State == StateMissing:
		// No reservation: if the order took units from a bucket before
		// its reserve script failed, they go back.
		if err := s.giveBackAny(ctx, r.item(), r.OrderNo); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Claim moves the reservations of orders (all of item) from RESERVED to
// CLAIMED and returns the state each had before, in the same order.
func (s *Store) Claim(ctx context.Context, item Item, orderNos []string) ([]State, error) {
	if len(orderNos) == 0 {
		return nil, nil
	}
	states, errs := s.ClaimAll(ctx, []SaleOrders{{Tag: item.tagged().Tag, OrderNos: [][]string{orderNos}}})
	return states[0], errs[0]
}

// Confirm marks the reservations of orders committed in MySQL as CONFIRMED
// and returns how many it moved.
func (s *Store) Confirm(ctx context.Context, item Item, orderNos []string) (int64, error) {
	if len(orderNos) == 0 {
		return 0, nil
	}
	item = item.tagged()
	moved, errs := s.ConfirmAll(ctx, []SaleOrders{{Tag: item.Tag, Items: []int64{item.ID}, OrderNos: [][]string{orderNos}}})
	return moved[0], errs[0]
}

// A StockReader is MySQL as a warm-up reads it (*orderdb.DB).
type StockReader interface {
	// WarmupStock reads the item's stock and the id of its last restock
	// (0: none) at one instant: the stock includes exactly the item's
	// restocks up to that id (an item's restocks commit in id order). At
	// the same instant it lists the orders among pending that MySQL holds
	// live (CREATED or PAID): committed, their units are out of the stock
	// read, although Redis counts them in flight until their confirm.
	WarmupStock(ctx context.Context, item int64, pending []string) (stock, lastRestock int64, committed []string, err error)
	// MarkRestocksWarmed records the item's restocks up to id as applied
	// in Redis: a warm-up loaded them with the stock.
	MarkRestocksWarmed(ctx context.Context, item, upTo int64) error
	// RestocksBetween lists the item's restocks with an id above after
	// and at most upTo, by id, at most limit of them: their ids and
	// quantities.
	RestocksBetween(ctx context.Context, item, after, upTo int64, limit int) (ids, quantities []int64, err error)
}

// WarmupFrom loads the item's sellable stock from MySQL: its stock (read
// after this call has read the item's pending reservations) minus what is
// in flight and not in MySQL yet, split evenly over the buckets of a
// bucketed item (buckets > 1). It never raises an existing stock key or
// bucket; it returns the Redis stock afterwards.
//
// An order MySQL has committed whose confirm has not run is in Redis's
// in-flight counter and out of MySQL's stock: the warm-up leaves it out of
// what is in flight (the reconciler's "committed"), so its units are not
// taken off twice. The pending reservations are read first, MySQL's stock
// and which of them it has committed next, in one snapshot, and the
// script corrects the in-flight counter by the state each of them is in
// when it runs (see lua/warmup.lua).
//
// Restocks meet the warm-up through one record beside each stock key
// (lua/restock.lua): a key written from MySQL's figure records, in the
// same script, the last restock that figure includes (upto), so the Redis
// step of those restocks adds nothing to it, whenever it runs; a restock
// whose step finds no stock key adds nothing and sets no marker, so a
// figure read before it committed leaves it to its own step. A figure
// older than the key it would lower (the key holds a later restock) is
// read again. The restocks the loaded stock carries are then recorded as
// applied in MySQL.
func (s *Store) WarmupFrom(ctx context.Context, item Item, buckets int, ttl time.Duration, db StockReader) (int64, error) {
	n, covered, err := s.warmupFigure(ctx, item, buckets, ttl, func(ctx context.Context, pending []string) (figure, error) {
		stock, last, committed, err := db.WarmupStock(ctx, item.ID, pending)
		return figure{stock: stock, lastRestock: last, known: true, restocks: db, pending: pending, committed: committed}, err
	})
	if err != nil {
		return 0, err
	}
	if covered > 0 {
		if err := db.MarkRestocksWarmed(ctx, item.ID, covered); err != nil {
			return 0, fmt.Errorf("warmup: stock loaded; record its restocks as applied: %w", err)
		}
	}
	return n, nil
}

// Warmup is WarmupFrom for an item with one stock key and a figure that
// includes no restock (dbStock: tests and tools that never restock). A
// program warms up with WarmupFrom.
func (s *Store) Warmup(ctx context.Context, item Item, ttl time.Duration, dbStock func(context.Context) (int64, error)) (int64, error) {
	return s.WarmupBuckets(ctx, item, 1, ttl, dbStock)
}

// WarmupBuckets is Warmup for an item whose stock is split over buckets
// (1 is Warmup): the sellable stock is split evenly over missing bucket
// keys; existing ones are only ever lowered, largest first, so their sum
// is at most the sellable stock. It returns the sum of the buckets. Like
// Warmup, it knows no restocks: a program warms up with WarmupFrom.
func (s *Store) WarmupBuckets(ctx context.Context, item Item, buckets int, ttl time.Duration, dbStock func(context.Context) (int64, error)) (int64, error) {
	n, _, err := s.warmupFigure(ctx, item, buckets, ttl, func(ctx context.Context, pending []string) (figure, error) {
		stock, err := dbStock(ctx)
		return figure{stock: stock, pending: pending}, err
	})
	return n, err
}

// figure is MySQL's stock as a warm-up read it: with the last restock it
// includes when known, and the item's pending reservations read before it
// with those of them MySQL had committed (nil when not known).
type figure struct {
	stock, lastRestock int64
	known              bool
	restocks           StockReader // lists restocks (known figures only)
	pending, committed []string
}

// reservations are the keys and the count the warm-up scripts take to
// correct the in-flight counter: the hashes of the committed orders first,
// then of the other pending ones (see lua/warmup.lua).
func (f figure) reservations(k Keys) (keys []string, committed int) {
	done := make(map[string]bool, len(f.committed))
	for _, no := range f.committed {
		done[no] = true
	}
	keys = make([]string, 0, len(f.pending))
	for _, no := range f.pending {
		if done[no] {
			keys = append(keys, k.Reservation(no))
		}
	}
	committed = len(keys)
	for _, no := range f.pending {
		if !done[no] {
			keys = append(keys, k.Reservation(no))
		}
	}
	return keys, committed
}

// upto is the figure's restock watermark as the scripts take it (empty
// when not known: no record is written).
func (f figure) upto() string {
	if !f.known {
		return ""
	}
	return strconv.FormatInt(f.lastRestock, 10)
}

// errStaleFigure: the Redis stock holds a restock that the warm-up's MySQL
// figure does not (it committed after the read): read MySQL again.
var errStaleFigure = errors.New("warmup: the stock holds a restock the figure does not")

// errBucketsRaced: another warm-up created some of the missing buckets,
// perhaps from another figure: warm up again, recording this one's figure
// on every bucket.
var errBucketsRaced = errors.New("warmup: another warm-up created buckets meanwhile")

// staleReads bounds the MySQL reads of one warm-up while restocks keep
// landing between its read and its write.
const staleReads = 5

// warmupFigure runs the warm-up, reading MySQL again while its figure is
// older than the Redis stock. covered is the last restock id up to which
// both the figure and the Redis stock hold every restock (0: none, or the
// figure's restocks are not known).
func (s *Store) warmupFigure(ctx context.Context, item Item, buckets int, ttl time.Duration, read func(ctx context.Context, pending []string) (figure, error)) (n, covered int64, err error) {
	if err := s.checkWarmupLayout(ctx, item, buckets); err != nil {
		return 0, 0, err
	}
	force := false
	for attempt := 1; ; attempt++ {
		fig, err := s.pendingThenDB(ctx, item, read)
		if err != nil {
			return 0, 0, err
		}
		var upto int64
		if buckets > 1 {
			n, upto, err = s.warmupBucketed(ctx, item, buckets, ttl, fig, force)
		} else {
			n, upto, err = s.warmupOne(ctx, item, ttl, fig)
		}
		if errors.Is(err, errBucketsRaced) {
			force = true
		}
		if errors.Is(err, errStaleFigure) || errors.Is(err, errBucketsRaced) {
			if attempt < staleReads {
				continue
			}
			// Restocks keep landing between the reads: the warm-up wrote
			// nothing that contradicts them; running it again finishes.
			return 0, 0, fmt.Errorf("warmup of item %d: %w: %w", item.ID, order.ErrUnavailable, err)
		}
		if err != nil {
			return 0, 0, err
		}
		if err := s.rdb.SAdd(ctx, s.itemsKey(), item.member()).Err(); err != nil {
			return 0, 0, unavailable("record warmed item", err)
		}
		if fig.known {
			covered = min(upto, fig.lastRestock)
		}
		return n, covered, nil
	}
}

// warmupOne is the warm-up of an item with one stock key. It returns the
// stock and the last restock id the key is recorded to hold.
func (s *Store) warmupOne(ctx context.Context, item Item, ttl time.Duration, fig figure) (int64, int64, error) {
	k := s.Keys(item)
	res, committed := fig.reservations(k)
	r, err := s.warmup.Run(ctx, s.rdb, append([]string{k.Stock(), k.Inflight(), k.restockRecord()}, res...),
		fig.stock, ttl.Milliseconds(), fig.upto(), committed).Int64Slice()
	if err != nil {
		return 0, 0, unavailable("warmup", err)
	}
	if len(r) != 2 {
		return 0, 0, fmt.Errorf("warmup: unexpected reply %v", r)
	}
	if r[0] < 0 {
		return 0, 0, errStaleFigure
	}
	return r[0], r[1], nil
}

// pendingThenDB reads the item's pending reservations (RESERVED or
// CLAIMED: what the in-flight counter sums) and then, in that order,
// MySQL's figure with which of them MySQL has committed. Every order that
// is in flight when the figure is read is among them, but for one reserved
// in between; the warm-up script then sorts each of them by its state when
// it runs: an order that commits (or is confirmed) in between is never
// counted as sellable twice, nor a committed one taken off twice.
func (s *Store) pendingThenDB(ctx context.Context, item Item, read func(ctx context.Context, pending []string) (figure, error)) (figure, error) {
	pending, err := s.rdb.ZRange(ctx, s.Keys(item).Pending(), 0, -1).Result()
	if err != nil {
		return figure{}, unavailable("read pending reservations", err)
	}
	return read(ctx, pending)
}

// Snapshot is an item's stock as Redis sees it.
type Snapshot struct {
	Warmed   bool
	Stock    int64
	Inflight int64
}

// Stock reads the item's Redis stock and in-flight quantity in one round
// trip (both keys share a slot, so MGET works on a cluster too).
//
// For a bucketed item Stock is the sum of its buckets (read after the
// item's own keys) and Warmed says every bucket key exists.
func (s *Store) Stock(ctx context.Context, item Item) (Snapshot, error) {
	snaps, err := s.Stocks(ctx, []Item{item})
	if err != nil {
		return Snapshot{}, err
	}
	return snaps[0], nil
}

// Stocks is Stock for each of items, in their order: one MGET for the items
// of one sale (their keys share its hash tag), whatever their number, and
// one more read for each bucketed item.
func (s *Store) Stocks(ctx context.Context, items []Item) ([]Snapshot, error) {
	out := make([]Snapshot, len(items))
	byTag := map[int64][]int{}
	var tags []int64
	for i, it := range items {
		t := it.tagged().Tag
		if _, ok := byTag[t]; !ok {
			tags = append(tags, t)
		}
		byTag[t] = append(byTag[t], i)
	}
	for _, t := range tags {
		idx := byTag[t]
		keys := make([]string, 0, 3*len(idx))
		for _, i := range idx {
			k := s.Keys(items[i])
			keys = append(keys, k.Stock(), k.Inflight(), k.BucketMarker())
		}
		vals, err := s.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, unavailable("read stock", err)
		}
		for j, i := range idx {
			snap, err := s.snapshot(ctx, items[i], vals[3*j:3*j+3])
			if err != nil {
				return nil, err
			}
			out[i] = snap
		}
	}
	return out, nil
}

// snapshot reads an item's Snapshot from the values of its stock, in-flight
// and bucket marker keys (and its buckets, for a bucketed item).
func (s *Store) snapshot(ctx context.Context, item Item, vals []any) (Snapshot, error) {
	var snap Snapshot
	if v, ok := vals[2].(string); ok {
		if n, _ := strconv.Atoi(v); n > 1 {
			if v, ok := vals[1].(string); ok {
				snap.Inflight, _ = strconv.ParseInt(v, 10, 64)
			}
			b, err := s.readBuckets(ctx, item, n)
			if err != nil {
				return Snapshot{}, err
			}
			snap.Warmed, snap.Stock = b.warmed(), b.sum()
			return snap, nil
		}
	}
	if v, ok := vals[0].(string); ok {
		snap.Warmed = true
		snap.Stock, _ = strconv.ParseInt(v, 10, 64)
	}
	if v, ok := vals[1].(string); ok {
		snap.Inflight, _ = strconv.ParseInt(v, 10, 64)
	}
	return snap, nil
}

// WarmedItems lists the items warmup has loaded.
func (s *Store) WarmedItems(ctx context.Context) ([]Item, error) {
	ids, err := s.rdb.SMembers(ctx, s.itemsKey()).Result()
	if err != nil {
		return nil, unavailable("list items", err)
	}
	return parseMembers(ids), nil
}

// parseMembers reads the members of the warmed-items set, skipping any
// that is not one.
func parseMembers(ids []string) []Item {
	out := make([]Item, 0, len(ids))
	for _, id := range ids {
		if it, ok := parseMember(id); ok {
			out = append(out, it)
		}
	}
	return out
}

// ReservationInfo is what a reservation hash holds.
type ReservationInfo struct {
	Ref
	State      State
	Quantity   int
	ReservedAt time.Time
	Reason     string
}

// Reservation reads one reservation; order.ErrNotFound when there is none.
func (s *Store) Reservation(ctx context.Context, orderNo string) (ReservationInfo, error) {
	tag := order.TagOf(orderNo)
	m, err := s.rdb.HGetAll(ctx, s.Keys(One(tag)).Reservation(orderNo)).Result()
	if err != nil {
		return ReservationInfo{}, unavailable("read reservation", err)
	}
	if len(m) == 0 {
		return ReservationInfo{}, order.ErrNotFound
	}
	return parseReservation(tag, orderNo, m), nil
}

// parseReservation reads a reservation hash of order orderNo; item is its
// item when the hash does not name it.
func parseReservation(item int64, orderNo string, m map[string]string) ReservationInfo {
	atoi := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	if id := atoi(m["item"]); id > 0 {
		item = id
	}
	return ReservationInfo{
		Ref: Ref{OrderNo: orderNo, UserID: m["user"], ItemID: item,
			ActivityID: atoi(m["activity"]), IdempotencyKey: m["key"]},
		State:      State(m["state"]),
		Quantity:   int(atoi(m["qty"])),
		ReservedAt: time.UnixMilli(atoi(m["at"])),
		Reason:     m["reason"],
	}
}

// PendingOlderThan lists up to limit unconfirmed order numbers of item
// reserved before cutoff, oldest first.
func (s *Store) PendingOlderThan(ctx context.Context, item Item, cutoff time.Time, limit int64) ([]string, error) {
	res, err := s.rdb.ZRangeByScore(ctx, s.Keys(item).Pending(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(cutoff.UnixMilli(), 10), Count: limit,
	}).Result()
	if err != nil {
		return nil, unavailable("list pending", err)
	}
	return res, nil
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
// sent. It is false for domain errors and for failures that happen before
// anything is sent (no connection could be made or taken from the pool).
func MayHaveRun(err error) bool {
	if err == nil || !errors.Is(err, order.ErrUnavailable) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return !errors.Is(err, redis.ErrPoolTimeout) && !errors.Is(err, redis.ErrPoolExhausted) &&
		!errors.Is(err, redis.ErrClosed) && !errors.Is(err, errNotSent)
}

// unavailable wraps a Redis failure so callers see order.ErrUnavailable.
func unavailable(op string, err error) error {
	return fmt.Errorf("redis %s: %w: %w", op, order.ErrUnavailable, err)
}

// Touch moves a still-pending order's sweep time to t (it stays unpending
// if it was confirmed or released meanwhile).
func (s *Store) Touch(ctx context.Context, item Item, orderNo string, t time.Time) error {
	err := s.rdb.ZAddXX(ctx, s.Keys(item).Pending(), redis.Z{Score: float64(t.UnixMilli()), Member: orderNo}).Err()
	if err != nil {
		return unavailable("touch pending", err)
	}
	return nil
}
