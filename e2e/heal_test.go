package e2e_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// snapshot is a copy of every key under a prefix (DUMP), to bring them
// back later as Redis brought back from an older state would.
type snapshot map[string]struct {
	dump string
	ttl  time.Duration
}

func snapshotPrefix(t *testing.T, rdb redis.UniversalClient, prefix string) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{}
	for _, k := range prefixKeys(t, rdb, prefix) {
		d, err := rdb.Dump(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			continue // gone since the scan (a lock, a short-lived record)
		}
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		s[k] = struct {
			dump string
			ttl  time.Duration
		}{d, max(ttl, 0)}
	}
	return s
}

// rewindPrefix deletes every key under prefix and restores s: the prefix's
// data as it was when s was taken.
func rewindPrefix(t *testing.T, rdb redis.UniversalClient, prefix string, s snapshot) {
	t.Helper()
	ctx := context.Background()
	for _, k := range prefixKeys(t, rdb, prefix) {
		if err := rdb.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range s {
		if err := rdb.RestoreReplace(ctx, k, v.ttl, v.dump).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func prefixKeys(t *testing.T, rdb redis.UniversalClient, prefix string) []string {
	t.Helper()
	keys, err := redistest.Keys(context.Background(), rdb, prefix+":*")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// Redis loses data while no consumer runs (brought back from an older
// state, or emptied, during a rolling deploy): the next consumer notices it
// at start, from what the watch recorded in MySQL, and repairs Redis from
// MySQL: stock and MySQL agree again, and a buyer who retries an accepted
// order's key gets that order, not a second one. The loss is made on the
// test's own keys: they are rewound to a copy taken before the order
// (the watch's generation marker under the prefix with them, as a
// restart from an older AOF rewinds it), or deleted.
func TestConsumerHealsRedisLostWhileNoneRan(t *testing.T) {
	t.Parallel()
	healsLostWhileNoneRan(t, false)
}

// The same on a 3-master Redis Cluster (the watch reads every master's
// run id; the marker lives on one of them).
func TestConsumerHealsRedisLostWhileNoneRanCluster(t *testing.T) {
	t.Parallel()
	healsLostWhileNoneRan(t, true)
}

func healsLostWhileNoneRan(t *testing.T, cluster bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, RedisCluster: cluster})
	rdb := p.Redis
	ctx := context.Background()
	// The watch's generation marker (consumer/internal/redisloss.MarkerKey).
	marker := p.Prefix + ":heal:generation"
	api := p.StartAPI()
	consumer := p.StartConsumer("SECKILL_HEAL_EVERY=100ms")
	sale := api.CreateSale(10, 1)
	// markerPast waits until the watch's marker exists and is not was, and
	// returns it.
	markerPast := func(was string) string {
		t.Helper()
		var v string
		waittest.Until(t, 10*time.Second, "the watch's generation marker "+marker+" past "+strconv.Quote(was), func() bool {
			var err error
			v, err = rdb.Get(ctx, marker).Result()
			return err == nil && v != was
		})
		return v
	}
	markerPast("")
	before := snapshotPrefix(t, rdb, p.Prefix)
	// Read after the copy: the copy's marker is at most this.
	old := markerPast("")

	placed := map[int64]string{}
	for round, lose := range []string{"rewound", "emptied"} {
		user := int64(round + 1)
		placed[user] = buy(t, p, api, user, "heal-"+lose, sale.ActivityID)
		// The watch raised the marker since the copy, and recorded it in
		// MySQL: the copy's is behind the record. (A raise the watch did
		// not record before it stopped is no evidence.) In the second
		// round the marker is deleted: any record is ahead.
		gen, err := strconv.ParseInt(old, 10, 64)
		if err != nil {
			t.Fatalf("marker %q: %v", old, err)
		}
		waittest.Until(t, 10*time.Second, "the watch's record in MySQL past generation "+old, func() bool {
			return p.Count("SELECT COALESCE(MAX(generation), 0) FROM redis_watches WHERE marker = ?", marker) > gen
		})
		if err := consumer.Stop(30 * time.Second); err != nil {
			t.Fatalf("stop the consumer: %v", err)
		}
		switch lose {
		case "rewound":
			rewindPrefix(t, rdb, p.Prefix, before)
		case "emptied":
			rewindPrefix(t, rdb, p.Prefix, nil)
		}
		if got := rdb.Exists(ctx, p.Store.Keys(reservation.One(sale.ItemID)).Quota(sale.ActivityID, strconv.FormatInt(user, 10))).Val(); got != 0 {
			t.Fatalf("%s: the buyer's quota key is still there", lose)
		}

		consumer = p.StartConsumer("SECKILL_HEAL_EVERY=100ms")
		want := sale.Stock - user
		waittest.Until(t, 30*time.Second, lose+": Redis stock repaired from MySQL's "+strconv.FormatInt(want, 10), func() bool {
			snap, err := p.Store.Stock.Stock(ctx, reservation.One(sale.ItemID))
			return err == nil && snap.Warmed && snap.Stock == want
		})
		if l := consumer.Log(); !strings.Contains(l, "Redis lost data; repairing it from MySQL") || !strings.Contains(l, `"reason":"marker"`) {
			t.Fatalf("%s: the consumer logged no detection by the marker", lose)
		}
		p.Check(sale)
		// Every buyer's retry of their key gets their order.
		for u, no := range placed {
			pl, err := api.PlaceOrder(u, "heal-"+[]string{"rewound", "emptied"}[u-1], sale.ActivityID, 1)
			if err != nil || (pl.Code != 200 && pl.Code != 202) || pl.OrderNo != no {
				t.Fatalf("%s: retry of user %d's key: %+v %v, want their order %s", lose, u, pl, err, no)
			}
		}
		if n := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ?", sale.ActivityID); n != user {
			t.Fatalf("%s: %d orders in MySQL, want %d (one a buyer)", lose, n, user)
		}
		if n := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = ?", sale.ActivityID, string(order.Created)); n != user {
			t.Fatalf("%s: %d CREATED orders, want %d", lose, n, user)
		}
		old = markerPast("")
	}
}

