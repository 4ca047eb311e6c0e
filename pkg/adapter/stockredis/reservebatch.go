package stockredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/batch"
)

// errNotSent marks a script that was never sent (MayHaveRun is false).
var errNotSent = errors.New("not sent")

// reserveBatch bounds how many orders one run of the reserve script takes.
const reserveBatch = 64

// reserveWorkers is how many batches of reserves may be in flight at once.
const reserveWorkers = 4

// reserveFanOut is how many scripts of one batch (one per sale) may be in
// flight at once.
const reserveFanOut = 8

// reserveCall is one order waiting for the reserve script.
type reserveCall struct {
	r     reservation.Reservation
	reply chan reserveAnswer
	first string      // KEYS[1]: the item's stock key (or bucket marker)
	mode  reserveMode // ARGV[2]
}

// reserveMode is how a run of the reserve script takes its units (ARGV[2]
// of lua/reserve.lua): from each item's one stock key (plainMode, the zero
// value), from the admissions of a sale with a waiting room (roomMode), or
// as recorded takes from bucket n of a bucketed item (bucketMode(n)).
type reserveMode int

// The reserve modes other than a bucket's.
const (
	plainMode reserveMode = 0
	roomMode  reserveMode = -1
)

// bucketMode is the mode of orders that took their units from bucket n
// (n >= 0).
func bucketMode(n int) reserveMode { return reserveMode(n + 1) }

// arg is the mode as the script takes it: "", "room" or the bucket's
// number.
func (m reserveMode) arg() string {
	switch m {
	case plainMode:
		return ""
	case roomMode:
		return "room"
	}
	return strconv.Itoa(int(m) - 1)
}

type reserveAnswer struct {
	res reservation.Result
	err error
}

// reserver runs concurrent reservations of one sale in one script, whatever
// their items: a worker takes the first waiting order and every other one
// already queued (no timer, so a lone order is not delayed), groups them by
// sale (one hash tag, so one script works on a cluster too) and runs the
// script once per group. Under load the queue fills while a script is in flight, so the
// batches grow with the load and the round trips per order fall.
//
// A batch is one command: if its answer is lost, every order in it gets
// the same UnknownOutcomeError a lone order would, and each caller settles
// its own order as it always did (MayHaveRun).
type reserver struct {
	rdb    redis.UniversalClient
	prefix string
	script *redis.Script
	// oneNode: rdb is a single Redis (not a cluster, a ring or a
	// sentinel-led set), where one script may touch any keys, so the
	// orders of several sales share one run.
	oneNode bool
	queue   chan reserveCall
	once    sync.Once
}

func newReserver(rdb redis.UniversalClient, prefix string) *reserver {
	_, oneNode := rdb.(*redis.Client)
	return &reserver{rdb: rdb, prefix: prefix, script: redis.NewScript(lua.Source("reserve")), oneNode: oneNode}
}

func (b *reserver) start() {
	b.queue = batch.Start(reserveWorkers, 4*reserveBatch, reserveBatch, b.runAll)
}

// runAll runs the script once for each sale (hash tag) of calls: the
// orders of all its items with one stock key each in one run, and those of
// a bucketed item by the bucket they took their units from. On a single
// node the unbucketed orders of every sale share one run. The runs go at
// once, up to reserveFanOut (each is a command of its own, never a
// pipeline: a client may send a pipeline again after a lost answer, and a
// reserve must not run twice unseen). It reorders calls in place.
func (b *reserver) runAll(calls []reserveCall) {
	var groups [][]reserveCall
	for len(calls) > 0 {
		head := calls[0]
		group := calls[:0:0]
		rest := calls[:0]
		for _, c := range calls {
			same := (b.oneNode || c.r.Item().Tag == head.r.Item().Tag) && c.mode == head.mode
			switch head.mode {
			case plainMode:
			case roomMode:
				// One room's keys a run: one sale.
				same = same && c.r.Item().Tag == head.r.Item().Tag && c.r.ActivityID == head.r.ActivityID
			default:
				same = same && c.r.Item() == head.r.Item() && c.first == head.first
			}
			if same {
				group = append(group, c)
			} else {
				rest = append(rest, c)
			}
		}
		groups = append(groups, group)
		calls = rest
	}
	if len(groups) == 1 {
		b.run(groups[0])
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, reserveFanOut)
	for _, g := range groups {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			b.run(g)
		})
	}
	wg.Wait()
}

