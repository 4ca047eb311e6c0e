package waitingroom_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/service/waitingroom"
)

// The operator paused a room (MySQL has it, version 1), then Redis lost
// the room, its live settings with it, or came back from a copy from
// before the pause: the rebuild takes the pause from MySQL, so the room
// stays paused even for an instance whose copy of the sale is older than
// the pause (version 0, not paused).
func TestRoomRebuildKeepsTheLiveControl(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	ctx := context.Background()
	a := roomSale(t, p, 5, time.Now().Add(-time.Minute).Truncate(time.Millisecond))
	clk := &clock{}
	clk.Set(time.Now())
	svc := waitingroom.New(p.Store.Rooms, p.DB.Rooms, slog.New(slog.DiscardHandler), clk.Now)
	stale := waitingroom.StoreRoom(a, time.Minute) // version 0: not paused
	joinAll(t, svc, stale, a.Room.Seed, users("u", 4), clk.Now())
	advance := func(what string) room.State {
		t.Helper()
		var st room.State
		waittest.Until(t, 15*time.Second, what, func() bool {
			var err error
			st, err = svc.Advance(ctx, stale, clk.Now())
			if err != nil && !errors.Is(err, order.ErrUnavailable) {
				t.Fatal(err)
			}
			return err == nil
		})
		return st
	}
	st := advance("the first advance")
	snap := p.SnapshotRoom(a.ID)

	paused := a.Room
	paused.Paused, paused.ControlVersion = true, 1
	if err := p.DB.Rooms.SetRoomControl(ctx, a.ID, paused); err != nil {
		t.Fatal(err)
	}
	if err := p.Store.Rooms.ControlRoom(ctx, stale, room.ControlOf(paused), clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Add(5 * time.Second)
	if st := advance("an advance while paused"); st.Admitted != 0 || !st.Control.Paused {
		t.Fatalf("paused: %+v, want nobody admitted", st)
	}
	held := st.Next

	// Redis loses the room: rebuilt from MySQL, still paused.
	p.DeleteRoomKeys(a.ID)
	clk.Add(5 * time.Second)
	if st := advance("the advance after the loss"); st.Gen != 2 || !st.Control.Paused || st.Control.Version != 1 || st.Next > held {
		t.Fatalf("rebuilt after the loss: %+v, want generation 2, paused at version 1, nobody admitted past %d", st, held)
	}
	clk.Add(5 * time.Second)
	if st := advance("an advance after the rebuild"); st.Admitted != 0 {
		t.Fatalf("after the rebuild: %+v, want nobody admitted", st)
	}

	// Redis comes back from the copy from before the pause (version 0):
	// the data-loss watch rebuilds the room, from MySQL's pause.
	p.RewindRoom(a.ID, snap)
	lostBy := time.Now()
	if err := svc.RebuildAll(ctx, []int64{a.ID}, lostBy, func(context.Context, int64) (room.Room, error) { return stale, nil }); err != nil {
		t.Fatal(err)
	}
	clk.Add(5 * time.Second)
	if st := advance("the advance after the rewind's rebuild"); st.Admitted != 0 || !st.Control.Paused || st.Control.Version != 1 {
		t.Fatalf("rebuilt after the rewind: %+v, want paused at version 1, nobody admitted", st)
	}
}
