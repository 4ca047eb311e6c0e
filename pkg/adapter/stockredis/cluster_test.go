package stockredis_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Every script runs on a real 3-master Redis Cluster: an item's keys share
// one hash tag, so no CROSSSLOT; items spread over the masters.
func TestScriptsOnRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.NewCluster(t)
	s := stockredis.New(rdb, prefix)
	const items = 6 // hash tags {i1}..{i6} land on different masters
	for it := int64(1); it <= items; it++ {
		if _, err := s.Stock.Warmup(ctx, reservation.One(it), time.Hour, func(context.Context) (int64, error) { return 50, nil }); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted = map[int64][]reservation.Reservation{}
	)
	for it := int64(1); it <= items; it++ {
		for u := int64(1); u <= 200; u++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := reservation.Reservation{OrderNo: gen.Next(it), UserID: strconv.FormatInt(u, 10), ItemID: it, ActivityID: 7, Quantity: 1,
					IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour}
				_, err := s.Reservations.Reserve(ctx, r)
				switch {
				case err == nil:
					mu.Lock()
					accepted[it] = append(accepted[it], r)
					mu.Unlock()
				case !errors.Is(err, order.ErrSoldOut):
					t.Errorf("item %d user %d: %v", it, u, err)
				}
			}()
		}
	}
	wg.Wait()
	for it := int64(1); it <= items; it++ {
		rs := accepted[it]
		if len(rs) != 50 {
			t.Fatalf("item %d: %d reserved, want 50", it, len(rs))
		}
		nos := make([]string, len(rs))
		for i, r := range rs {
			nos[i] = r.OrderNo
		}
		if _, err := s.Reservations.Claim(ctx, reservation.One(it), nos); err != nil {
			t.Fatal(err)
		}
		// Confirm 40, release 10: stock ends at 10, nothing in flight.
		if n, err := s.Reservations.Confirm(ctx, reservation.One(it), nos[:40]); err != nil || n != 40 {
			t.Fatalf("confirm: %d %v", n, err)
		}
		for _, r := range rs[40:] {
			ref := reservation.Ref{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: it, ActivityID: 7, IdempotencyKey: "k"}
			if rel, err := s.Reservations.Release(ctx, ref, reservation.ReleaseOptions{Reason: order.ReasonOutOfStock, From: []reservation.State{reservation.StateClaimed}}); err != nil || !rel.Released {
				t.Fatalf("release: %v %v", rel.Released, err)
			}
		}
		snap, err := s.Stock.Stock(ctx, reservation.One(it))
		if err != nil || snap.Stock != 10 || snap.Inflight != 0 {
			t.Fatalf("item %d: %+v %v", it, snap, err)
		}
	}
	warmed, err := s.Stock.WarmedItems(ctx)
	if err != nil || len(warmed) != items {
		t.Fatalf("warmed items %v %v", warmed, err)
	}
}
