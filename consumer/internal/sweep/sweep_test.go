package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/consumer/internal/sweep"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// TestSweepOnce runs one sweep in-process against real Redis, MySQL and
// Kafka over one reservation in each situation the sweep tells apart, and
// checks what it did, the reservation's state, and what reached the topic;
// a second sweep right after changes nothing.
func TestSweepOnce(t *testing.T) {
	t.Parallel()
	const after = 2 * time.Second
	cases := []struct {
		name string
		ago  time.Duration // how long ago the reservation was made
		// setup brings MySQL and the claim where the case needs them.
		setup     func(t *testing.T, p *pipelinetest.Pipeline, ev order.Event)
		want      sweep.Stats
		state     reservation.State
		published int64
		keyFreed  bool // the idempotency key is gone
	}{
		{"young reservation", 0, nil, sweep.Stats{}, reservation.StateReserved, 0, false},
		{"not in MySQL, reserved", 2 * after, nil,
			sweep.Stats{Republished: 1}, reservation.StateReserved, 1, false},
		{"not in MySQL, claimed lately", 2 * after, claim,
			sweep.Stats{}, reservation.StateClaimed, 0, false},
		{"not in MySQL, claimed long ago", 20 * after, claim,
			sweep.Stats{Republished: 1}, reservation.StateClaimed, 1, false},
		{"created in MySQL, claimed", 2 * after, func(t *testing.T, p *pipelinetest.Pipeline, ev order.Event) {
			claim(t, p, ev)
			if _, err := mysqltest.Fulfil(context.Background(), p.DB.DB, []order.FulfilRequest{{Event: ev, PayDeadline: time.Now().Add(time.Hour)}}); err != nil {
				t.Fatal(err)
			}
		}, sweep.Stats{Confirmed: 1}, reservation.StateConfirmed, 0, false},
		{"failed in MySQL for a 503, reserved", 2 * after, abandon(order.ReasonPublishFailed),
			sweep.Stats{Released: 1}, reservation.StateReleased, 0, true},
		{"failed in MySQL, claimed", 2 * after, func(t *testing.T, p *pipelinetest.Pipeline, ev order.Event) {
			claim(t, p, ev)
			abandon(order.ReasonOutOfStock)(t, p, ev)
		}, sweep.Stats{Released: 1}, reservation.StateReleased, 0, false},
		// Created, confirmed, cancelled and released, then Redis came back
		// from a state older than all that: the reservation is RESERVED
		// again, its units out of Redis stock, while MySQL has them back.
		{"closed and released in MySQL, reserved again", 2 * after, closedAndReleased,
			sweep.Stats{Released: 1}, reservation.StateReleased, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
			s := p.NewSale(10, 1)
			ev := p.ReserveEventAt(s, 7, 1, "sweep-key", time.Now().Add(-c.ago))
			if c.setup != nil {
				c.setup(t, p, ev)
			}
			pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: p.Topic})
			defer pub.Close()
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			sw := &sweep.Sweeper{Items: p.Store.Stock, Reservations: p.Store.Reservations, DB: p.DB.Orders, Publisher: pub, After: after, Log: log,
				Locker: lock.New(p.Redis, lock.Options{Prefix: p.Prefix, InstanceID: "sweep-test"})}

			st, err := sw.SweepOnce(ctx)
			if err != nil || st != c.want {
				t.Fatalf("sweep: %+v %v, want %+v", st, err, c.want)
			}
			if st, err := sw.SweepOnce(ctx); err != nil || st != (sweep.Stats{}) {
				t.Errorf("second sweep: %+v %v, want nothing done", st, err)
			}
			info, err := p.Store.Reservations.Reservation(ctx, ev.OrderNo)
			if err != nil || info.State != c.state {
				t.Errorf("reservation %+v %v, want %s", info, err, c.state)
			}
			end, _, err := kafkatest.Offsets(ctx, p.Topic, "")
			if err != nil || end[0] != c.published {
				t.Errorf("topic holds %v %v, want %d events", end, err, c.published)
			}
			_, err = p.Redis.Get(ctx, p.Store.Keys(reservation.One(ev.ItemID)).Idem(ev.UserID, ev.IdempotencyKey)).Result()
			if freed := errors.Is(err, redis.Nil); freed != c.keyFreed || (err != nil && !freed) {
				t.Errorf("idempotency key read: %v, want freed %v", err, c.keyFreed)
			}
			// What MySQL has decided is settled in Redis; what it has not
			// is still in flight.
			snap, err := p.Store.Stock.Stock(ctx, reservation.One(ev.ItemID))
			if err != nil {
				t.Fatal(err)
			}
			if db, err := p.DB.Activities.ItemStock(ctx, ev.ItemID); err != nil || snap.Stock+snap.Inflight != db {
				t.Errorf("Redis stock %d + in flight %d != MySQL stock %d (%v)", snap.Stock, snap.Inflight, db, err)
			}
		})
	}
}

