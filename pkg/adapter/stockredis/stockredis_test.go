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
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

const item = 42

func newStore(t *testing.T, stock int64) *stockredis.Store {
	t.Helper()
	rdb, prefix := redistest.New(t)
	s := stockredis.New(rdb, prefix)
	if stock >= 0 {
		_, err := s.Stock.Warmup(context.Background(), reservation.One(item), time.Hour, func(context.Context) (int64, error) { return stock, nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

var gen = order.NewNumberGenerator()

func res(user int64, key string, qty int) reservation.Reservation {
	return reservation.Reservation{
		OrderNo: gen.Next(item), UserID: strconv.FormatInt(user, 10), ItemID: item, ActivityID: 7, Quantity: qty,
		IdempotencyKey: key, At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour,
	}
}

func snapshot(t *testing.T, s *stockredis.Store) reservation.Snapshot {
	t.Helper()
	snap, err := s.Stock.Stock(context.Background(), reservation.One(item))
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// The seed's three-line check: stock 2, reserve 1 -> 1 left, again -> 0,
// again -> sold out; then the other refusals.
func TestReserve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 2)
	first := res(1, "k1", 1)

	steps := []struct {
		name     string
		r        reservation.Reservation
		wantErr  error
		wantLeft int64
		wantDup  string
	}{
		{name: "first unit", r: first, wantLeft: 1},
		{name: "second unit", r: res(2, "k2", 1), wantLeft: 0},
		{name: "sold out", r: res(3, "k3", 1), wantErr: order.ErrSoldOut},
		{name: "duplicate key returns the original order", r: res(1, "k1", 1), wantDup: first.OrderNo},
		{name: "quota reached", r: res(1, "other-key", 1), wantErr: order.ErrAlreadyPurchased},
	}
	for _, st := range steps {
		got, err := s.Reservations.Reserve(ctx, st.r)
		if !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: err = %v, want %v", st.name, err, st.wantErr)
		}
		if st.wantDup != "" {
			if !got.Duplicate || got.OrderNo != st.wantDup {
				t.Fatalf("%s: got %+v, want duplicate of %s", st.name, got, st.wantDup)
			}
			continue
		}
		if err == nil && got.Left != st.wantLeft {
			t.Fatalf("%s: left = %d, want %d", st.name, got.Left, st.wantLeft)
		}
	}
	if snap := snapshot(t, s); snap.Stock != 0 || snap.Inflight != 2 {
		t.Fatalf("snapshot = %+v, want stock 0 in flight 2", snap)
	}
}

func TestReserveRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		stock   int64 // -1: not warmed
		r       reservation.Reservation
		wantErr error
	}{
		{name: "not warmed", stock: -1, r: res(1, "a", 1), wantErr: order.ErrNotWarmed},
		{name: "quantity larger than stock", stock: 2, r: res(1, "a", 3), wantErr: order.ErrSoldOut},
		{name: "exact stock", stock: 3, r: res(1, "a", 3)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.stock)
			_, err := s.Reservations.Reserve(ctx, tc.r)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == order.ErrSoldOut {
				// A short stock never burns the quota: the same user may
				// still buy a smaller quantity.
				if _, err := s.Reservations.Reserve(ctx, res(1, "b", 1)); err != nil {
					t.Fatalf("quota was burnt by a sold-out attempt: %v", err)
				}
			}
		})
	}
}

func TestReserveConcurrentDistinctUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 100)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ok      = map[int64]int{}
		soldOut int
	)
	for u := int64(1); u <= 1000; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Reservations.Reserve(ctx, res(u, "k", 1))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok[u]++
			case errors.Is(err, order.ErrSoldOut):
				soldOut++
			default:
				t.Errorf("user %d: %v", u, err)
			}
		}()
	}
	wg.Wait()
	if len(ok) != 100 || soldOut != 900 {
		t.Fatalf("reserved %d users, sold out %d; want 100 and 900", len(ok), soldOut)
	}
	for u, n := range ok {
		if n != 1 {
			t.Fatalf("user %d reserved %d times", u, n)
		}
	}
	if snap := snapshot(t, s); snap.Stock != 0 || snap.Inflight != 100 {
		t.Fatalf("snapshot = %+v, want stock 0, in flight 100", snap)
	}
}

func TestReserveConcurrentOneUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, refused := 0, 0
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Reservations.Reserve(ctx, res(9, fmt.Sprintf("key-%d", i), 1))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, order.ErrAlreadyPurchased):
				refused++
			default:
				t.Errorf("%v", err)
			}
		}()
	}
	wg.Wait()
	if accepted != 1 || refused != 199 {
		t.Fatalf("accepted %d, refused %d; want 1 and 199", accepted, refused)
	}
	if snap := snapshot(t, s); snap.Stock != 99 {
		t.Fatalf("stock = %d, want 99", snap.Stock)
	}
}

func TestReleaseAtMostOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 5)
	r := res(1, "k", 2)
	if _, err := s.Reservations.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	ref := reservation.Ref{OrderNo: r.OrderNo, UserID: "1", ItemID: item, ActivityID: 7, IdempotencyKey: "k"}
	for i, want := range []bool{true, false, false} {
		rel, err := s.Reservations.Release(ctx, ref, reservation.ReleaseOptions{Reason: order.ReasonPublishFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true})
		if err != nil {
			t.Fatal(err)
		}
		if rel.Released != want {
			t.Fatalf("release %d: released=%v (state %s), want %v", i, rel.Released, rel.State, want)
		}
	}
	if snap := snapshot(t, s); snap.Stock != 5 || snap.Inflight != 0 {
		t.Fatalf("snapshot = %+v, want stock 5, in flight 0", snap)
	}
	// Quota and key are free again: the same key reserves anew.
	again := res(1, "k", 1)
	got, err := s.Reservations.Reserve(ctx, again)
	if err != nil || got.Duplicate {
		t.Fatalf("reserve after release: %+v %v", got, err)
	}
}

func TestClaimReleaseConfirmStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 10)
	a, b, c := res(1, "a", 1), res(2, "b", 1), res(3, "c", 1)
	for _, r := range []reservation.Reservation{a, b, c} {
		if _, err := s.Reservations.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// The API's release of c wins before the consumer sees it.
	refC := reservation.Ref{OrderNo: c.OrderNo, UserID: "3", ItemID: item, ActivityID: 7, IdempotencyKey: "c"}
	if rel, err := s.Reservations.Release(ctx, refC, reservation.ReleaseOptions{Reason: order.ReasonPublishFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true}); err != nil || !rel.Released {
		t.Fatalf("release c: %v %v", rel.Released, err)
	}
	states, err := s.Reservations.Claim(ctx, reservation.One(item), []string{a.OrderNo, b.OrderNo, c.OrderNo, "nope"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"RESERVED", "RESERVED", "RELEASED", "MISSING"}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Fatalf("claim states = %v, want %v", states, want)
	}
	// Once claimed, the API's release (only from RESERVED) does nothing.
	refA := reservation.Ref{OrderNo: a.OrderNo, UserID: "1", ItemID: item, ActivityID: 7, IdempotencyKey: "a"}
	if rel, _ := s.Reservations.Release(ctx, refA, reservation.ReleaseOptions{Reason: order.ReasonPublishFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true}); rel.Released || rel.State != "CLAIMED" {
		t.Fatalf("API release of a claimed reservation: released=%v state=%s", rel.Released, rel.State)
	}
	if n, err := s.Reservations.Confirm(ctx, reservation.One(item), []string{a.OrderNo, a.OrderNo}); err != nil || n != 1 {
		t.Fatalf("confirm = %d, %v; want 1", n, err)
	}
	refB := reservation.Ref{OrderNo: b.OrderNo, UserID: "2", ItemID: item, ActivityID: 7, IdempotencyKey: "b"}
	if rel, err := s.Reservations.Release(ctx, refB, reservation.ReleaseOptions{Reason: order.ReasonOutOfStock, From: []reservation.State{reservation.StateClaimed}}); err != nil || !rel.Released {
		t.Fatalf("consumer release of b: %v %v", rel.Released, err)
	}
	if snap := snapshot(t, s); snap.Stock != 9 || snap.Inflight != 0 {
		t.Fatalf("snapshot = %+v, want stock 9 (one confirmed), in flight 0", snap)
	}
	// b's key still answers with b (the order FAILED; a retry must see it).
	got, err := s.Reservations.Reserve(ctx, res(2, "b", 1))
	if err != nil || !got.Duplicate || got.OrderNo != b.OrderNo {
		t.Fatalf("replay of b's key: %+v %v", got, err)
	}
}

func TestReleaseKeepsNewerQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 10)
	old := res(1, "old", 1)
	if _, err := s.Reservations.Reserve(ctx, old); err != nil {
		t.Fatal(err)
	}
	// The quota now belongs to a newer order of the same user (e.g. the
	// reconciler restored it after Redis lost its keys).
	k := s.Keys(reservation.One(item))
	if err := s.Client().Set(ctx, k.Quota(7, "1"), "NEWER", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	ref := reservation.Ref{OrderNo: old.OrderNo, UserID: "1", ItemID: item, ActivityID: 7, IdempotencyKey: "old"}
	if rel, err := s.Reservations.Release(ctx, ref, reservation.ReleaseOptions{Reason: order.ReasonCancelled, From: []reservation.State{reservation.StateReserved}}); err != nil || !rel.Released {
		t.Fatalf("release: %v %v", rel.Released, err)
	}
	if got, _ := s.Client().Get(ctx, k.Quota(7, "1")).Result(); got != "NEWER" {
		t.Fatalf("quota = %q after releasing the old order, want NEWER kept", got)
	}
	if _, err := s.Reservations.Reserve(ctx, res(1, "third", 1)); !errors.Is(err, order.ErrAlreadyPurchased) {
		t.Fatalf("newer order's quota was freed by an old release: %v", err)
	}
}