// healRig is a sale of 10 (one per buyer) with an api and a consumer whose
// data-loss watch ticks every 100ms.
type healRig struct {
	t        *testing.T
	p        *pipelinetest.Pipeline
	api      *pipelinetest.API
	consumer *pipelinetest.Proc
	sale     pipelinetest.Sale
	// marker is the watch's generation marker
	// (consumer/internal/redisloss.MarkerKey).
	marker string
}

func newHealRig(t *testing.T) healRig {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	consumer := p.StartConsumer("SECKILL_HEAL_EVERY=100ms")
	return healRig{t: t, p: p, api: api, consumer: consumer, sale: api.CreateSale(10, 1), marker: p.Prefix + ":heal:generation"}
}

// markerPast waits until the watch's marker exists and is not was, and
// returns it.
func (h healRig) markerPast(was string) string {
	h.t.Helper()
	var v string
	waittest.Until(h.t, 10*time.Second, "the watch's generation marker past "+strconv.Quote(was), func() bool {
		var err error
		v, err = h.p.Redis.Get(context.Background(), h.marker).Result()
		return err == nil && v != was
	})
	return v
}

// Redis is brought back from a copy older than three CREATED orders, while
// no consumer runs; the next consumer heals it from MySQL. Then one buyer
// cancels and another lets the payment window pass (the consumer's
// closer): each close gives its unit back to MySQL and, through the
// reservation the heal gave back, to Redis, so Redis and MySQL agree and
// the reconciler finds no drift. Before the heal restored reservations,
// both releases found none and Redis stayed two units below MySQL.
func TestClosesAfterTheHealCreditRedis(t *testing.T) {
	t.Parallel()
	h := newHealRig(t)
	p, rdb, api, consumer, sale, marker := h.p, h.p.Redis, h.api, h.consumer, h.sale, h.marker
	ctx := context.Background()
	h.markerPast("")
	before := snapshotPrefix(t, rdb, p.Prefix)
	old := h.markerPast("")
	var nos []string
	for u := int64(1); u <= 3; u++ {
		nos = append(nos, buy(t, p, api, u, "close-after-heal", sale.ActivityID))
	}
	gen, err := strconv.ParseInt(old, 10, 64)
	if err != nil {
		t.Fatalf("marker %q: %v", old, err)
	}
	waittest.Until(t, 10*time.Second, "the watch's record in MySQL past generation "+old, func() bool {
		return p.Count("SELECT COALESCE(MAX(generation), 0) FROM redis_watches WHERE marker = ?", marker) > gen
	})
	if err := consumer.Stop(30 * time.Second); err != nil {
		t.Fatalf("stop the consumer: %v", err)
	}
	rewindPrefix(t, rdb, p.Prefix, before)
	if n := rdb.Exists(ctx, p.Store.Keys(reservation.One(sale.ItemID)).Reservation(nos[0])).Val(); n != 0 {
		t.Fatal("the rewound copy holds the reservation made after it")
	}
	p.StartConsumer("SECKILL_HEAL_EVERY=100ms")
	stockIs := func(what string, want int64) {
		t.Helper()
		waittest.Until(t, 30*time.Second, what+": Redis stock "+strconv.FormatInt(want, 10), func() bool {
			snap, err := p.Store.Stock.Stock(ctx, reservation.One(sale.ItemID))
			return err == nil && snap.Warmed && snap.Stock == want && snap.Inflight == 0
		})
	}
	stockIs("healed", 7)

	if code, b := act(t, api, "1", nos[0], "cancel"); code != 200 || b.Status != "CLOSED" {
		t.Fatalf("cancel: %d %+v", code, b)
	}
	if err := p.DB.Gorm().Exec("UPDATE orders SET pay_deadline = ? WHERE order_no = ?",
		time.Now().Add(-time.Second).UTC(), nos[1]).Error; err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 30*time.Second, "the closer closes the unpaid order", func() bool {
		return p.Count("SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'CLOSED' AND released_at IS NOT NULL", nos[1]) == 1
	})
	stockIs("after the cancel and the timeout", 9)
	p.Check(sale)
	// The consumer's watch checks Redis every 100 ms under the reconcile
	// lock: the reconciler waits its turn rather than refusing to run.
	rep := reconcile(t, p, 0, "--wait", "30s")
	if it := rep.Items[0]; it.Verdict != "ok" || it.Drift != 0 {
		t.Fatalf("reconciler after the closes: %+v", it)
	}
}

