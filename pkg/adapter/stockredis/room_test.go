package stockredis_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/room"
)

var roomStart = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// newRoom is a room over the three sizes, starting at roomStart.
func newRoom(admit, grantMax int) stockredis.Room {
	return stockredis.Room{ActivityID: 9, Items: sizes, StartsAt: roomStart, GrantMax: grantMax,
		Settings: room.Settings{AdmitPerSecond: admit, AdmissionTTL: 2 * time.Minute}, KeysUntil: roomStart.Add(time.Hour)}
}

func join(t *testing.T, s *stockredis.Store, r stockredis.Room, seed room.Seed, user string, at time.Time) stockredis.Place {
	t.Helper()
	p, err := s.JoinRoom(context.Background(), r, user, room.Rank(seed, user), at)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func look(t *testing.T, s *stockredis.Store, r stockredis.Room, user string, at time.Time) stockredis.Place {
	t.Helper()
	p, err := s.LookRoom(context.Background(), r, user, at)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func advance(t *testing.T, s *stockredis.Store, r stockredis.Room, at time.Time) stockredis.RoomState {
	t.Helper()
	st, err := s.AdvanceRoom(context.Background(), r, at)
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
		if p := look(t, s, r, "stranger", roomStart); p.Joined {
			t.Fatalf("a look added the buyer: %+v", p)
		}
	})
}

// joinEarly joins users buyer-0..n-1 before the start and returns them in
// position order.
func joinEarly(t *testing.T, s *stockredis.Store, r stockredis.Room, n int) []string {
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
		r.Items = []stockredis.Item{stockredis.One(item)}
		seed := room.NewSeed()
		l.LoseNext("room_join")
		p, err := l.via.JoinRoom(context.Background(), r, "u1", room.Rank(seed, "u1"), roomStart.Add(time.Second))
		if err != nil || p.Position != 1 || l.Lost() != 1 {
			t.Fatalf("join with its answer lost: %+v, %v (lost %d), want position 1 from the run again", p, err, l.Lost())
		}
		join(t, l.direct, r, seed, "u2", roomStart.Add(2*time.Second))
		warm(t, l.direct, 5, 1)
		l.LoseNext("room_advance")
		_, err = l.via.AdvanceRoom(context.Background(), r, roomStart.Add(3*time.Second))
		if !stockredis.MayHaveRun(err) {
			t.Fatalf("advance with its answer lost: %v, want an unknown outcome", err)
		}
		st := advance(t, l.direct, r, roomStart.Add(3*time.Second))
		if st.Admitted != 0 || st.Next != 2 || st.Held != 2 || st.Joined != 2 {
			t.Fatalf("the advance run again: %+v, want both admitted once by the lost run", st)
		}
	})
}