// run runs the script for calls, all of one sale (or, on a single node, of
// any sales), and answers each.
func (b *reserver) run(calls []reserveCall) {
	c0 := calls[0]
	var items []reserveCall             // the first call of each item, in order
	index := map[reservation.Item]int{} // by item and sale: an item may be sold by two sales
	for _, c := range calls {
		if _, ok := index[c.r.Item()]; !ok {
			index[c.r.Item()] = len(items)
			items = append(items, c)
		}
	}
	keys := make([]string, 0, 3*len(items)+3+4*len(calls))
	args := make([]any, 0, 2+len(items)+10*len(calls))
	args = append(args, len(items), c0.mode.arg())
	for _, c := range items {
		it := c.r.Item()
		k := Keys{prefix: b.prefix, tag: it.Tag, item: it.ID}
		keys = append(keys, c.first, k.Inflight(), k.Pending())
		args = append(args, it.ID)
	}
	if c0.mode == roomMode {
		k := Keys{prefix: b.prefix, tag: c0.r.Item().Tag}
		keys = append(keys, k.room(c0.r.ActivityID, "adm"), k.room(c0.r.ActivityID, "used"), k.room(c0.r.ActivityID, "held"), k.room(c0.r.ActivityID, "lcode"))
	}
	for _, c := range calls {
		r := c.r
		it := r.Item()
		k := Keys{prefix: b.prefix, tag: it.Tag, item: it.ID}
		keys = append(keys, k.Reservation(r.OrderNo), k.Quota(r.ActivityID, r.UserID), k.Idem(r.UserID, r.IdempotencyKey),
			k.Codes(r.ActivityID))
		args = append(args, index[it], r.OrderNo, r.UserID, r.ActivityID, r.Quantity, r.At.UnixMilli(), r.IdempotencyKey,
			r.QuotaTTL.Milliseconds(), r.ReservationTTL.Milliseconds(), string(r.Code))
	}
	res, err := b.script.Run(context.Background(), b.rdb, keys, args...).Slice()
	if err == nil && len(res) != 2*len(calls) {
		err = fmt.Errorf("reserve: %d values for %d orders", len(res), len(calls))
	}
	for i, c := range calls {
		var a reserveAnswer
		if err != nil {
			a.err = unavailable("reserve", err)
		} else {
			a.res, a.err = reserveResult(c.r.OrderNo, res[2*i], res[2*i+1])
		}
		c.reply <- a
	}
}

// reserveResult reads one order's two values of the script's answer.
func reserveResult(orderNo string, code, val any) (reservation.Result, error) {
	c, _ := code.(int64)
	switch c {
	case 1:
		left, _ := val.(int64)
		return reservation.Result{OrderNo: orderNo, Left: left}, nil
	case -1:
		return reservation.Result{}, order.ErrNotWarmed
	case -2:
		no, _ := val.(string)
		return reservation.Result{OrderNo: no, Duplicate: true}, nil
	case -3:
		no, _ := val.(string)
		return reservation.Result{OrderNo: no}, order.ErrAlreadyPurchased
	case -4:
		left, _ := val.(int64)
		return reservation.Result{Left: left}, order.ErrSoldOut
	case -5:
		return reservation.Result{}, order.Errorf(order.ErrNotAdmitted, "the admission was used by an order, or expired: poll the queue again")
	case -6:
		grant, _ := val.(int64)
		return reservation.Result{}, order.Errorf(order.ErrInvalidArgument, "your admission holds %d units: order at most that many", grant)
	case -7:
		return reservation.Result{}, access.ErrCodeInvalid
	case -8:
		return reservation.Result{}, access.ErrCodeUsed
	}
	return reservation.Result{}, fmt.Errorf("reserve: unexpected reply %v %v", code, val)
}

// reserve queues r and waits for its answer. Once queued, the order may be
// taken, so it waits for the answer even if ctx ends meanwhile (the Redis
// client's timeouts bound the wait): a caller that gave up would not know
// whether its order holds stock.
func (b *reserver) reserve(ctx context.Context, r reservation.Reservation, first string, mode reserveMode) (reservation.Result, error) {
	b.once.Do(b.start)
	c := reserveCall{r: r, first: first, mode: mode, reply: make(chan reserveAnswer, 1)}
	select {
	case b.queue <- c:
	case <-ctx.Done():
		return reservation.Result{}, unavailable("reserve", fmt.Errorf("%w: %w", errNotSent, ctx.Err()))
	}
	a := <-c.reply
	return a.res, a.err
}
