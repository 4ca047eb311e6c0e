package stockredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// A bucketed order between its two steps (its units taken from the bucket,
// not yet reserved; or released, not yet given back) counts in the view's
// Moving, and nothing else does: a reserved, a confirmed and a given-back
// order. On a single node and on the 3-master cluster (the buckets and the
// item's keys on different masters).
func TestViewCountsUnitsBetweenABucketAndTheInFlightCounter(t *testing.T) {
	t.Parallel()
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "cluster"}[cluster], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var rdb redis.UniversalClient
			var prefix string
			if cluster {
				rdb, prefix = redistest.NewCluster(t)
			} else {
				rdb, prefix = redistest.New(t)
			}
			s := stockredis.New(rdb, prefix)
			warmBuckets(t, s, 30)
			k := s.Keys(reservation.One(item))
			view := func(stock, inflight, moving int64) {
				t.Helper()
				v, err := s.Reconciler.View(ctx, reservation.One(item), nil)
				if err != nil {
					t.Fatal(err)
				}
				if v.Stock != stock || v.Inflight != inflight || v.Moving != moving {
					t.Fatalf("view stock %d, inflight %d, moving %d; want %d, %d, %d", v.Stock, v.Inflight, v.Moving, stock, inflight, moving)
				}
			}
			ref := func(r reservation.Reservation) reservation.Ref {
				return reservation.Ref{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: item, ActivityID: r.ActivityID, IdempotencyKey: r.IdempotencyKey}
			}
			released := reservation.ReleaseOptions{Reason: "test", From: []reservation.State{reservation.StateReserved}}

			// Taken, the reserve to come; then reserved.
			a := res(1, "a", 2)
			a.Buckets = buckets
			if left, err := s.Reservations.TakeOnly(ctx, a, 1); err != nil || left != 8 {
				t.Fatalf("take: %d %v", left, err)
			}
			view(28, 0, 2)
			if _, err := s.Reservations.Reserve(ctx, a); err != nil {
				t.Fatal(err)
			}
			view(28, 2, 0)

			// Released, the give-back to come, its take listed no more (past
			// the retention): the item's give-backs list it; then given back.
			b := res(2, "b", 3)
			b.Buckets = buckets
			if _, err := s.Reservations.Reserve(ctx, b); err != nil {
				t.Fatal(err)
			}
			old := float64(time.Now().Add(-stockredis.MovingRetention - time.Second).UnixMilli())
			s.Client().ZAdd(ctx, k.Takes(2), redis.Z{Score: old, Member: "3:" + b.OrderNo})
			if _, err := s.Reservations.ReleaseOnly(ctx, ref(b), released); err != nil {
				t.Fatal(err)
			}
			view(25, 2, 3)
			if _, err := s.Reservations.Release(ctx, ref(b), released); err != nil {
				t.Fatal(err)
			}
			view(28, 2, 0)

			// Confirmed: its take marker stays, its units are MySQL's.
			if _, err := s.Reservations.Claim(ctx, reservation.One(item), []string{a.OrderNo}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Reservations.Confirm(ctx, reservation.One(item), []string{a.OrderNo}); err != nil {
				t.Fatal(err)
			}
			view(28, 0, 0)

			// Taken and given back (its reserve refused, or never run).
			c := res(3, "c", 1)
			c.Buckets = buckets
			if _, err := s.Reservations.TakeOnly(ctx, c, 0); err != nil {
				t.Fatal(err)
			}
			view(27, 0, 1)
			if rel, err := s.Reservations.Release(ctx, ref(c), released); err != nil || rel.State != reservation.StateMissing {
				t.Fatalf("release of a take alone: %+v %v", rel, err)
			}
			view(28, 0, 0)
		})
	}
}
