package stockredis_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/domain/room"
)

var roomStart = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// newRoom is a room over the three sizes, starting at roomStart.
func newRoom(admit, grantMax int) room.Room {
	return room.Room{ActivityID: 7, Items: sizes, StartsAt: roomStart, GrantMax: grantMax,
		Settings: activity.WaitingRoom{AdmitPerSecond: admit, AdmissionTTL: 2 * time.Minute}, KeysUntil: roomStart.Add(time.Hour)}
}

// buildRoom writes img as r's room at now (a room never built answers
// room.ErrLost).
func buildRoom(t *testing.T, s *stockredis.Store, r room.Room, img room.Image, now time.Time) {
	t.Helper()
	ctx := context.Background()
	if err := s.Rooms.BeginRoomBuild(ctx, r, "t", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Rooms.FinishRoomBuild(ctx, r, "t", img, now); err != nil {
		t.Fatal(err)
	}
}

func join(t *testing.T, s *stockredis.Store, r room.Room, seed room.Seed, user string, at time.Time) room.Place {
	t.Helper()
	p, err := s.Rooms.JoinRoom(context.Background(), r, user, room.Rank(seed, user), "", at)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func look(t *testing.T, s *stockredis.Store, r room.Room, user string, at time.Time) room.Place {
	t.Helper()
	p, err := s.Rooms.LookRoom(context.Background(), r, user, at)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func advance(t *testing.T, s *stockredis.Store, r room.Room, at time.Time) room.State {
	t.Helper()
	st, err := s.Rooms.AdvanceRoom(context.Background(), r, at, room.State{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// spearman is Spearman's rank correlation of two permutations of 1..n.
func spearman(a, b []int64) float64 {
	var d2 float64
	for i := range a {
		d := float64(a[i] - b[i])
		d2 += d * d
	}
	n := float64(len(a))
	return 1 - 6*d2/(n*(n*n-1))
}

// 2,000 buyers join before the start, 400 at once: their positions are a
// permutation of 1..2000 that anyone with the seed recomputes, uncorrelated
// with the order they came in; those who come later queue in arrival order.
func TestRoomFairOrder(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, _ redis.UniversalClient, _ bool) {
		r, seed := newRoom(100, 1), room.NewSeed()
		buildRoom(t, s, r, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		const n = 2000
		users := make([]string, n)
		for i := range users {
			users[i] = "buyer-" + strconv.Itoa(i)
		}
		// In waves of 400 concurrent joins, each wave a second later.
		for w := 0; w < n; w += 400 {
			var wg sync.WaitGroup
			for _, u := range users[w : w+400] {
				wg.Go(func() {
					if p := join(t, s, r, seed, u, roomStart.Add(time.Duration(w-n)*time.Second)); !p.Joined || p.Position != 0 {
						t.Errorf("early join of %s: %+v, want joined without a position yet", u, p)
					}
				})
			}
			wg.Wait()
		}
		if p := join(t, s, r, seed, users[5], roomStart.Add(-time.Second)); p.Position != 0 {
			t.Fatalf("joining again before the start: %+v", p)
		}
		// A look at a buyer not in the room counts those who are, as the
		// advance does: the api knows a stranger absent while it holds.
		if p := look(t, s, r, "stranger", roomStart.Add(-time.Millisecond)); p.Joined || p.Count != n {
			t.Fatalf("a stranger's look before the start: %+v, want not joined and a count of %d", p, n)
		}
		if st := advance(t, s, r, roomStart.Add(-time.Millisecond)); st.Started || st.Joined != n {
			t.Fatalf("before the start: %+v, want %d early joiners and not started", st, n)
		}

		// Anyone with the seed: positions by rank, ties by user id.
		byRank := slices.Clone(users)
		slices.SortFunc(byRank, func(a, b string) int {
			if c := cmp.Compare(room.Rank(seed, a), room.Rank(seed, b)); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		order, pos := make([]int64, n), make([]int64, n)
		for i, u := range users {
			p := look(t, s, r, u, roomStart.Add(time.Millisecond))
			if !p.Joined || p.Position < 1 || p.Position > n || byRank[p.Position-1] != u {
				t.Fatalf("%s at %+v, the seed's order puts them at %d", u, p, slices.Index(byRank, u)+1)
			}
			order[i], pos[i] = int64(i+1), p.Position
		}
		// An api instance reads them all at once, in chunks: the same.
		all, err := s.Rooms.EarlyPositions(context.Background(), r, n)
		if err != nil || len(all) != n {
			t.Fatalf("early positions: %d, %v", len(all), err)
		}
		for i, u := range users {
			if all[u] != pos[i] {
				t.Fatalf("%s: position %d read alone, %d read with the others", u, pos[i], all[u])
			}
		}
		if rho := spearman(order, pos); rho > 0.1 || rho < -0.1 {
			t.Fatalf("Spearman rho of join order and position %.3f, want |rho| < 0.1", rho)
		}
		t.Logf("Spearman rho of join order and position over %d early joiners: %.4f", n, spearman(order, pos))

		// Later joiners, one after the other, in arrival order; a join
		// whose clock is behind still queues behind the early ones.
		for i := range 50 {
			at := roomStart.Add(time.Duration(i) * time.Millisecond)
			if i == 7 {
				at = roomStart.Add(-3 * time.Second)
			}
			u := fmt.Sprintf("late-%d", i)
			if p := join(t, s, r, seed, u, at); p.Position != int64(n+i+1) {
				t.Fatalf("late joiner %d at %+v, want position %d", i, p, n+i+1)
			}
			if p := join(t, s, r, seed, u, at.Add(time.Second)); p.Position != int64(n+i+1) {
				t.Fatalf("late joiner %d joining again: %+v", i, p)
			}
		}
		// 300 late joiners at once, beside 300 early joiners joining again:
		// joins that arrive together share a run of the script, each as if
		// alone. The late ones take the next 300 positions, each its own;
		// the early ones keep theirs.
		var mu sync.Mutex
		taken := map[int64]string{}
		var wg sync.WaitGroup
		for i := range 300 {
			u := fmt.Sprintf("crowd-%d", i)
			wg.Go(func() {
				p := join(t, s, r, seed, u, roomStart.Add(time.Second))
				mu.Lock()
				defer mu.Unlock()
				if !p.Added || p.Position <= n+50 || p.Position > n+350 || taken[p.Position] != "" {
					t.Errorf("%s joined at %+v; position taken by %q", u, p, taken[p.Position])
				}
				taken[p.Position] = u
			})
			wg.Go(func() {
				if p := join(t, s, r, seed, users[i], roomStart.Add(time.Second)); p.Added || p.Position != pos[i] {
					t.Errorf("%s joining again in a crowd: %+v, want position %d", users[i], p, pos[i])
				}
			})
		}
		wg.Wait()
		if len(taken) != 300 {
			t.Fatalf("300 late joiners took %d positions", len(taken))
		}
		if p := look(t, s, r, "stranger", roomStart); p.Joined || p.Count != n+350 {
			t.Fatalf("a look added the buyer, or miscounted the room: %+v, want a count of %d", p, n+350)
		}
		if st := advance(t, s, r, roomStart.Add(time.Second)); st.Joined != n+350 {
			t.Fatalf("the advance counts %d in the room, the look %d", st.Joined, n+350)
		}
	})
}

// joinEarly joins users buyer-0..n-1 before the start and returns them in
// position order.
func joinEarly(t *testing.T, s *stockredis.Store, r room.Room, n int) []string {
	t.Helper()
	seed := room.NewSeed()
	for i := range n {
		join(t, s, r, seed, "buyer-"+strconv.Itoa(i), roomStart.Add(-time.Minute))
	}
	byPos := make([]string, n)
	for i := range n {
		u := "buyer-" + strconv.Itoa(i)
		byPos[look(t, s, r, u, roomStart).Position-1] = u
	}
	return byPos
}

// The room admits in position order, at the rate, and never holds more
// units than are left: units that come back and admissions that expire
// unused let the next positions in.
func TestRoomAdmitsWhatTheStockAllows(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, _ bool) {
		r := newRoom(4, 2) // 4 a second, up to 2 units an admission
		buildRoom(t, s, r, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		byPos := joinEarly(t, s, r, 30)
		if st := advance(t, s, r, roomStart.Add(5*time.Second)); st.Left != -1 || st.Admitted != 0 {
			t.Fatalf("before the warm-up: %+v, want nobody admitted and left -1", st)
		}
		warmSizes(t, s, 3, 0, 4) // 7 units
		at := roomStart.Add(10 * time.Second)
		st := advance(t, s, r, at)
		// One second's burst: 4 admissions holding 2+2+2+1 units.
		if st.Admitted != 4 || st.Next != 4 || st.Held != 7 || st.Left != 7 || st.Joined != 30 {
			t.Fatalf("first advance: %+v, want 4 admitted holding the 7 units left", st)
		}
		grants := []int{2, 2, 2, 1}
		for i, u := range byPos[:4] {
			p := look(t, s, r, u, at)
			if p.Grant != grants[i] || !p.Admission.Equal(at.Add(2*time.Minute)) {
				t.Fatalf("position %d: %+v, want a grant of %d until %s", i+1, p, grants[i], at.Add(2*time.Minute))
			}
		}
		if p := look(t, s, r, byPos[4], at); !p.Admission.IsZero() {
			t.Fatalf("position 5 admitted with no unit left unheld: %+v", p)
		}
		// The same time again, and later while every unit is held: nobody.
		for _, later := range []time.Duration{0, 5 * time.Second} {
			if st := advance(t, s, r, at.Add(later)); st.Admitted != 0 || st.Held != 7 {
				t.Fatalf("advance %s later: %+v, want nobody more", later, st)
			}
		}
		// Three units come back (a restock, a closed order): the next two
		// positions, within the rate.
		if err := rdb.IncrBy(context.Background(), s.Keys(sizes[1]).Stock(), 3).Err(); err != nil {
			t.Fatal(err)
		}
		st = advance(t, s, r, at.Add(6*time.Second))
		if st.Admitted != 2 || st.Next != 6 || st.Held != 10 || st.Left != 10 {
			t.Fatalf("after 3 units came back: %+v, want positions 5 and 6 holding 2+1", st)
		}
		// Every admission expires unused: the 10 units go to positions 7-11,
		// the rate's 4 a second first.
		st = advance(t, s, r, at.Add(2*time.Minute+6*time.Second))
		if st.Admitted != 4 || st.Next != 10 || st.Held != 8 {
			t.Fatalf("after the admissions expired: %+v, want 4 admitted holding 8", st)
		}
		if p := look(t, s, r, byPos[0], at.Add(2*time.Minute+6*time.Second)); !p.Admission.IsZero() || p.Used {
			t.Fatalf("an expired admission is still there: %+v", p)
		}
		st = advance(t, s, r, at.Add(2*time.Minute+7*time.Second))
		if st.Admitted != 1 || st.Next != 11 || st.Held != 10 {
			t.Fatalf("a second later: %+v, want position 11 holding the last 2", st)
		}
		// Sold out: no unit left; the room says so.
		for _, it := range sizes {
			if err := rdb.Set(context.Background(), s.Keys(it).Stock(), 0, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if st := advance(t, s, r, at.Add(3*time.Minute)); !st.SoldOut() || st.Admitted != 0 {
			t.Fatalf("with no unit left: %+v, want sold out", st)
		}
	})
}

// A room's scripts with their answers lost: a join run again returns the
// one place it made; an advance run again admits nobody twice.
func TestRoomLostAnswers(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		r := newRoom(100, 1)
		r.Items = []reservation.Item{reservation.One(item)}
		buildRoom(t, l.direct, r, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		seed := room.NewSeed()
		l.LoseNext("room_join")
		p, err := l.via.Rooms.JoinRoom(context.Background(), r, "u1", room.Rank(seed, "u1"), "", roomStart.Add(time.Second))
		if err != nil || p.Position != 1 || l.Lost() != 1 {
			t.Fatalf("join with its answer lost: %+v, %v (lost %d), want position 1 from the run again", p, err, l.Lost())
		}
		join(t, l.direct, r, seed, "u2", roomStart.Add(2*time.Second))
		warm(t, l.direct, 5, 1)
		l.LoseNext("room_advance")
		_, err = l.via.Rooms.AdvanceRoom(context.Background(), r, roomStart.Add(3*time.Second), room.State{})
		if !stockredis.MayHaveRun(err) {
			t.Fatalf("advance with its answer lost: %v, want an unknown outcome", err)
		}
		st := advance(t, l.direct, r, roomStart.Add(3*time.Second))
		if st.Admitted != 0 || st.Next != 2 || st.Held != 2 || st.Joined != 2 {
			t.Fatalf("the advance run again: %+v, want both admitted once by the lost run", st)
		}
		// An order whose answer is lost used the admission once: its retry
		// with the same key finds it.
		o := res(0, "k1", 1)
		o.UserID, o.At, o.Selling = "u1", roomStart.Add(4*time.Second), activity.SellsInRoom
		l.LoseNext("reserve")
		if _, err := l.via.Reservations.Reserve(context.Background(), o); !stockredis.MayHaveRun(err) {
			t.Fatalf("reserve with its answer lost: %v", err)
		}
		again := o
		again.OrderNo = gen.Next(item)
		if got, err := l.via.Reservations.Reserve(context.Background(), again); err != nil || !got.Duplicate || got.OrderNo != o.OrderNo {
			t.Fatalf("the retry: %+v, %v, want the lost run's order %s", got, err, o.OrderNo)
		}
		if st := advance(t, l.direct, r, roomStart.Add(4*time.Second)); st.Held != 1 || st.Left != 4 {
			t.Fatalf("after the order: %+v, want 1 unit held (u2's) of 4 left", st)
		}
		// The api's 503 release, its answer lost: run again, it finds the
		// reservation released and gives the admission back only once.
		free := reservation.ReleaseOptions{Reason: "PUBLISH_FAILED", From: []reservation.State{reservation.StateReserved}, FreeKey: true}
		l.LoseNext("release")
		if _, err := l.via.Reservations.Release(context.Background(), ref(o), free); !stockredis.MayHaveRun(err) {
			t.Fatalf("release with its answer lost: %v", err)
		}
		if rel, err := l.via.Reservations.Release(context.Background(), ref(o), free); err != nil || !rel.Gone() || rel.Released {
			t.Fatalf("the release run again: %+v, %v, want it found released", rel, err)
		}
		if st := advance(t, l.direct, r, roomStart.Add(4*time.Second)); st.Held != 2 || st.Left != 5 {
			t.Fatalf("after the release: %+v, want u1's admission back once: 2 held of 5 left", st)
		}

		// The early joiners' read, its answer lost: a read, so the client
		// may send it again on its own; either way it gives them all.
		early := r
		early.ActivityID = 8
		buildRoom(t, l.direct, early, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		for _, u := range []string{"e1", "e2", "e3"} {
			join(t, l.direct, early, seed, u, roomStart.Add(-time.Minute))
		}
		look(t, l.direct, early, "e1", roomStart) // freezes the room
		for _, x := range l.Proxies {
			x.LoseReply(proxytest.RedisCommand("ZRANGE"), 1)
		}
		lost := l.Lost()
		all, err := l.via.Rooms.EarlyPositions(context.Background(), early, 3)
		if err != nil && stockredis.MayHaveRun(err) {
			all, err = l.via.Rooms.EarlyPositions(context.Background(), early, 3)
		}
		if err != nil || len(all) != 3 || l.Lost() != lost+1 {
			t.Fatalf("early positions with an answer lost (%d lost): %v, %v", l.Lost()-lost, all, err)
		}
	})
}

// roomRes is an order of user for size it at at, in the room's sale.
func roomRes(it reservation.Item, user, key string, qty int, at time.Time) reservation.Reservation {
	r := sizedRes(it, 0, key, qty)
	r.UserID, r.At, r.Selling = user, at, activity.SellsInRoom
	return r
}

// An order in a sale with a room needs an unused admission granting its
// quantity, and uses it up; a retry with the same key finds its order; a
// release the api's 503 asks for gives the admission back.
func TestRoomOrdersUseAdmissions(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, _ redis.UniversalClient, _ bool) {
		ctx := context.Background()
		r := newRoom(100, 2)
		buildRoom(t, s, r, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		byPos := joinEarly(t, s, r, 10)
		warmSizes(t, s, 3, 0, 4)
		at := roomStart.Add(time.Second)
		if st := advance(t, s, r, at); st.Next != 4 || st.Held != 7 {
			t.Fatalf("advance: %+v, want 4 admitted holding 7", st)
		}
		refused := func(what string, rr reservation.Reservation, code error) {
			t.Helper()
			if _, err := s.Reservations.Reserve(ctx, rr); !errors.Is(err, code) {
				t.Fatalf("%s: %v, want %v", what, err, code)
			}
		}
		refused("a waiter", roomRes(sizes[0], byPos[4], "k", 1, at), order.ErrNotAdmitted)
		refused("a stranger", roomRes(sizes[0], "stranger", "k", 1, at), order.ErrNotAdmitted)
		refused("above the grant", roomRes(sizes[0], byPos[0], "k", 3, at), order.ErrInvalidArgument)
		refused("at the admission's expiry", roomRes(sizes[2], byPos[3], "k", 1, at.Add(2*time.Minute)), order.ErrNotAdmitted)
		if got := sizeStock(t, s, sizes[0]); got.Stock != 3 || got.Inflight != 0 {
			t.Fatalf("refusals reserved something: %+v", got)
		}

		first := roomRes(sizes[0], byPos[0], "k1", 2, at)
		got, err := s.Reservations.Reserve(ctx, first)
		if err != nil || got.Left != 1 {
			t.Fatalf("admitted order: %+v, %v", got, err)
		}
		if p := look(t, s, r, byPos[0], at); !p.Admission.IsZero() || !p.Used || !p.UsedExpires.Equal(at.Add(2*time.Minute)) {
			t.Fatalf("after the order: %+v, want the admission used", p)
		}
		again := first
		again.OrderNo = gen.Next(item)
		if dup, err := s.Reservations.Reserve(ctx, again); err != nil || !dup.Duplicate || dup.OrderNo != first.OrderNo {
			t.Fatalf("retry with the same key: %+v, %v, want the first order", dup, err)
		}
		refused("another key", roomRes(sizes[2], byPos[0], "k2", 1, at), order.ErrAlreadyPurchased)
		if st := advance(t, s, r, at); st.Held != 5 || st.Left != 5 || st.Admitted != 0 {
			t.Fatalf("after one order: %+v, want 5 held of 5 left", st)
		}

		// The api answered 503 and releases: the buyer's retry is admitted.
		rel, err := s.Reservations.Release(ctx, ref(first), reservation.ReleaseOptions{Reason: "PUBLISH_FAILED", From: []reservation.State{reservation.StateReserved}, FreeKey: true})
		if err != nil || !rel.Released {
			t.Fatalf("release: %+v, %v", rel, err)
		}
		if st := advance(t, s, r, at); st.Held != 7 || st.Left != 7 {
			t.Fatalf("after the release: %+v, want 7 held of 7 left", st)
		}
		retry := first
		retry.OrderNo = gen.Next(item)
		if got, err := s.Reservations.Reserve(ctx, retry); err != nil || got.Duplicate {
			t.Fatalf("the retry after a 503: %+v, %v, want a new reservation", got, err)
		}
	})
}

// Buyers order as soon as they are admitted, on every size, while units
// come back and the room advances: the units the admissions hold never
// exceed the units left, and every order that got stock held an admission.
func TestRoomNeverHoldsMoreThanIsLeft(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, _ redis.UniversalClient, _ bool) {
		ctx := context.Background()
		r := newRoom(400, 2)
		buildRoom(t, s, r, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		byPos := joinEarly(t, s, r, 300)
		warmSizes(t, s, 20, 15, 25)
		admitted := map[string]bool{}
		var mu sync.Mutex
		var orders []reservation.Reservation
		var wg sync.WaitGroup
		buy := func(u string, at time.Time) {
			// Up to 2 units, as many as the admission grants, of the first
			// size with stock; else 1 of the first size with one.
			for _, qty := range []int{min(1+len(u)%2, look(t, s, r, u, at).Grant), 1} {
				for _, it := range sizes {
					rr := roomRes(it, u, "k-"+u, qty, at)
					_, err := s.Reservations.Reserve(ctx, rr)
					if err == nil {
						mu.Lock()
						orders = append(orders, rr)
						mu.Unlock()
						return
					}
					if !errors.Is(err, order.ErrSoldOut) {
						t.Errorf("%s: %v", u, err)
						return
					}
				}
			}
		}
		var st room.State
		for tick := range 60 {
			at := roomStart.Add(time.Duration(tick*50) * time.Millisecond)
			st = advance(t, s, r, at)
			if st.Held > st.Left {
				t.Fatalf("tick %d: %d units held, %d left", tick, st.Held, st.Left)
			}
			for _, u := range byPos[:st.Next] {
				if !admitted[u] {
					admitted[u] = true
					wg.Go(func() { buy(u, at) })
				}
			}
			if tick%10 == 9 && tick < 40 {
				wg.Wait()
				// A closed unpaid order: its units go to the next in line.
				o := orders[0]
				orders = orders[1:]
				if _, err := s.Reservations.Release(ctx, ref(o), reservation.ReleaseOptions{Reason: "UNPAID", From: []reservation.State{reservation.StateReserved}}); err != nil {
					t.Fatal(err)
				}
			}
			if tick > 40 {
				wg.Wait()
			}
		}
		st = advance(t, s, r, roomStart.Add(time.Minute))
		var units int64
		for _, o := range orders {
			units += int64(o.Quantity)
		}
		if st.Left != 0 || st.Held != 0 || units != 60 {
			t.Fatalf("at the end: %+v with %d units in %d orders, want the 60 units sold and nothing held", st, units, len(orders))
		}
		t.Logf("%d admitted, %d orders hold the 60 units", len(admitted), len(orders))
	})
}

// A room without its generation answers room.ErrLost to a join, a look and
// an advance and writes nothing; a build gives back its joiners (early by
// rank, late in order, positions after the admitted ones) under the
// generation it names, and a build that stalled while a later one began
// writes nothing over it.
func TestRoomBuild(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, _ redis.UniversalClient, _ bool) {
		ctx := context.Background()
		r, seed := newRoom(100, 1), room.NewSeed()
		at := roomStart.Add(time.Second)
		if _, err := s.Rooms.JoinRoom(ctx, r, "x", room.Rank(seed, "x"), "", at); !errors.Is(err, room.ErrLost) {
			t.Fatalf("join of a room never built: %v, want room.ErrLost", err)
		}
		if _, err := s.Rooms.AdvanceRoom(ctx, r, at, room.State{}); !errors.Is(err, room.ErrLost) {
			t.Fatalf("advance of a room never built: %v, want room.ErrLost", err)
		}
		if _, ok, err := s.Rooms.RoomGen(ctx, r); ok || err != nil {
			t.Fatalf("generation of a room never built: %v %v", ok, err)
		}
		early := []room.RankedJoin{{UserID: "e1", Rank: room.Rank(seed, "e1")}, {UserID: "e2", Rank: room.Rank(seed, "e2")}}
		slices.SortFunc(early, func(a, b room.RankedJoin) int { return cmp.Compare(a.Rank, b.Rank) })
		img := room.Image{Gen: 3, Early: early, Late: []string{"l1", "l2"}, Frozen: true, Next: 1}
		// A stalled build: a later one began, so its writes go nowhere.
		if err := s.Rooms.BeginRoomBuild(ctx, r, "old", time.Minute); err != nil {
			t.Fatal(err)
		}
		buildRoom(t, s, r, img, at)
		if err := s.Rooms.FinishRoomBuild(ctx, r, "old", room.Image{Gen: 9, Late: []string{"intruder"}}, at); !errors.Is(err, room.ErrLost) {
			t.Fatalf("the stalled build's finish: %v, want room.ErrLost", err)
		}
		if g, ok, err := s.Rooms.RoomGen(ctx, r); g != 3 || !ok || err != nil {
			t.Fatalf("generation %d %v %v, want 3", g, ok, err)
		}
		want := map[string]int64{early[0].UserID: 1, early[1].UserID: 2, "l1": 3, "l2": 4}
		for u, pos := range want {
			if p := look(t, s, r, u, at); !p.Joined || p.Position != pos || p.Gen != 3 || p.Added {
				t.Fatalf("%s after the build: %+v, want position %d of generation 3", u, p, pos)
			}
		}
		if p := look(t, s, r, "intruder", at); p.Joined {
			t.Fatalf("the stalled build wrote %+v", p)
		}
		if p := join(t, s, r, seed, "new", at); p.Position != 5 || !p.Added || p.Early != 2 {
			t.Fatalf("a join after the build: %+v, want position 5, added", p)
		}
		warmSizes(t, s, 3, 0, 4)
		if st := advance(t, s, r, at.Add(2*time.Second)); st.Gen != 3 || st.Next < 2 || st.Joined != 5 {
			t.Fatalf("advance after the build: %+v, want admissions from position 2", st)
		}
	})
}

// A build's steps with their answers lost: each is sent again and the
// room ends as one build writes it; a commit sent again after it ran (as
// the client may resend it on its own) finds its work done instead of
// calling the build stale.
func TestRoomBuildLostAnswers(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		ctx := context.Background()
		r := newRoom(100, 1)
		r.Items = []reservation.Item{reservation.One(item)}
		img := room.Image{Gen: 2, Late: []string{"l1", "l2"}, Frozen: true,
			Early: []room.RankedJoin{{UserID: "e1", Rank: 1}, {UserID: "e2", Rank: 2}}}
		at := roomStart.Add(time.Second)
		l.LoseNext("room_build")
		if err := l.via.Rooms.BeginRoomBuild(ctx, r, "b", time.Minute); !stockredis.MayHaveRun(err) {
			t.Fatalf("begin with its answer lost: %v, want an unknown outcome", err)
		}
		if err := l.via.Rooms.BeginRoomBuild(ctx, r, "b", time.Minute); err != nil {
			t.Fatal(err)
		}
		l.LoseNext("room_build") // the add of e1 and e2
		if err := l.via.Rooms.FinishRoomBuild(ctx, r, "b", img, at); !stockredis.MayHaveRun(err) {
			t.Fatalf("finish with its add's answer lost: %v, want an unknown outcome", err)
		}
		if err := l.via.Rooms.FinishRoomBuild(ctx, r, "b", img, at); err != nil {
			t.Fatalf("the finish sent again: %v", err)
		}
		// The commit alone (no member to add) sent once more.
		again := img
		again.Late, again.Early = nil, nil
		if err := l.via.Rooms.FinishRoomBuild(ctx, r, "b", again, at); err != nil {
			t.Fatalf("the commit sent again: %v, want its work found done", err)
		}
		if g, ok, err := l.direct.Rooms.RoomGen(ctx, r); g != 2 || !ok || err != nil {
			t.Fatalf("generation %d %v %v, want 2", g, ok, err)
		}
		for u, pos := range map[string]int64{"e1": 1, "e2": 2, "l1": 3, "l2": 4} {
			if p := look(t, l.direct, r, u, at); p.Position != pos {
				t.Fatalf("%s: %+v, want position %d", u, p, pos)
			}
		}
		// The add sent again logged no early joiner twice.
		if m, err := l.direct.Rooms.RoomMembers(ctx, r, 0, 0, 10); err != nil || !slices.Equal(m.Early, []string{"e1", "e2"}) {
			t.Fatalf("the room's members: %+v %v, want e1 and e2 once each", m, err)
		}
	})
}

// An advance given the state an earlier one answered refuses a room older
// than it, of that generation or an earlier one (Redis brought back from
// an older copy): it admits nobody and answers room.ErrRewound. The same
// room moved on, or a newer generation, advances.
func TestRoomAdvanceRefusesAnOlderCopy(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, _ bool) {
		ctx := context.Background()
		r, seed := newRoom(1, 1), room.NewSeed()
		buildRoom(t, s, r, room.Image{Gen: 2, Frozen: true}, roomStart)
		warmSizes(t, s, 3, 0, 4)
		for _, u := range []string{"a", "b", "c"} {
			join(t, s, r, seed, u, roomStart.Add(time.Second))
		}
		first := advance(t, s, r, roomStart.Add(2*time.Second))
		tick := s.Keys(r.Items[0]).Room(r.ActivityID, "tick")
		older, err := rdb.Dump(ctx, tick).Result()
		if err != nil {
			t.Fatal(err)
		}
		second, err := s.Rooms.AdvanceRoom(ctx, r, roomStart.Add(4*time.Second), first)
		if err != nil || second.At <= first.At {
			t.Fatalf("an advance of the room as it moved on: %+v %v, want a later clock than %d", second, err, first.At)
		}
		// The rate's clock brought back to the first advance's.
		if err := rdb.RestoreReplace(ctx, tick, 0, older).Err(); err != nil {
			t.Fatal(err)
		}
		next := second.Next
		if _, err := s.Rooms.AdvanceRoom(ctx, r, roomStart.Add(6*time.Second), second); !errors.Is(err, room.ErrRewound) {
			t.Fatalf("an advance of the older copy: %v, want room.ErrRewound", err)
		}
		if st := advance(t, s, r, roomStart.Add(6*time.Second)); st.Next != next+1 {
			t.Fatalf("after the refused advance: next %d, want %d (the refused one admitted nobody)", st.Next, next+1)
		}
		newer := second
		newer.Gen = 3
		if _, err := s.Rooms.AdvanceRoom(ctx, r, roomStart.Add(7*time.Second), newer); !errors.Is(err, room.ErrRewound) {
			t.Fatalf("an advance of generation 2 after one of 3 was seen: %v, want room.ErrRewound", err)
		}
	})
}

