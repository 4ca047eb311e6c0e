package stockredis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// One batch of the reserve script answers each order exactly as a run of
// its own would, in the batch's order: a key replayed within the batch gets
// the first order's number, a user's second order is refused, and stock
// running out mid-batch refuses only the orders after it.
func TestReserveBatchKeepsEachOrdersAnswer(t *testing.T) {
	s := newStore(t, 3)
	first := res(1, "k1", 1)
	replay := first
	replay.OrderNo = gen.Next(item)
	second := res(1, "k2", 1) // same user, new key
	big := res(2, "k3", 3)    // more than is left after the first
	fits := res(3, "k4", 2)
	late := res(4, "k5", 1) // after the stock ran out
	got, errs := s.Reservations.ReserveTogether([]reservation.Reservation{first, replay, second, big, fits, late})
	want := []struct {
		res reservation.Result
		err error
	}{
		{reservation.Result{OrderNo: first.OrderNo, Left: 2}, nil},
		{reservation.Result{OrderNo: first.OrderNo, Duplicate: true}, nil},
		{reservation.Result{OrderNo: first.OrderNo}, order.ErrAlreadyPurchased},
		{reservation.Result{Left: 2}, order.ErrSoldOut},
		{reservation.Result{OrderNo: fits.OrderNo, Left: 0}, nil},
		{reservation.Result{Left: 0}, order.ErrSoldOut},
	}
	for i, w := range want {
		if got[i] != w.res || !errors.Is(errs[i], w.err) || (w.err == nil) != (errs[i] == nil) {
			t.Errorf("order %d: %+v, %v; want %+v, %v", i, got[i], errs[i], w.res, w.err)
		}
	}
	wantStock(t, s, 0, 3)
	for _, no := range []string{first.OrderNo, fits.OrderNo} {
		if st := state(t, s, no); st != reservation.StateReserved {
			t.Errorf("%s is %s, want RESERVED", no, st)
		}
	}
	for _, r := range []reservation.Reservation{replay, second, big, late} {
		if st := state(t, s, r.OrderNo); st != reservation.StateMissing {
			t.Errorf("refused %s is %s, want no reservation", r.OrderNo, st)
		}
	}
}

// An item not warmed refuses every order of a batch.
func TestReserveBatchNotWarmed(t *testing.T) {
	s := newStore(t, -1)
	_, errs := s.Reservations.ReserveTogether([]reservation.Reservation{res(1, "a", 1), res(2, "b", 1)})
	for i, err := range errs {
		if !errors.Is(err, order.ErrNotWarmed) {
			t.Errorf("order %d: %v, want not warmed", i, err)
		}
	}
}

// A batch's answer is lost: every order in it hears an unknown outcome (none
// is sent again), each ran exactly once, and each caller's release gives its
// units back.
func TestLostReplyReserveBatch(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		ctx := context.Background()
		warm(t, l.direct, 10, 1)
		rs := []reservation.Reservation{res(1, "a", 1), res(2, "b", 2), res(3, "c", 1)}
		l.LoseNext("reserve")
		_, errs := l.via.Reservations.ReserveTogether(rs)
		for i, err := range errs {
			mustBeUnknown(t, l, fmt.Sprintf("order %d of the batch", i), err)
		}
		wantStock(t, l.direct, 6, 4) // the batch ran once
		for _, r := range rs {
			if _, err := l.via.Reservations.Release(ctx, ref(r), reservation.ReleaseOptions{Reason: order.ReasonReserveFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true}); err != nil {
				t.Fatal(err)
			}
		}
		wantStock(t, l.direct, 10, 0)
	})
}