func closedAndReleased(t *testing.T, p *pipelinetest.Pipeline, ev order.Event) {
	t.Helper()
	ctx := context.Background()
	if _, err := mysqltest.Fulfil(ctx, p.DB.DB, []order.FulfilRequest{{Event: ev, PayDeadline: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if tr, err := p.DB.Orders.CloseOrder(ctx, ev.UserID, ev.OrderNo, order.ReasonCancelled); err != nil || !tr.Won {
		t.Fatalf("close: %+v %v", tr, err)
	}
	if err := p.DB.Orders.MarkReleased(ctx, ev.OrderNo); err != nil {
		t.Fatal(err)
	}
}

func claim(t *testing.T, p *pipelinetest.Pipeline, ev order.Event) {
	t.Helper()
	if st, err := p.Store.Reservations.Claim(context.Background(), reservation.One(ev.ItemID), []string{ev.OrderNo}); err != nil || st[0] != reservation.StateReserved {
		t.Fatalf("claim: %v %v", st, err)
	}
}

func abandon(reason string) func(t *testing.T, p *pipelinetest.Pipeline, ev order.Event) {
	return func(t *testing.T, p *pipelinetest.Pipeline, ev order.Event) {
		t.Helper()
		if o, _, err := p.DB.Orders.Abandon(context.Background(), ev, reason); err != nil || o.Status != order.Failed {
			t.Fatalf("abandon: %+v %v", o, err)
		}
	}
}

// A stranded reservation the sweep cannot read (its key holds a string:
// WRONGTYPE) and an item whose pending list it cannot read do not stop the
// sweep: the reservations after the bad one, and the other items, are
// finished in the same sweep. Each failure is logged once with the order
// number or the item, and skipped until its backoff ends: a sweep right
// after does not try them again.
func TestSweepGoesOnPastARecordThatFails(t *testing.T) {
	t.Parallel()
	const after = 2 * time.Second
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	s, badItem, other := p.NewSale(10, 3), p.NewSale(10, 1), p.NewSale(10, 1)
	ago := time.Now().Add(-time.Minute)
	unreadable := p.ReserveEventAt(s, 1, 1, "k1", ago)
	republish := p.ReserveEventAt(s, 2, 1, "k2", ago.Add(time.Second))
	created := p.ReserveEventAt(s, 3, 1, "k3", ago.Add(2*time.Second))
	claim(t, p, created)
	if _, err := mysqltest.Fulfil(ctx, p.DB.DB, []order.FulfilRequest{{Event: created, PayDeadline: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	otherItems := p.ReserveEventAt(other, 4, 1, "k4", ago)
	p.ReserveEventAt(badItem, 5, 1, "k5", ago)
	rdb := p.Redis
	for _, key := range []string{p.Store.Keys(reservation.One(s.ItemID)).Reservation(unreadable.OrderNo), p.Store.Keys(reservation.One(badItem.ItemID)).Pending()} {
		if err := rdb.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, key, "not what the sweep reads", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: p.Topic})
	defer pub.Close()
	logBuf := &logstest.Buffer{}
	sw := &sweep.Sweeper{Items: p.Store.Stock, Reservations: p.Store.Reservations, DB: p.DB.Orders, Publisher: pub, After: after, Log: slog.New(slog.NewJSONHandler(logBuf, nil)),
		Locker: lock.New(rdb, lock.Options{Prefix: p.Prefix, InstanceID: "sweep-test"})}

	st, err := sw.SweepOnce(ctx)
	if want := (sweep.Stats{Confirmed: 1, Republished: 2}); err != nil || st != want {
		t.Fatalf("sweep: %+v %v, want %+v (the good reservations of both good items)", st, err, want)
	}
	for _, c := range []struct {
		e     order.Event
		state reservation.State
	}{{republish, reservation.StateReserved}, {created, reservation.StateConfirmed}, {otherItems, reservation.StateReserved}} {
		if info, err := p.Store.Reservations.Reservation(ctx, c.e.OrderNo); err != nil || info.State != c.state {
			t.Errorf("reservation %s: %+v %v, want %s", c.e.OrderNo, info, err, c.state)
		}
	}
	if end, _, err := kafkatest.Offsets(ctx, p.Topic, ""); err != nil || end[0] != 2 {
		t.Errorf("topic holds %v %v, want the 2 re-published events", end, err)
	}
	failures := func(attr string) int {
		n := 0
		for _, l := range strings.Split(logBuf.String(), "\n") {
			if strings.Contains(l, "a record failed in a periodic pass") && strings.Contains(l, attr) {
				n++
			}
		}
		return n
	}
	badOrder, badList := `"order_no":"`+unreadable.OrderNo+`"`, fmt.Sprintf(`"item_id":%d,"err"`, badItem.ItemID)
	if failures(badOrder) != 1 || failures(badList) != 1 {
		t.Fatalf("failure lines: %d for the unreadable reservation, %d for the unreadable item; want 1 each:\n%s",
			failures(badOrder), failures(badList), logBuf.String())
	}
	if st, err := sw.SweepOnce(ctx); err != nil || st != (sweep.Stats{}) {
		t.Fatalf("second sweep: %+v %v, want nothing done", st, err)
	}
	if failures(badOrder) != 1 || failures(badList) != 1 {
		t.Fatalf("the second sweep tried them again:\n%s", logBuf.String())
	}
}

// A stranded reservation of an order MySQL refused for the buyer's live
// one (ALREADY_PURCHASED: Redis had lost the buyer's quota, so the second
// order passed the reserve script) hands its quota to the live order when
// the sweep releases it: deleted, the live order would hold none and the
// buyer could pass Redis again (the consumer's release does the same,
// consumer/internal/fulfil TestRefusedSecondOrderHandsTheQuotaToTheLiveOne).
func TestSweepHandsARefusedOrdersQuotaToTheLiveOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const after = 2 * time.Second
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	s := p.NewSale(10, 1)
	live := p.ReserveEventAt(s, 7, 1, "first-key", time.Now().Add(-4*after))
	claim(t, p, live)
	if _, err := mysqltest.Fulfil(ctx, p.DB.DB, []order.FulfilRequest{{Event: live, PayDeadline: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	quota := p.Store.Keys(reservation.One(s.ItemID)).Quota(s.ActivityID, "7")
	if err := p.Redis.Del(ctx, quota).Err(); err != nil { // lost with Redis data
		t.Fatal(err)
	}
	second := p.ReserveEventAt(s, 7, 1, "second-key", time.Now().Add(-2*after))
	claim(t, p, second)
	// The consumer wrote the refusal and died before its release.
	if o, err := p.DB.Orders.FulfilOne(ctx, order.FulfilRequest{Event: second}); err != nil || o.Reason != order.ReasonAlreadyPurchased {
		t.Fatalf("second order: %+v %v, want FAILED %s", o, err, order.ReasonAlreadyPurchased)
	}
	pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: p.Topic})
	defer pub.Close()
	sw := &sweep.Sweeper{Items: p.Store.Stock, Reservations: p.Store.Reservations, DB: p.DB.Orders, Publisher: pub, After: after,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Locker: lock.New(p.Redis, lock.Options{Prefix: p.Prefix, InstanceID: "sweep-test"})}
	if st, err := sw.SweepOnce(ctx); err != nil || st != (sweep.Stats{Confirmed: 1, Released: 1}) {
		t.Fatalf("sweep: %+v %v, want the live one confirmed and the refused one released", st, err)
	}
	if got := p.Redis.Get(ctx, quota).Val(); got != live.OrderNo {
		t.Errorf("quota holds %q after the sweep, want the live order %s", got, live.OrderNo)
	}
	snap, err := p.Store.Stock.Stock(ctx, reservation.One(s.ItemID))
	if db, dberr := p.DB.Activities.ItemStock(ctx, s.ItemID); err != nil || dberr != nil || snap.Stock != 9 || snap.Inflight != 0 || db != 9 {
		t.Errorf("Redis %+v (%v), MySQL %d (%v); want 9 in both, none in flight", snap, err, db, dberr)
	}
}
