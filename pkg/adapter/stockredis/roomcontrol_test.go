package stockredis_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/domain/room"
)

func control(t *testing.T, s *stockredis.Store, r room.Room, c room.Control, at time.Time) {
	t.Helper()
	if err := s.Rooms.ControlRoom(context.Background(), r, c, at); err != nil {
		t.Fatal(err)
	}
}

// admittedInOrder checks that positions from..to-1 of byPos hold an
// admission and position to does not.
func admittedInOrder(t *testing.T, s *stockredis.Store, r room.Room, byPos []string, to int, at time.Time) {
	t.Helper()
	for i, u := range byPos[:to+1] {
		if p := look(t, s, r, u, at); p.Admission.IsZero() != (i == to) {
			t.Fatalf("position %d (%s): %+v; want the first %d positions admitted, no other", i+1, u, p, to)
		}
	}
}

// A paused room admits nobody, however long the pause, and its rate's
// clock gains no credit meanwhile: after the resume it admits at the rate
// from the resume on, in position order. A change of rate counts from its
// time; the live settings come back in the state of every advance.
func TestRoomControlPauseResumeRate(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, _ redis.UniversalClient, _ bool) {
		r := newRoom(4, 1)
		buildRoom(t, s, r, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		byPos := joinEarly(t, s, r, 60)
		warmSizes(t, s, 20, 20, 20)
		at := roomStart.Add(time.Second)
		if st := advance(t, s, r, at); st.Admitted != 4 || st.Control.AdmitPerSecond != 4 || st.Control.Paused {
			t.Fatalf("first advance: %+v, want the 4 of the rate, not paused", st)
		}
		control(t, s, r, room.Control{AdmitPerSecond: 4, Paused: true, Version: 1}, at)
		for _, later := range []time.Duration{time.Second, 10 * time.Second, time.Minute} {
			st := advance(t, s, r, at.Add(later))
			if st.Admitted != 0 || st.Next != 4 || !st.Control.Paused {
				t.Fatalf("paused, %s later: %+v, want nobody admitted", later, st)
			}
		}
		// Resume a minute later: no burst of the minute's admissions.
		resumed := at.Add(time.Minute + 500*time.Millisecond)
		control(t, s, r, room.Control{AdmitPerSecond: 4, Version: 2}, resumed)
		st := advance(t, s, r, resumed.Add(500*time.Millisecond))
		if st.Admitted != 2 || st.Next != 6 || st.Control.Paused {
			t.Fatalf("half a second after the resume: %+v, want 2 admitted (4 a second), positions 5 and 6", st)
		}
		admittedInOrder(t, s, r, byPos, 6, resumed.Add(500*time.Millisecond))
		// 10 a second from now on.
		changed := resumed.Add(time.Second)
		control(t, s, r, room.Control{AdmitPerSecond: 10, Version: 3}, changed)
		st = advance(t, s, r, changed.Add(500*time.Millisecond))
		// The half second before the change at 4 a second (2), the half
		// second after it at 10 (5).
		if st.Admitted != 7 || st.Next != 13 || st.Control.AdmitPerSecond != 10 {
			t.Fatalf("half a second after the rate went to 10: %+v, want 7 admitted (2 before the change, 5 after)", st)
		}
		admittedInOrder(t, s, r, byPos, 13, changed.Add(500*time.Millisecond))
		// An older version (a copy of the sale from before the changes, a
		// late retry of the pause) changes nothing.
		control(t, s, r, room.Control{AdmitPerSecond: 4, Paused: true, Version: 1}, changed.Add(time.Second))
		st = advance(t, s, r, changed.Add(1500*time.Millisecond))
		if st.Admitted != 10 || st.Control.Paused || st.Control.Version != 3 {
			t.Fatalf("after an older control was sent: %+v, want version 3's 10 a second", st)
		}
	})
}

// Passthrough admits every waiter in order at once, however slow the
// rate, but never holds more units than are left; the units that come back
// let the next in at once too.
func TestRoomControlPassthroughHoldsNoMoreThanIsLeft(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, _ bool) {
		r := newRoom(1, 1)
		buildRoom(t, s, r, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		byPos := joinEarly(t, s, r, 40)
		warmSizes(t, s, 5, 4, 3) // 12 units
		at := roomStart.Add(time.Second)
		control(t, s, r, room.Control{AdmitPerSecond: 1, Passthrough: true, Version: 1}, at)
		st := advance(t, s, r, at)
		if st.Admitted != 12 || st.Held != 12 || st.Left != 12 || !st.Control.Passthrough {
			t.Fatalf("passthrough: %+v, want the 12 positions the 12 units allow, at once", st)
		}
		admittedInOrder(t, s, r, byPos, 12, at)
		if st := advance(t, s, r, at.Add(time.Second)); st.Admitted != 0 || st.Held != 12 {
			t.Fatalf("with every unit held: %+v, want nobody more", st)
		}
		if err := rdb.IncrBy(context.Background(), s.Keys(sizes[0]).Stock(), 5).Err(); err != nil {
			t.Fatal(err)
		}
		if st := advance(t, s, r, at.Add(2*time.Second)); st.Admitted != 5 || st.Held != 17 || st.Left != 17 {
			t.Fatalf("5 units back: %+v, want 5 more at once", st)
		}
		// Back to the rate: one a second, from now on.
		control(t, s, r, room.Control{AdmitPerSecond: 1, Version: 2}, at.Add(2*time.Second))
		if err := rdb.IncrBy(context.Background(), s.Keys(sizes[0]).Stock(), 5).Err(); err != nil {
			t.Fatal(err)
		}
		if st := advance(t, s, r, at.Add(3*time.Second)); st.Admitted != 1 || st.Next != 18 {
			t.Fatalf("a second after passthrough ended: %+v, want 1 admitted", st)
		}
	})
}