// Concurrent buyers through Reserve, which batches them: with 300 buyers
// (each also retrying its key, and 100 of them trying a second key) for 120
// units, exactly 120 units are reserved, nobody holds two orders, and every
// retry gets its own first answer.
func TestReserveBatchedUnderConcurrency(t *testing.T) {
	s := newStore(t, 120)
	const buyers = 300
	var mu sync.Mutex
	holders := map[string]string{} // user -> order
	var wg sync.WaitGroup
	for u := range buyers {
		wg.Go(func() {
			ctx := context.Background()
			r := res(int64(1000+u), "key"+strconv.Itoa(u), 1)
			got, err := s.Reservations.Reserve(ctx, r)
			again := r
			again.OrderNo = gen.Next(item)
			replay, rerr := s.Reservations.Reserve(ctx, again)
			if err == nil {
				if rerr != nil || !replay.Duplicate || replay.OrderNo != got.OrderNo {
					t.Errorf("buyer %d's retry: %+v, %v; want its order %s", u, replay, rerr, got.OrderNo)
				}
				mu.Lock()
				holders[r.UserID] = got.OrderNo
				mu.Unlock()
			} else if !errors.Is(err, order.ErrSoldOut) {
				t.Errorf("buyer %d: %v", u, err)
			}
			if u%3 == 0 {
				other := res(int64(1000+u), "other"+strconv.Itoa(u), 1)
				if got, err := s.Reservations.Reserve(ctx, other); err == nil {
					t.Errorf("buyer %d's second key bought %s", u, got.OrderNo)
				}
			}
		})
	}
	wg.Wait()
	if len(holders) != 120 {
		t.Fatalf("%d buyers hold an order, want 120", len(holders))
	}
	wantStock(t, s, 0, 120)
}

// Batches in both directions at sizes past the scripts' slices: 2,500
// orders reserved (in batches of the reserve script's size), claimed and
// confirmed in one call each; every unit and every pending entry is
// accounted for, and a second confirm moves nothing.
func TestLargeBatchesReserveClaimConfirm(t *testing.T) {
	const n = 2500
	s := newStore(t, n+10)
	rs := make([]reservation.Reservation, n)
	nos := make([]string, n)
	for i := range rs {
		rs[i] = res(int64(5000+i), "big"+strconv.Itoa(i), 1)
		nos[i] = rs[i].OrderNo
	}
	for i := 0; i < n; i += 64 {
		_, errs := s.Reservations.ReserveTogether(rs[i:min(i+64, n)])
		for j, err := range errs {
			if err != nil {
				t.Fatalf("order %d: %v", i+j, err)
			}
		}
	}
	wantStock(t, s, 10, n)
	ctx := context.Background()
	states, err := s.Reservations.Claim(ctx, reservation.One(item), nos)
	if err != nil || len(states) != n {
		t.Fatalf("claim: %d states, %v", len(states), err)
	}
	moved, err := s.Reservations.Confirm(ctx, reservation.One(item), nos)
	if err != nil || moved != n {
		t.Fatalf("confirm moved %d, %v; want %d", moved, err, n)
	}
	wantStock(t, s, 10, 0)
	left, err := s.Client().ZCard(ctx, s.Keys(reservation.One(item)).Pending()).Result()
	if err != nil || left != 0 {
		t.Fatalf("%d orders still pending (%v), want none", left, err)
	}
	if moved, err := s.Reservations.Confirm(ctx, reservation.One(item), nos); err != nil || moved != 0 {
		t.Fatalf("a second confirm moved %d, %v", moved, err)
	}
	wantStock(t, s, 10, 0)
}

