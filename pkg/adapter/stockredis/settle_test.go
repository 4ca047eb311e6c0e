package stockredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// ClaimAll and ConfirmAll settle the orders of several sales in one
// pipeline, a sale of sizes (one script for all its items) beside a sale of
// one item, on a single node and on the cluster. A lost answer in the
// pipeline leaves the outcome unknown; settling again finishes the work,
// and nothing counts twice: every reservation CONFIRMED once, nothing left
// in flight or pending, the stock as the reserves left it.
func TestClaimAndConfirmSeveralSalesAtOnce(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		ctx := context.Background()
		other := warmTwoSales(t, l.direct)
		a, b, c := sizedRes(sizes[0], 1, "k", 1), sizedRes(sizes[2], 2, "k", 2), sizedRes(other, 3, "k", 1)
		for _, r := range []reservation.Reservation{a, b, c} {
			if _, err := l.direct.Reservations.Reserve(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		claims := []reservation.SaleOrders{
			{Tag: item, OrderNos: [][]string{{a.OrderNo, b.OrderNo}}},
			{Tag: other.Tag, OrderNos: [][]string{{c.OrderNo}}},
		}
		for _, want := range []reservation.State{reservation.StateReserved, reservation.StateClaimed} {
			states, errs := l.via.Reservations.ClaimAll(ctx, claims)
			for i, err := range errs {
				if err != nil {
					t.Fatalf("claim of sale %d: %v", i, err)
				}
			}
			if len(states[0]) != 2 || states[0][0] != want || states[0][1] != want || len(states[1]) != 1 || states[1][0] != want {
				t.Fatalf("claim: states %v, want %s for each order", states, want)
			}
		}

		confirms := []reservation.SaleOrders{
			{Tag: item, Items: []int64{sizes[0].ID, sizes[2].ID}, OrderNos: [][]string{{a.OrderNo}, {b.OrderNo}}},
			{Tag: other.Tag, Items: []int64{other.ID}, OrderNos: [][]string{{c.OrderNo}}},
		}
		l.LoseNext("confirm")
		moved, errs := l.via.Reservations.ConfirmAll(ctx, confirms)
		failed := 0
		for _, err := range errs {
			if err != nil {
				failed++
				if !stockredis.MayHaveRun(err) {
					t.Fatalf("confirm with an answer lost: %v, want an outcome that may have run", err)
				}
			}
		}
		// On the cluster go-redis sends the lost part of a pipeline again:
		// safe for confirm, and then nothing fails.
		if l.Lost() != 1 {
			t.Fatalf("the proxies dropped %d answers, want 1", l.Lost())
		}
		total := moved[0] + moved[1]
		again, errs := l.via.Reservations.ConfirmAll(ctx, confirms)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("confirm again, sale %d: %v", i, err)
			}
		}
		total += again[0] + again[1]
		if failed == 0 && (again[0] != 0 || again[1] != 0) {
			t.Fatalf("confirm again moved %v after a first call that answered %v: it ran twice", again, moved)
		}
		if failed > 0 && total > 3 {
			t.Fatalf("confirms moved %d reservations (%v then %v), want at most 3", total, moved, again)
		}
		for _, r := range []reservation.Reservation{a, b, c} {
			if st := state(t, l.direct, r.OrderNo); st != reservation.StateConfirmed {
				t.Fatalf("order %s: %s, want CONFIRMED", r.OrderNo, st)
			}
		}
		for _, w := range []struct {
			it    reservation.Item
			stock int64
		}{{sizes[0], 4}, {sizes[1], 5}, {sizes[2], 3}, {other, 4}} {
			if snap := sizeStock(t, l.direct, w.it); snap.Stock != w.stock || snap.Inflight != 0 {
				t.Fatalf("item %d: stock %d in flight %d, want %d and 0", w.it.ID, snap.Stock, snap.Inflight, w.stock)
			}
			if n := l.Direct.ZCard(ctx, l.direct.Keys(w.it).Pending()).Val(); n != 0 {
				t.Fatalf("item %d: %d orders still pending", w.it.ID, n)
			}
		}
	})
}

// A claim of several sales in one pipeline whose answer is lost leaves the
// outcome unknown (or, on the cluster, go-redis sends the lost part again);
// claiming again finds every reservation CLAIMED: go ahead, nothing lost.
func TestLostReplyClaimOfSeveralSales(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		ctx := context.Background()
		other := warmTwoSales(t, l.direct)
		a, b := sizedRes(sizes[1], 1, "k", 1), sizedRes(other, 2, "k", 1)
		for _, r := range []reservation.Reservation{a, b} {
			if _, err := l.direct.Reservations.Reserve(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		claims := []reservation.SaleOrders{{Tag: item, OrderNos: [][]string{{a.OrderNo}}}, {Tag: other.Tag, OrderNos: [][]string{{b.OrderNo}}}}
		l.LoseNext("claim")
		_, errs := l.via.Reservations.ClaimAll(ctx, claims)
		for i, err := range errs {
			if err != nil && !stockredis.MayHaveRun(err) {
				t.Fatalf("claim of sale %d with an answer lost: %v, want an outcome that may have run", i, err)
			}
		}
		if l.Lost() != 1 {
			t.Fatalf("the proxies dropped %d answers, want 1", l.Lost())
		}
		states, errs := l.via.Reservations.ClaimAll(ctx, claims)
		for i := range claims {
			if errs[i] != nil || len(states[i]) != 1 || states[i][0] != reservation.StateClaimed {
				t.Fatalf("claim again, sale %d: %v %v; want CLAIMED", i, states[i], errs[i])
			}
		}
	})
}

// warmTwoSales warms the sale of sizes (5 units each) and a sale of one
// item, which it returns, with 5.
func warmTwoSales(t *testing.T, s *stockredis.Store) reservation.Item {
	t.Helper()
	other := reservation.One(item + 10)
	warmSizes(t, s, 5, 5, 5)
	if _, err := s.Stock.Warmup(context.Background(), other, time.Hour, func(context.Context) (int64, error) { return 5, nil }); err != nil {
		t.Fatal(err)
	}
	return other
}
