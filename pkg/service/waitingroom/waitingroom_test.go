package waitingroom_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/service/waitingroom"
)

// clock is a settable time for the room's now.
type clock struct{ ms atomic.Int64 }

func (c *clock) Now() time.Time      { return time.UnixMilli(c.ms.Load()).UTC() }
func (c *clock) Set(t time.Time)     { c.ms.Store(t.UnixMilli()) }
func (c *clock) Add(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// roomSale makes a sale with a waiting room starting at start, with stock
// units of one item, warmed up.
func roomSale(t *testing.T, p *pipelinetest.Pipeline, stock int64, start time.Time) activity.Activity {
	t.Helper()
	return roomSaleTB(t, p, stock, start)
}

func roomSaleTB(t testing.TB, p *pipelinetest.Pipeline, stock int64, start time.Time) activity.Activity {
	t.Helper()
	ctx := context.Background()
	it, err := p.DB.Activities.CreateItem(ctx, "test item", stock)
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.DB.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: start, EndsAt: start.Add(time.Hour), PerUserLimit: 1,
		Room: activity.WaitingRoom{AdmitPerSecond: 1, AdmissionTTL: time.Minute, Seed: room.NewSeed(), Key: room.NewSeed()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Store.Stock.WarmupFrom(ctx, reservation.One(it.ID), 1, 2*time.Hour, p.DB.Restocks); err != nil {
		t.Fatal(err)
	}
	a, err = p.DB.Activities.Activity(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// joinAll joins users at once and fails the test on any error.
func joinAll(t *testing.T, svc *waitingroom.Service, r room.Room, seed room.Seed, users []string, now time.Time) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(users))
	for i, u := range users {
		wg.Go(func() { _, errs[i] = svc.Join(context.Background(), r, u, room.Rank(seed, u), "", now) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// order is every joiner's position, by position.
func lineOf(t *testing.T, svc *waitingroom.Service, r room.Room, users []string, now time.Time) []string {
	t.Helper()
	byPos := map[int64]string{}
	for _, u := range users {
		p, err := svc.Look(context.Background(), r, u, now)
		if err != nil || !p.Joined || p.Position == 0 {
			t.Fatalf("look %s: %+v %v", u, p, err)
		}
		if o, dup := byPos[p.Position]; dup {
			t.Fatalf("%s and %s both at position %d", o, u, p.Position)
		}
		byPos[p.Position] = u
	}
	line := make([]string, 0, len(users))
	for pos := int64(1); int64(len(line)) < int64(len(users)); pos++ {
		u, ok := byPos[pos]
		if !ok {
			t.Fatalf("no buyer at position %d of %d: %v", pos, len(users), byPos)
		}
		line = append(line, u)
	}
	return line
}

// sameLine fails the test unless the line after a rebuild is the line
// before it.
func sameLine(t *testing.T, before, after []string) {
	t.Helper()
	if !slices.Equal(before, after) {
		t.Fatalf("the line changed across the rebuild:\nbefore %v\nafter  %v", before, after)
	}
}

// retryJoin joins until the room answers (it is rebuilt meanwhile), for
// up to 15 s, and returns how long that took.
func retryJoin(t *testing.T, svc *waitingroom.Service, r room.Room, seed room.Seed, u string, now time.Time) (room.Place, time.Duration) {
	t.Helper()
	start := time.Now()
	var p room.Place
	var err error
	waittest.Until(t, 15*time.Second, "the room to answer "+u+"'s join", func() bool {
		p, err = svc.Join(context.Background(), r, u, room.Rank(seed, u), "", now)
		if err != nil && !errors.Is(err, order.ErrUnavailable) {
			t.Fatal(err)
		}
		return err == nil
	})
	return p, time.Since(start)
}

func users(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// 20 buyers join before the start and 10 after; then Redis loses the room
// (its keys deleted, as FLUSHALL or a restart from nothing would). The
// first join after the loss is refused while the room is rebuilt from
// MySQL, and answered within 10 s: behind all 30, who keep their order.
func TestRoomRebuiltAfterItsKeysAreLost(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	start := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	a := roomSale(t, p, 5, start)
	clk := &clock{}
	clk.Set(start.Add(-time.Minute))
	svc := waitingroom.New(p.Store.Rooms, p.DB.Rooms, slog.New(slog.DiscardHandler), clk.Now)
	r := waitingroom.StoreRoom(a, time.Minute)
	early, late := users("e", 20), users("l", 10)
	joinAll(t, svc, r, a.Room.Seed, early, clk.Now())
	clk.Set(start.Add(time.Second))
	joinAll(t, svc, r, a.Room.Seed, late, clk.Now())
	all := append(slices.Clone(early), late...)
	before := lineOf(t, svc, r, all, clk.Now())

	if n := p.DeleteRoomKeys(a.ID); n == 0 {
		t.Fatal("no key of the room to delete")
	}
	pl, took := retryJoin(t, svc, r, a.Room.Seed, "after", clk.Now())
	if took > 10*time.Second {
		t.Fatalf("the room answered %v after the loss, want within 10 s", took)
	}
	if pl.Position != 31 || pl.Gen != 2 {
		t.Fatalf("the join after the loss: %+v, want position 31 of generation 2", pl)
	}
	sameLine(t, before, lineOf(t, svc, r, all, clk.Now()))
	t.Logf("rebuilt in %v; 30 buyers in their order, the next joiner at 31", took.Round(time.Millisecond))
}

// Redis comes back from a copy of the room taken after 5 of 10 late
// joins: it keeps its generation, and hands out the sixth number again. That
// join is refused (MySQL holds the number for another buyer), the room is
// rebuilt, and the buyer's next join puts them behind all ten.
func TestRoomRebuiltWhenAnOlderCopyHandsOutANumberAgain(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	start := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	a := roomSale(t, p, 5, start)
	clk := &clock{}
	clk.Set(time.Now())
	svc := waitingroom.New(p.Store.Rooms, p.DB.Rooms, slog.New(slog.DiscardHandler), clk.Now)
	r := waitingroom.StoreRoom(a, time.Minute)
	first, second := users("a", 5), users("b", 5)
	for _, u := range first {
		joinAll(t, svc, r, a.Room.Seed, []string{u}, clk.Now())
	}
	snap := p.SnapshotRoom(a.ID)
	for _, u := range second {
		joinAll(t, svc, r, a.Room.Seed, []string{u}, clk.Now())
	}
	all := append(slices.Clone(first), second...)
	before := lineOf(t, svc, r, all, clk.Now())
	p.RewindRoom(a.ID, snap)

	if _, err := svc.Join(context.Background(), r, "late", room.Rank(a.Room.Seed, "late"), "", clk.Now()); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("a join the older copy numbered 6 again: %v, want unavailable while the room is rebuilt", err)
	}
	pl, took := retryJoin(t, svc, r, a.Room.Seed, "late", clk.Now())
	if pl.Position != 11 {
		t.Fatalf("the late buyer after the rebuild: %+v, want position 11", pl)
	}
	sameLine(t, before, lineOf(t, svc, r, all, clk.Now()))
	t.Logf("rebuilt in %v after the older copy's second number 6", took.Round(time.Millisecond))
}

// What a room of 100,000 joins costs to keep and to rebuild: 50,000 who
// joined before the start and 50,000 after, recorded as joins are (batches
// of 500), then rebuilt from MySQL after its keys are lost. It reports the
// rebuild's time without its wait for joins in flight (a room's first
// build skips it; every later one adds RecordDeadline + 0.5 s), and the
// room's size in Redis and its record's in MySQL. Run:
//
//	go test -run '^$' -bench RoomRebuild -benchtime 3x ./pkg/service/waitingroom/
func BenchmarkRoomRebuild100k(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	p := pipelinetest.New(b, pipelinetest.Options{Partitions: 1})
	start := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	a := roomSaleTB(b, p, 5, start)
	r := waitingroom.StoreRoom(a, time.Minute)
	joins := make([]room.Join, 0, 500)
	match := make([]room.JoinMatch, 500)
	for i := range n {
		j := room.Join{UserID: fmt.Sprintf("user-%06d", i), Gen: 1, JoinedAt: start}
		if i >= n/2 {
			j.Seq = int64(i - n/2 + 1)
		}
		joins = append(joins, j)
		if len(joins) == cap(joins) || i == n-1 {
			if _, err := p.DB.Rooms.RecordRoomJoins(ctx, a.ID, joins, match[:len(joins)]); err != nil {
				b.Fatal(err)
			}
			joins = joins[:0]
		}
	}
	svc := waitingroom.New(p.Store.Rooms, p.DB.Rooms, slog.New(slog.DiscardHandler), time.Now)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		p.DeleteRoomKeys(a.ID)
		b.StartTimer()
		// Generation 0 in MySQL: no wait for joins in flight.
		if err := p.DB.Gorm().Exec("UPDATE activity_rooms SET gen = 0 WHERE activity_id = ?", a.ID).Error; err != nil {
			b.Fatal(err)
		}
		if err := svc.Rebuild(ctx, r, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var redisBytes int64
	for _, k := range p.RoomKeys(a.ID) {
		redisBytes += p.Redis.MemoryUsage(ctx, k).Val()
	}
	b.ReportMetric(float64(redisBytes)/(1<<20), "redis-MiB")
	if err := p.DB.Gorm().Exec("ANALYZE TABLE room_joins").Error; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(p.Count("SELECT data_length + index_length FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'room_joins'"))/(1<<20), "mysql-MiB")
	if pl, err := svc.Look(ctx, r, "user-099999", time.Now()); err != nil || pl.Position != n {
		b.Fatalf("the last joiner after the rebuild: %+v %v, want position %d", pl, err, n)
	}
}