// Redis is brought back from a copy taken while an order was still on its
// way (RESERVED), after the order was created, cancelled and released: the
// reservation is live again, its unit out of Redis stock, while MySQL has
// the unit back. The heal finds nothing to repair (the read counts the
// reservation as releasing) and closes its incident; the sweep then meets
// the stranded reservation and releases it, as the closer would, so Redis
// and MySQL agree with nothing in flight. When the sweep confirmed it, as
// for a live order, Redis stayed one unit below MySQL for good.
func TestReservationBackLiveForAClosedOrderIsReleased(t *testing.T) {
	t.Parallel()
	h := newHealRig(t)
	p, rdb, api, consumer, sale, marker := h.p, h.p.Redis, h.api, h.consumer, h.sale, h.marker
	ctx := context.Background()
	item := reservation.One(sale.ItemID)
	h.markerPast("")
	if err := consumer.Stop(30 * time.Second); err != nil {
		t.Fatalf("stop the consumer: %v", err)
	}
	placedAt := time.Now()
	pl, err := api.PlaceOrder(1, "back-live", sale.ActivityID, 1)
	if err != nil || pl.Code != 202 {
		t.Fatalf("order: %+v %v", pl, err)
	}
	before := snapshotPrefix(t, rdb, p.Prefix)
	old, err := rdb.Get(ctx, marker).Int64()
	if err != nil {
		t.Fatal(err)
	}

	consumer = p.StartConsumer("SECKILL_HEAL_EVERY=100ms")
	if o := p.WaitFinal(map[string]int64{pl.OrderNo: 1}, 30*time.Second)[pl.OrderNo]; o.Status != order.Created {
		t.Fatalf("order %s: %+v", pl.OrderNo, o)
	}
	if code, b := act(t, api, "1", pl.OrderNo, "cancel"); code != 200 || b.Status != "CLOSED" {
		t.Fatalf("cancel: %d %+v", code, b)
	}
	waittest.Until(t, 10*time.Second, "the cancel's release recorded, and the watch's record past generation "+strconv.FormatInt(old, 10), func() bool {
		return p.Count("SELECT COUNT(*) FROM orders WHERE order_no = ? AND released_at IS NOT NULL", pl.OrderNo) == 1 &&
			p.Count("SELECT COALESCE(MAX(generation), 0) FROM redis_watches WHERE marker = ?", marker) > old
	})
	if err := consumer.Stop(30 * time.Second); err != nil {
		t.Fatalf("stop the consumer: %v", err)
	}
	rewindPrefix(t, rdb, p.Prefix, before)
	if info, err := p.Store.Reservations.Reservation(ctx, pl.OrderNo); err != nil || info.State != reservation.StateReserved {
		t.Fatalf("the rewound reservation: %+v %v, want RESERVED", info, err)
	}
	if snap, err := p.Store.Stock.Stock(ctx, item); err != nil || snap.Stock != 9 || snap.Inflight != 1 {
		t.Fatalf("the rewound stock: %+v %v, want 9 with 1 in flight", snap, err)
	}

	// The sweep takes the reservation for stranded only once the heal,
	// every 100ms, has run its passes and closed its incident.
	after := time.Since(placedAt) + 3*time.Second
	consumer = p.StartConsumer("SECKILL_HEAL_EVERY=100ms", "SECKILL_SWEEP_AFTER="+after.String(), "SECKILL_SWEEP_EVERY=500ms")
	waittest.Until(t, 10*time.Second, "the heal to detect the rewind and close its incident", func() bool {
		return p.Count("SELECT COUNT(*) FROM redis_watches WHERE marker = ? AND losses > 0 AND healed >= losses", marker) == 1
	})
	waittest.Until(t, 30*time.Second, "Redis stock 10 with nothing in flight", func() bool {
		snap, err := p.Store.Stock.Stock(ctx, item)
		return err == nil && snap.Stock == 10 && snap.Inflight == 0
	})
	if info, err := p.Store.Reservations.Reservation(ctx, pl.OrderNo); err != nil || info.State != reservation.StateReleased {
		t.Fatalf("the reservation after the sweep: %+v %v, want RELEASED", info, err)
	}
	p.Check(sale)
	rep := reconcile(t, p, 0, "--wait", "30s") // the watch checks every 100 ms under the lock
	if it := rep.Items[0]; it.Verdict != "ok" || it.Drift != 0 {
		t.Fatalf("reconciler: %+v", it)
	}
	if l := consumer.Log(); !strings.Contains(l, "stranded reservation released") {
		t.Fatalf("the consumer did not log the release:\n%s", l)
	}
}
