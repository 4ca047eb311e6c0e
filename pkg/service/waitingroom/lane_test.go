package waitingroom_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/service/waitingroom"
)

// laneRoom is a code_priority room sale of stock units, started a minute
// ago, whose codes are loaded with n single-use codes "PRI-<i>"; the
// service runs on clk.
type laneRoom struct {
	p     *pipelinetest.Pipeline
	a     activity.Activity
	r     room.Room
	svc   *waitingroom.Service
	clk   *clock
	key   []byte
	codes string // the codes hash
}

func newLaneRoom(t *testing.T, stock int64, n int) *laneRoom {
	t.Helper()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	ctx := context.Background()
	start := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	a := roomSale(t, p, stock, start)
	a.Access = access.CodePriority
	if err := p.DB.Gorm().Exec("UPDATE activities SET access = 'code_priority' WHERE id = ?", a.ID).Error; err != nil {
		t.Fatal(err)
	}
	l := &laneRoom{p: p, a: a, clk: &clock{}, key: []byte("lane test key"), codes: p.Store.Keys(reservation.One(a.ItemID)).Codes(a.ID)}
	l.clk.Set(start.Add(time.Second))
	l.svc = waitingroom.New(p.Store.Rooms, p.DB.Rooms, slog.New(slog.DiscardHandler), l.clk.Now)
	l.svc.Codes, l.svc.CodeKey = p.Store.Stock.Codes(), l.key
	l.svc.PaymentWindow = time.Minute
	l.svc.HeldOrder = func(context.Context, activity.Activity, string) (string, error) { return "", nil }
	l.r = waitingroom.StoreRoom(a, time.Minute)
	for i := range n {
		d := l.digest(fmt.Sprintf("PRI-%d", i))
		if err := p.DB.Gorm().Exec("INSERT INTO sale_codes (activity_id, digest, uses, used, created_at) VALUES (?, ?, 1, 0, NOW(3))",
			a.ID, string(d)).Error; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Store.Stock.Codes().Load(ctx, a, p.DB.Codes); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *laneRoom) digest(code string) access.Digest {
	n, _ := access.Normalize(code)
	return access.Hash(l.key, l.a.ID, n)
}

// join queues user with code ("" for none) at the clock's now.
func (l *laneRoom) join(user, code string) (waitingroom.Standing, error) {
	return l.svc.Queue(context.Background(), l.a, user, true, func() (waitingroom.Work, error) {
		return waitingroom.Work{AccessCode: code}, nil
	})
}

// joinAll joins users[i] with codes[i] at once, failing on any error.
func (l *laneRoom) joinAll(t *testing.T, users []string, codes func(i int) string) {
	t.Helper()
	errs := make([]error, len(users))
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() { _, errs[i] = l.join(u, codes(i)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// tick moves the clock a second on and advances the room once.
func (l *laneRoom) tick(t *testing.T) room.State {
	t.Helper()
	l.clk.Add(time.Second)
	st, err := l.svc.Advance(context.Background(), l.r, l.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// admitted is who of users holds an unused admission now.
func (l *laneRoom) admitted(t *testing.T, users []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, u := range users {
		p, err := l.p.Store.Rooms.LookRoom(context.Background(), l.r, u, l.clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !p.Admission.IsZero() {
			out[u] = true
		}
	}
	return out
}

// left is the Redis count of code's uses left.
func (l *laneRoom) left(t *testing.T, code string) string {
	t.Helper()
	v, err := l.p.Redis.HGet(context.Background(), l.codes, string(l.digest(code))).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// byPosition is users in their order in the line.
func (l *laneRoom) byPosition(t *testing.T, users []string) []string {
	t.Helper()
	out := make([]string, len(users))
	for _, u := range users {
		p, err := l.p.Store.Rooms.LookRoom(context.Background(), l.r, u, l.clk.Now())
		if err != nil || p.Position < 1 || int(p.Position) > len(users) {
			t.Fatalf("%s: %+v, %v", u, p, err)
		}
		out[p.Position-1] = u
	}
	return out
}

// Buyers who join with a code after thirty buyers without one, three of
// whom the room already let in, are all admitted before any other
// buyer without one; each holder's code is used once by their place; a
// code with no use left, a wrong one, and a code given to a buyer already
// in the line change nothing. An admission that expires unused gives its
// code's use back.
func TestPriorityLaneAdmitsCodeHoldersFirst(t *testing.T) {
	t.Parallel()
	l := newLaneRoom(t, 100, 10)
	line, holders := users("line", 30), users("holder", 10)
	l.joinAll(t, line, func(int) string { return "" })
	for range 3 {
		l.tick(t)
	}
	if got := len(l.admitted(t, line)); got != 3 {
		t.Fatalf("%d of the line admitted after three seconds at 1/s, want 3", got)
	}
	l.joinAll(t, holders, func(i int) string { return fmt.Sprintf("pri-%d", i) }) // normalized: same codes
	if _, err := l.join("late-guest", "PRI-0"); !errors.Is(err, access.ErrCodeUsed) {
		t.Fatalf("a used code's join: %v, want ErrCodeUsed", err)
	}
	if _, err := l.join("late-guest", "NOT-A-CODE"); !errors.Is(err, access.ErrCodeInvalid) {
		t.Fatalf("a wrong code's join: %v, want ErrCodeInvalid", err)
	}
	if s, err := l.join(line[29], "PRI-1"); err != nil || s.Priority {
		t.Fatalf("a buyer of the line joining again with a code: %+v, %v; want their place in the line", s, err)
	}
	for i := range holders {
		if got := l.left(t, fmt.Sprintf("PRI-%d", i)); got != "0|" {
			t.Fatalf("code %d after its holder joined: %q, want no use left", i, got)
		}
	}
	s, err := l.join(holders[9], "PRI-9")
	if err != nil || !s.Priority || s.Ahead >= 10 {
		t.Fatalf("a holder's standing: %+v, %v; want in the priority lane, fewer than 10 ahead", s, err)
	}
	fourth := l.byPosition(t, line)[3]
	l.tick(t)
	if s, _ := l.join(fourth, ""); s.Ahead != 9 {
		t.Fatalf("the line's next buyer: %d ahead, want the 9 holders still waiting", s.Ahead)
	}
	for range 9 {
		l.tick(t)
	}
	if got := l.admitted(t, holders); len(got) != 10 {
		t.Fatalf("%d holders admitted after ten seconds, want all 10 before the line", len(got))
	}
	if got := len(l.admitted(t, line)); got != 3 {
		t.Fatalf("%d of the line admitted while holders waited, want still 3", got)
	}
	l.tick(t)
	if got := l.admitted(t, line); len(got) != 4 || !got[fourth] {
		t.Fatalf("the line after the lane: %v, want %s (the fourth in line) next", got, fourth)
	}
	// Past the admissions' lifetime: the holders' places give their uses
	// back.
	l.clk.Add(2 * time.Minute)
	l.tick(t)
	for i := range holders {
		if got := l.left(t, fmt.Sprintf("PRI-%d", i)); got != "1|" {
			t.Fatalf("code %d after its holder's admission expired: %q, want its use back", i, got)
		}
	}
}

// Five buyers join at once with one single-use code: one is in the lane,
// the others are refused with CODE_USED and not let in.
func TestASingleUseCodeGivesOneBuyerPriority(t *testing.T) {
	t.Parallel()
	l := newLaneRoom(t, 100, 1)
	users := users("u", 5)
	errs := make([]error, len(users))
	standings := make([]waitingroom.Standing, len(users))
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() { standings[i], errs[i] = l.join(u, "PRI-0") })
	}
	wg.Wait()
	in, used := 0, 0
	for i := range users {
		switch {
		case errs[i] == nil && standings[i].Priority:
			in++
		case errors.Is(errs[i], access.ErrCodeUsed):
			used++
		default:
			t.Fatalf("%s: %+v, %v", users[i], standings[i], errs[i])
		}
	}
	if in != 1 || used != 4 {
		t.Fatalf("%d in the lane, %d refused, want 1 and 4", in, used)
	}
	st := l.tick(t)
	if st.Lane != 1 || st.Joined != 1 {
		t.Fatalf("the room: %d in the lane, %d joined, want 1 and 1", st.Lane, st.Joined)
	}
}

// Redis loses the room and the codes: the rebuild from MySQL has the lane
// again (the holders not yet admitted go before the line), and the codes
// loaded again count the uses the holders' places hold.
func TestPriorityLaneRebuiltAfterRedisLoss(t *testing.T) {
	t.Parallel()
	l := newLaneRoom(t, 100, 4)
	line, holders := users("line", 10), users("holder", 4)
	l.joinAll(t, line, func(int) string { return "" })
	l.joinAll(t, holders, func(i int) string { return fmt.Sprintf("PRI-%d", i) })
	l.tick(t)
	if got := l.admitted(t, holders); len(got) != 1 {
		t.Fatalf("%d holders admitted after a second, want 1", len(got))
	}
	ctx := context.Background()
	if n := l.p.DeleteRoomKeys(l.a.ID); n == 0 {
		t.Fatal("no key of the room to delete")
	}
	if err := l.p.Redis.Del(ctx, l.codes).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.svc.Rebuild(ctx, l.r, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.p.Store.Stock.Codes().Load(ctx, l.a, l.p.DB.Codes); err != nil {
		t.Fatal(err)
	}
	for i := range holders {
		if got := l.left(t, fmt.Sprintf("PRI-%d", i)); got != "0|" {
			t.Fatalf("code %d after the reload: %q, want its use held by its place", i, got)
		}
	}
	// Admissions start again from the lane (none of its buyers ordered).
	for range 4 {
		l.tick(t)
	}
	if got := l.admitted(t, holders); len(got) != 4 {
		t.Fatalf("%d holders admitted after the rebuild, want all 4 first", len(got))
	}
	if got := l.admitted(t, line); len(got) != 0 {
		t.Fatalf("the line admitted before the lane: %v", got)
	}
	if s, err := l.join(holders[3], ""); err != nil || (s.State != waitingroom.Admitted) {
		t.Fatalf("a holder after the rebuild: %+v, %v; want admitted", s, err)
	}
}