// One batch of the reserver holding orders of several sales runs a script
// per sale at once (on a single node, one script for all), and each order
// gets its own sale's answer: stock sells
// to its last unit in each sale, the one-per-buyer rule holds across a
// sale's sizes and not across sales.
func TestReserveBatchOfSeveralSales(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, cluster bool) {
		ctx := context.Background()
		// Sale b sells a's item too, as its second item, from a stock of
		// its own.
		a, b, ab := reservation.One(item+20), reservation.One(item+30), reservation.In(item+30, item+20)
		for it, stock := range map[reservation.Item]int64{a: 2, b: 1, ab: 1} {
			if _, err := s.Stock.Warmup(ctx, it, time.Hour, func(context.Context) (int64, error) { return stock, nil }); err != nil {
				t.Fatal(err)
			}
		}
		warmSizes(t, s, 1, 1, 1)
		rs := []reservation.Reservation{
			sizedRes(a, 1, "k", 1), sizedRes(sizes[0], 1, "k", 1), sizedRes(b, 1, "k", 1),
			sizedRes(a, 2, "k", 1), sizedRes(sizes[1], 1, "k2", 1), sizedRes(b, 2, "k", 1),
			sizedRes(a, 3, "k", 1), sizedRes(sizes[2], 2, "k", 1), sizedRes(ab, 3, "k", 1),
		}
		want := []error{nil, nil, nil, nil, order.ErrAlreadyPurchased, order.ErrSoldOut, order.ErrSoldOut, nil, nil}
		got, errs := s.Reservations.ReserveAtOnce(rs)
		for i, w := range want {
			if !errors.Is(errs[i], w) || (w == nil) != (errs[i] == nil) {
				t.Errorf("order %d (item %d, user %s): %v, want %v", i, rs[i].ItemID, rs[i].UserID, errs[i], w)
			}
			if w == nil && got[i].OrderNo != rs[i].OrderNo {
				t.Errorf("order %d: answered for %s, want its own %s", i, got[i].OrderNo, rs[i].OrderNo)
			}
		}
		for _, w := range []struct {
			it              reservation.Item
			stock, inflight int64
		}{{a, 0, 2}, {b, 0, 1}, {ab, 0, 1}, {sizes[0], 0, 1}, {sizes[1], 1, 0}, {sizes[2], 0, 1}} {
			if snap := sizeStock(t, s, w.it); snap.Stock != w.stock || snap.Inflight != w.inflight {
				t.Errorf("item %d: stock %d in flight %d, want %d and %d", w.it.ID, snap.Stock, snap.Inflight, w.stock, w.inflight)
			}
		}
	})
}

// The answer of a reserve batch of several sales is lost: on a single node
// (one script for all) every order of it hears an unknown outcome, on the
// cluster (a script per sale, the next answer lost on each node) the orders
// of each sale whose answer was lost do; never an answer from a second
// run. Every script ran exactly once.
func TestLostReplyReserveBatchOfSeveralSales(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		ctx := context.Background()
		a, b := reservation.One(item+20), reservation.One(item+30)
		for it, stock := range map[reservation.Item]int64{a: 2, b: 1} {
			if _, err := l.direct.Stock.Warmup(ctx, it, time.Hour, func(context.Context) (int64, error) { return stock, nil }); err != nil {
				t.Fatal(err)
			}
		}
		l.LoseNext("reserve")
		_, errs := l.via.Reservations.ReserveAtOnce([]reservation.Reservation{sizedRes(a, 1, "k", 1), sizedRes(b, 1, "k", 1), sizedRes(a, 2, "k", 1)})
		unknown := 0
		for i, err := range errs {
			var u *stockredis.UnknownOutcomeError
			switch {
			case errors.As(err, &u):
				unknown++
			case err != nil:
				t.Fatalf("order %d: %v, want an answer or an unknown outcome", i, err)
			}
		}
		if single := len(l.Proxies) == 1; single && (unknown != 3 || l.Lost() != 1) || !single && (unknown == 0 || l.Lost() == 0) {
			t.Fatalf("%d orders of 3 heard an unknown outcome, %d answers lost (single node: want 3 and 1)", unknown, l.Lost())
		}
		for _, w := range []struct {
			it              reservation.Item
			stock, inflight int64
		}{{a, 0, 2}, {b, 0, 1}} {
			if snap := sizeStock(t, l.direct, w.it); snap.Stock != w.stock || snap.Inflight != w.inflight {
				t.Fatalf("item %d: stock %d in flight %d, want %d and %d: each script ran once", w.it.ID, snap.Stock, snap.Inflight, w.stock, w.inflight)
			}
		}
	})
}
