package orderdb_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/room"
)

// A sale's room is written with the sale and read back with it, in the
// same query; a sale without one reads back without one.
func TestSaleWithARoomReadsBack(t *testing.T) {
	db := mysqltest.New(t)
	ctx := context.Background()
	it, err := db.Activities.CreateItem(ctx, "sneaker", 5)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	want := activity.WaitingRoom{AdmitPerSecond: 250, AdmissionTTL: 90 * time.Second, ProofOfWorkBits: 12,
		OpensAt: start.Add(-30 * time.Minute), Seed: room.NewSeed(), Key: room.NewSeed()}
	a, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: start, EndsAt: start.Add(time.Hour), PerUserLimit: 1, Room: want})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Activities.Activity(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Room.OpensAt.Equal(want.OpensAt) {
		got.Room.OpensAt = want.OpensAt
	}
	if got.Room != want || !got.EndsAt.Equal(start.Add(time.Hour)) {
		t.Fatalf("read back %+v, want %+v", got.Room, want)
	}
	plain, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: start.Add(2 * time.Hour), EndsAt: start.Add(3 * time.Hour), PerUserLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := db.Activities.Activity(ctx, plain.ID); err != nil || got.Room.On() || got.PerUserLimit != 1 {
		t.Fatalf("a sale without a room read back as %+v, %v", got, err)
	}
}

// A sale gets a room, or a room changes, before the start; the seed drawn
// first stays (its commitment is public); a room refuses buckets.
func TestPatchSetsTheRoomAndKeepsItsSeed(t *testing.T) {
	db := mysqltest.New(t)
	ctx := context.Background()
	it, err := db.Activities.CreateItem(ctx, "ticket", 5)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	start := now.Add(2 * time.Hour).Truncate(time.Millisecond).UTC()
	a, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: start, EndsAt: start.Add(time.Hour), PerUserLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	first := activity.WaitingRoom{AdmitPerSecond: 10, AdmissionTTL: time.Minute, Seed: room.NewSeed(), Key: room.NewSeed()}
	got, err := db.Activities.PatchActivity(ctx, a.ID, activity.Patch{Room: &first}, now)
	if err != nil || got.Room != first {
		t.Fatalf("a room by PATCH: %+v, %v; want %+v", got.Room, err, first)
	}
	second := activity.WaitingRoom{AdmitPerSecond: 99, AdmissionTTL: 2 * time.Minute, ProofOfWorkBits: 4, Seed: room.NewSeed(), Key: room.NewSeed()}
	got, err = db.Activities.PatchActivity(ctx, a.ID, activity.Patch{Room: &second}, now)
	if err != nil || got.Room.AdmitPerSecond != 99 || got.Room.ProofOfWorkBits != 4 || got.Room.Seed != first.Seed || got.Room.Key != first.Key {
		t.Fatalf("a changed room: %+v, %v; want the new settings with the first seed and key", got.Room, err)
	}
	// The change has a later control version: Redis's live settings of
	// the room (a build's, of version 0) give way to it at the next
	// advance. A paused room changed by PATCH stays paused.
	if got.Room.ControlVersion != 1 {
		t.Fatalf("a changed room's control version: %d, want 1", got.Room.ControlVersion)
	}
	paused := got.Room
	paused.Paused, paused.ControlVersion = true, 2
	if err := db.Rooms.SetRoomControl(ctx, a.ID, paused); err != nil {
		t.Fatal(err)
	}
	got, err = db.Activities.PatchActivity(ctx, a.ID, activity.Patch{Room: &first}, now)
	if err != nil || got.Room.AdmitPerSecond != 10 || !got.Room.Paused || got.Room.ControlVersion != 3 {
		t.Fatalf("a paused room changed by PATCH: %+v, %v; want 10 a second, still paused, version 3", got.Room, err)
	}
	two := 2
	if _, err := db.Activities.PatchActivity(ctx, a.ID, activity.Patch{StockBuckets: &two, Guard: &activity.KeyGuard{Now: now,
		KeysUntil: func(activity.Activity) time.Time { return now }}}, now); !errors.Is(err, order.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "waiting_room") {
		t.Fatalf("buckets for a sale with a room: %v, want an invalid argument", err)
	}
}

// A room reaches every instance before the sale opens, or it is refused:
// an instance sells from a copy of the sale up to activity.MaxStale
// old, and one that never saw the room would take orders without
// admissions. So a room is added, and the start of a sale with a room
// moved earlier, only while the sale starts more than activity.RoomGuard
// later; nothing of a refused change is written.
func TestRoomIsSetInTimeForEveryInstance(t *testing.T) {
	db := mysqltest.New(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sale := func(starts time.Time) activity.Activity {
		t.Helper()
		it, err := db.Activities.CreateItem(ctx, "ticket", 5) // an item each: one sale owns an item at a time
		if err != nil {
			t.Fatal(err)
		}
		a, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: starts, EndsAt: starts.Add(10 * time.Hour), PerUserLimit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	newRoom := func() *activity.WaitingRoom {
		return &activity.WaitingRoom{AdmitPerSecond: 10, AdmissionTTL: time.Minute, Seed: room.NewSeed(), Key: room.NewSeed()}
	}
	hasRoom := func(id int64) bool {
		t.Helper()
		a, err := db.Activities.Activity(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return a.Room.On()
	}

	soon := sale(now.Add(activity.RoomGuard - time.Second))
	if _, err := db.Activities.PatchActivity(ctx, soon.ID, activity.Patch{Room: newRoom()}, now); !errors.Is(err, activity.ErrSettingLocked) {
		t.Fatalf("a room added %v before the start: %v, want ErrSettingLocked", activity.RoomGuard-time.Second, err)
	}
	if hasRoom(soon.ID) {
		t.Fatal("the refused room was written")
	}

	later := sale(now.Add(2 * time.Hour))
	if _, err := db.Activities.PatchActivity(ctx, later.ID, activity.Patch{Room: newRoom()}, now); err != nil {
		t.Fatalf("a room added 2 h before the start: %v", err)
	}
	// The room exists now: a start moved to within the guard could reach an
	// instance whose copy predates the room.
	early := now.Add(activity.RoomGuard - time.Second)
	if _, err := db.Activities.PatchActivity(ctx, later.ID, activity.Patch{StartsAt: &early}, now); !errors.Is(err, activity.ErrSettingLocked) {
		t.Fatalf("the start of a sale with a room moved to %v from now: %v, want ErrSettingLocked", activity.RoomGuard-time.Second, err)
	}
	if a, err := db.Activities.Activity(ctx, later.ID); err != nil || !a.StartsAt.Equal(later.StartsAt) {
		t.Fatalf("after the refused move the sale starts at %v (%v), want %v", a.StartsAt, err, later.StartsAt)
	}
	for _, starts := range []time.Time{now.Add(activity.RoomGuard + time.Minute), now.Add(3 * time.Hour)} {
		if _, err := db.Activities.PatchActivity(ctx, later.ID, activity.Patch{StartsAt: &starts}, now); err != nil {
			t.Fatalf("the start of a sale with a room moved to %v from now: %v", starts.Sub(now), err)
		}
	}
	// A later start keeps the room as far ahead of it as it was: allowed
	// even when the clock has come close (the room was set in time).
	closer := now.Add(3*time.Hour - activity.RoomGuard + time.Second)
	starts := now.Add(4 * time.Hour)
	if _, err := db.Activities.PatchActivity(ctx, later.ID, activity.Patch{StartsAt: &starts}, closer); err != nil {
		t.Fatalf("the start moved later, %v before the old start: %v", activity.RoomGuard-time.Second, err)
	}
}