func TestWarmupNeverExceedsFulfillable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 10)
	for u := int64(1); u <= 3; u++ {
		if _, err := s.Reservations.Reserve(ctx, res(u, "k", 1)); err != nil {
			t.Fatal(err)
		}
	}
	// Warm up again with MySQL still at 10 (3 orders on their way): Redis
	// stays 7, not 10.
	n, err := s.Stock.Warmup(ctx, reservation.One(item), time.Hour, func(context.Context) (int64, error) { return 10, nil })
	if err != nil || n != 7 {
		t.Fatalf("warmup = %d, %v; want 7", n, err)
	}
	// MySQL lower than Redis believes: Redis is lowered.
	n, err = s.Stock.Warmup(ctx, reservation.One(item), time.Hour, func(context.Context) (int64, error) { return 5, nil })
	if err != nil || n != 2 {
		t.Fatalf("warmup = %d, %v; want 2", n, err)
	}
}

// MySQL refused an order for lack of stock: its release gives the quota back
// but caps Redis stock at what MySQL can still fulfil, so the next buyer is
// never offered a unit MySQL does not have.
func TestReleaseCappedByMySQLStock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 10)
	var rs []reservation.Reservation
	for u := int64(1); u <= 4; u++ {
		r := res(u, "k", 1)
		if _, err := s.Reservations.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	// MySQL has only 3 units although Redis sold 4 of 10: stock 6, in flight 4.
	ref := reservation.Ref{OrderNo: rs[0].OrderNo, UserID: "1", ItemID: item, ActivityID: 7, IdempotencyKey: "k"}
	rel, err := s.Reservations.ReleaseCapped(ctx, ref, reservation.ReleaseOptions{Reason: order.ReasonOutOfStock, From: []reservation.State{reservation.StateReserved}}, 3)
	if err != nil || !rel.Released {
		t.Fatalf("release: %v %v", rel.Released, err)
	}
	// 3 in flight will take MySQL's 3 units: nothing is left to sell.
	if snap := snapshot(t, s); snap.Stock != 0 || snap.Inflight != 3 {
		t.Fatalf("snapshot = %+v, want stock 0, in flight 3", snap)
	}
	// The buyer's quota came back (the store is sold out, not blocked).
	if _, err := s.Reservations.Reserve(ctx, res(1, "again", 1)); !errors.Is(err, order.ErrSoldOut) {
		t.Fatalf("retry of the refused buyer: %v, want sold out", err)
	}
}

// Many concurrent look-ups of idempotency keys and quotas share MGETs and
// each gets its own answer.
func TestPriorOrdersBatchesLookups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 1000)
	want := map[int64]string{}
	for u := int64(1); u <= 100; u++ {
		r := res(u, "k", 1)
		if _, err := s.Reservations.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
		want[u] = r.OrderNo
	}
	var wg sync.WaitGroup
	for u := int64(1); u <= 200; u++ { // users above 100 never reserved
		for _, key := range []string{"k", "other"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				prior, err := s.Reservations.PriorOrders(ctx, reservation.One(item), 7, strconv.FormatInt(u, 10), key)
				if err != nil {
					t.Error(err)
					return
				}
				if exp := want[u]; key == "k" && prior.ByKey != exp || key == "other" && prior.ByKey != "" || prior.QuotaHolder != exp {
					t.Errorf("user %d key %s: prior %q, quota held by %q", u, key, prior.ByKey, prior.QuotaHolder)
				}
			}()
		}
	}
	wg.Wait()
}

// Concurrent look-ups in three sales (one of sizes) share one pipeline of
// MGETs, one per sale, on a single node and on the cluster (where one MGET
// over several sales would be refused), and each gets its own answer.
func TestPriorOrdersOfSeveralSalesAtOnce(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, cluster bool) {
		ctx := context.Background()
		sales := []reservation.Item{reservation.One(item + 20), reservation.One(item + 30), sizes[1]}
		for _, it := range sales {
			if _, err := s.Stock.Warmup(ctx, it, time.Hour, func(context.Context) (int64, error) { return 100, nil }); err != nil {
				t.Fatal(err)
			}
		}
		want := map[string]string{} // by sale and user
		for i, it := range sales {
			for u := int64(1); u <= 30; u++ {
				if (u+int64(i))%3 == 0 {
					continue // this user did not buy in this sale
				}
				r := sizedRes(it, u, "k", 1)
				if _, err := s.Reservations.Reserve(ctx, r); err != nil {
					t.Fatal(err)
				}
				want[fmt.Sprint(i, "/", u)] = r.OrderNo
			}
		}
		var wg sync.WaitGroup
		for i, it := range sales {
			for u := int64(1); u <= 30; u++ {
				wg.Go(func() {
					prior, err := s.Reservations.PriorOrders(ctx, it, 7, strconv.FormatInt(u, 10), "k")
					if err != nil {
						t.Error(err)
						return
					}
					if exp := want[fmt.Sprint(i, "/", u)]; prior.ByKey != exp || prior.QuotaHolder != exp {
						t.Errorf("sale %d user %d: prior %q, quota held by %q; want %q", i, u, prior.ByKey, prior.QuotaHolder, exp)
					}
				})
			}
		}
		wg.Wait()
	})
}
