package stockredis_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// A warm-up runs while orders are committed in MySQL and their confirm has
// not run yet (the consumer's confirm waits on a slow or restarting Redis,
// or the consumer died after its commit): MySQL's stock no longer has their
// units, and the in-flight counter still counts them. The warm-up must not
// subtract them twice: Redis keeps every unit MySQL has, and once the
// confirms run Redis stock equals MySQL stock. Before the fix the warm-up
// lowered Redis by the committed units for good (soak seed 3, sales B and
// F: Redis below MySQL with nothing in flight).
//
// Beside the committed orders, one reservation is still on its way (MySQL
// has not seen it: counted as in flight) and one was refused by MySQL
// (FAILED, not released yet: its release gives its units back). On a
// single node and on the cluster, where the scripts take the reservations'
// keys beside the stock's (a CROSSSLOT error would fail them).
func TestWarmupDoesNotCountCommittedOrdersTwice(t *testing.T) {
	for _, tc := range []struct {
		buckets int
		cluster bool
	}{{1, false}, {3, false}, {1, true}, {3, true}} {
		buckets := tc.buckets
		t.Run(fmt.Sprintf("buckets=%d/cluster=%v", buckets, tc.cluster), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb, prefix := newRedis(t, tc.cluster)
			s := stockredis.New(rdb, prefix)
			db := mysqltest.New(t)
			it, err := db.Activities.CreateItem(ctx, "sneaker", 30)
			if err != nil {
				t.Fatal(err)
			}
			act, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: time.Now().Add(-time.Minute),
				EndsAt: time.Now().Add(time.Hour), PerUserLimit: 5, StockBuckets: buckets})
			if err != nil {
				t.Fatal(err)
			}
			item := reservation.One(it.ID)
			warmup := func() int64 {
				t.Helper()
				n, err := s.Stock.WarmupFrom(ctx, item, buckets, time.Hour, db.Restocks)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			if n := warmup(); n != 30 {
				t.Fatalf("first warm-up: %d, want 30", n)
			}
			gen := order.NewNumberGenerator()
			var rs []reservation.Reservation
			for u := range 6 {
				r := reservation.Reservation{OrderNo: gen.Next(it.ID), UserID: strconv.Itoa(u + 1), ItemID: it.ID,
					ActivityID: act.ID, Quantity: 1 + u%2, IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour,
					ReservationTTL: 2 * time.Hour, Buckets: buckets}
				if _, err := s.Reservations.Reserve(ctx, r); err != nil {
					t.Fatalf("reserve %d: %v", u, err)
				}
				rs = append(rs, r)
			}
			// Four committed (6 units), one on its way (1 unit), one
			// refused by MySQL (2 units, never taken there).
			committed, onItsWay, refused := rs[:4], rs[4], rs[5]
			var nos []string
			var reqs []order.FulfilRequest
			for _, r := range committed {
				nos = append(nos, r.OrderNo)
				reqs = append(reqs, order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: r.OrderNo,
					IdempotencyKey: r.IdempotencyKey, UserID: r.UserID, ItemID: r.ItemID, ActivityID: r.ActivityID,
					Quantity: r.Quantity, ReservedAt: r.At}, PayDeadline: time.Now().Add(time.Hour)})
			}
			if _, err := s.Reservations.Claim(ctx, item, append(nos, refused.OrderNo)); err != nil {
				t.Fatal(err)
			}
			out, err := mysqltest.Fulfil(ctx, db.DB, reqs)
			if err != nil {
				t.Fatal(err)
			}
			for _, no := range nos {
				if out[no].Status != order.Created {
					t.Fatalf("order %s: %+v, want CREATED", no, out[no])
				}
			}
			if err := db.Gorm().Exec(`INSERT INTO orders (order_no, user_id, item_id, activity_id, quantity, status,
				failure_reason, idempotency_key, reserved_at) VALUES (?, ?, ?, ?, ?, 'FAILED', 'SALE_ENDED', 'k', ?)`,
				refused.OrderNo, refused.UserID, refused.ItemID, refused.ActivityID, refused.Quantity, time.Now().UTC()).Error; err != nil {
				t.Fatal(err)
			}
			// Redis: 30 - 9 reserved = 21, 9 in flight; MySQL: 30 - 6 = 24.
			// Sellable: 24 - 3 (on its way and refused) = 21, what Redis has.
			if n := warmup(); n != 21 {
				t.Errorf("warm-up between the commit and the confirm: Redis stock %d, want 21 (MySQL 24 - 3 in flight)", n)
			}
			if _, err := s.Reservations.Confirm(ctx, item, nos); err != nil {
				t.Fatal(err)
			}
			if rel, err := s.Reservations.Release(ctx, reservation.Ref{OrderNo: refused.OrderNo, UserID: refused.UserID, ItemID: refused.ItemID,
				ActivityID: refused.ActivityID, IdempotencyKey: refused.IdempotencyKey},
				reservation.ReleaseOptions{Reason: order.ReasonSaleEnded, From: []reservation.State{reservation.StateClaimed}}); err != nil || !rel.Released {
				t.Fatalf("release the refused order: %+v %v", rel, err)
			}
			if n := warmup(); n != 23 {
				t.Errorf("warm-up after the confirms: Redis stock %d, want 23 (MySQL 24 - 1 on its way)", n)
			}
			snap, err := s.Stock.Stock(ctx, item)
			if err != nil {
				t.Fatal(err)
			}
			mysql, err := db.Activities.ItemStock(ctx, it.ID)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Stock+snap.Inflight != mysql || snap.Inflight != int64(onItsWay.Quantity) {
				t.Errorf("Redis stock %d + in flight %d, MySQL %d: want them equal, %d in flight",
					snap.Stock, snap.Inflight, mysql, onItsWay.Quantity)
			}
		})
	}
}