// RoomMembers reads who joined since the last read, early joiners from
// their log and late ones by sequence number, in chunks, and a rebuilt
// room's members with its new generation; a room without a generation
// reads nothing.
func TestRoomMembers(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, _ redis.UniversalClient, _ bool) {
		ctx := context.Background()
		r, seed := newRoom(100, 1), room.NewSeed()
		if m, err := s.Rooms.RoomMembers(ctx, r, 0, 0, 10); err != nil || m.Gen != 0 || len(m.Early)+len(m.Late) != 0 {
			t.Fatalf("a room never built: %+v %v, want nothing", m, err)
		}
		buildRoom(t, s, r, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		var early, late []string
		for i := range 5 {
			u := "early-" + strconv.Itoa(i)
			join(t, s, r, seed, u, roomStart.Add(-time.Second))
			early = append(early, u)
		}
		join(t, s, r, seed, early[2], roomStart.Add(-time.Second)) // again: the same place, logged once
		for i := range 4 {
			u := "late-" + strconv.Itoa(i)
			join(t, s, r, seed, u, roomStart.Add(time.Second))
			late = append(late, u)
		}
		// In chunks of 3: what the first read left, the second reads.
		m, err := s.Rooms.RoomMembers(ctx, r, 0, 0, 3)
		if err != nil || m.Gen != 1 || !slices.Equal(m.Early, early[:3]) || !slices.Equal(m.Late, late[:3]) || m.LastSeq != 3 || m.AtEnd {
			t.Fatalf("first read: %+v %v, want %v and %v up to sequence 3, not at the end", m, err, early[:3], late[:3])
		}
		m, err = s.Rooms.RoomMembers(ctx, r, 3, m.LastSeq, 3)
		if err != nil || !slices.Equal(m.Early, early[3:]) || !slices.Equal(m.Late, late[3:]) || m.LastSeq != 4 || !m.AtEnd {
			t.Fatalf("second read: %+v %v, want %v and %v, at the end", m, err, early[3:], late[3:])
		}

		// Rebuilt (generation 2): every member once, the early ones in the
		// image's order.
		img := room.Image{Gen: 2, Frozen: true, Late: late}
		for _, u := range early {
			img.Early = append(img.Early, room.RankedJoin{UserID: u, Rank: room.Rank(seed, u)})
		}
		if err := s.Rooms.BeginRoomBuild(ctx, r, "t2", time.Minute); err != nil {
			t.Fatal(err)
		}
		if m, err := s.Rooms.RoomMembers(ctx, r, 0, 0, 10); err != nil || m.Gen != 0 || len(m.Early)+len(m.Late) != 0 {
			t.Fatalf("during a build: %+v %v, want nothing", m, err)
		}
		if err := s.Rooms.FinishRoomBuild(ctx, r, "t2", img, roomStart.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		m, err = s.Rooms.RoomMembers(ctx, r, 0, 0, 100)
		if err != nil || m.Gen != 2 || !slices.Equal(m.Early, early) || !slices.Equal(m.Late, late) || !m.AtEnd {
			t.Fatalf("after the rebuild: %+v %v, want generation 2, %v and %v", m, err, early, late)
		}
	})
}
