package activity_test

import (
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

func TestControlled(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	live := activity.Activity{ID: 9, EndsAt: now.Add(time.Hour),
		Room: activity.WaitingRoom{AdmitPerSecond: 50, AdmissionTTL: time.Minute, ControlVersion: 4}}
	paused := live
	paused.Room.Paused = true
	yes, no := true, false
	rate := func(n int) *int { return &n }
	for _, tc := range []struct {
		name    string
		a       activity.Activity
		ch      activity.RoomControl
		want    activity.WaitingRoom
		changed bool
		err     error
	}{
		{"pause", live, activity.RoomControl{Paused: &yes},
			activity.WaitingRoom{AdmitPerSecond: 50, AdmissionTTL: time.Minute, Paused: true, ControlVersion: 5}, true, nil},
		{"a new rate", live, activity.RoomControl{AdmitPerSecond: rate(7)},
			activity.WaitingRoom{AdmitPerSecond: 7, AdmissionTTL: time.Minute, ControlVersion: 5}, true, nil},
		{"resume and passthrough", paused, activity.RoomControl{Paused: &no, Passthrough: &yes},
			activity.WaitingRoom{AdmitPerSecond: 50, AdmissionTTL: time.Minute, Passthrough: true, ControlVersion: 5}, true, nil},
		{"as it is: no change", paused, activity.RoomControl{Paused: &yes, AdmitPerSecond: rate(50)}, paused.Room, false, nil},
		{"passthrough while paused", paused, activity.RoomControl{Passthrough: &yes}, paused.Room, false, order.ErrInvalidArgument},
		{"both", live, activity.RoomControl{Paused: &yes, Passthrough: &yes}, live.Room, false, order.ErrInvalidArgument},
		{"a rate of 0", live, activity.RoomControl{AdmitPerSecond: rate(0)}, live.Room, false, order.ErrInvalidArgument},
		{"a rate above the bound", live, activity.RoomControl{AdmitPerSecond: rate(activity.MaxAdmitPerSecond + 1)}, live.Room, false,
			order.ErrInvalidArgument},
		{"nothing", live, activity.RoomControl{}, live.Room, false, order.ErrInvalidArgument},
		{"no room", activity.Activity{ID: 9, EndsAt: now.Add(time.Hour)}, activity.RoomControl{Paused: &yes}, activity.WaitingRoom{}, false,
			activity.ErrNoRoom},
		{"ended", activity.Activity{ID: 9, EndsAt: now, Room: live.Room}, activity.RoomControl{Paused: &yes}, live.Room, false,
			order.ErrActivityNotActive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed, err := tc.a.Controlled(tc.ch, now)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if got != tc.want || changed != tc.changed {
				t.Fatalf("got %+v changed %v, want %+v changed %v", got, changed, tc.want, tc.changed)
			}
		})
	}
}