// The live settings in Redis and a copy of the sale meet at the advance:
// the later version wins. A room that lost its settings (Redis emptied
// them, or came back from an older copy) takes its caller's copy when it
// is later; a build writes MySQL's unless Redis holds a later version.
func TestRoomControlLaterVersionWins(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, _ bool) {
		ctx := context.Background()
		r := newRoom(4, 1)
		buildRoom(t, s, r, room.Image{Gen: 1, Control: room.Control{AdmitPerSecond: 4, Paused: true, Version: 2}}, roomStart.Add(-time.Minute))
		joinEarly(t, s, r, 20)
		warmSizes(t, s, 20, 20, 20)
		// The copy (version 0, not paused) is older: the room stays paused.
		at := roomStart.Add(time.Second)
		if st := advance(t, s, r, at); st.Admitted != 0 || !st.Control.Paused || st.Control.Version != 2 {
			t.Fatalf("build's version 2 paused, a copy of version 0: %+v, want paused", st)
		}
		// A copy of version 3 (the operator resumed; Redis missed it).
		r.Settings.ControlVersion, r.Settings.AdmitPerSecond = 3, 2
		if st := advance(t, s, r, at.Add(time.Second)); st.Control.Paused || st.Control.Version != 3 || st.Control.AdmitPerSecond != 2 {
			t.Fatalf("a copy of version 3: %+v, want it written and run", st)
		}
		// Redis loses the settings: the next advance writes its copy's.
		// The sale's first item's stock key is its group's "stock".
		ctl := strings.TrimSuffix(s.Keys(sizes[0]).Stock(), "stock") + "room:7:ctl"
		if n, err := rdb.Del(ctx, ctl).Result(); err != nil || n != 1 {
			t.Fatalf("delete %s: %d %v", ctl, n, err)
		}
		if st := advance(t, s, r, at.Add(2*time.Second)); st.Control.Version != 3 || st.Control.AdmitPerSecond != 2 {
			t.Fatalf("settings lost, a copy of version 3: %+v, want the copy's", st)
		}
		// A rebuild from MySQL's version 3 keeps Redis's version 4.
		control(t, s, r, room.Control{AdmitPerSecond: 7, Version: 4}, at.Add(2*time.Second))
		buildRoom(t, s, r, room.Image{Gen: 2, Frozen: true, Control: room.Control{AdmitPerSecond: 2, Version: 3}}, at.Add(3*time.Second))
		if st := advance(t, s, r, at.Add(4*time.Second)); st.Control.Version != 4 || st.Control.AdmitPerSecond != 7 || st.Gen != 2 {
			t.Fatalf("rebuilt with version 3 over Redis's 4: %+v, want version 4's 7 a second", st)
		}
	})
}

// The operator's change with its answer lost at the wire: ControlRoom
// sends it again, and the run again finds its version in the room and
// writes nothing; the room runs with the change once.
func TestRoomControlLostAnswer(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		r := newRoom(4, 1)
		r.Items = []reservation.Item{reservation.One(item)}
		buildRoom(t, l.direct, r, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		seed := room.NewSeed()
		for i := range 30 {
			join(t, l.direct, r, seed, "u"+strconv.Itoa(i), roomStart.Add(time.Duration(i)*time.Millisecond))
		}
		warm(t, l.direct, 30, 1)
		at := roomStart.Add(time.Second)
		if st := advance(t, l.direct, r, at); st.Admitted != 4 {
			t.Fatalf("first advance: %+v, want 4", st)
		}
		l.LoseNext("room_control")
		if err := l.via.Rooms.ControlRoom(context.Background(), r, room.Control{AdmitPerSecond: 4, Paused: true, Version: 1}, at); err != nil ||
			l.Lost() != 1 {
			t.Fatalf("a pause with its answer lost: %v (lost %d), want it sent again and answered", err, l.Lost())
		}
		if st := advance(t, l.direct, r, at.Add(5*time.Second)); st.Admitted != 0 || !st.Control.Paused {
			t.Fatalf("after the pause: %+v, want paused", st)
		}
		l.LoseNext("room_control")
		resumed := at.Add(10 * time.Second)
		if err := l.via.Rooms.ControlRoom(context.Background(), r, room.Control{AdmitPerSecond: 4, Version: 2}, resumed); err != nil ||
			l.Lost() != 2 {
			t.Fatalf("a resume with its answer lost: %v (lost %d)", err, l.Lost())
		}
		if st := advance(t, l.direct, r, resumed.Add(500*time.Millisecond)); st.Admitted != 2 || st.Next != 6 || st.Control.Version != 2 {
			t.Fatalf("half a second after the resume: %+v, want 2 admitted at version 2", st)
		}
	})
}
