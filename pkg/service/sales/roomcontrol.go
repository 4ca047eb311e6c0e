package sales

import (
	"context"
	"encoding/json"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/unit"
	"github.com/seckill/seckill/pkg/service/waitingroom"
)

// RoomControls are the rooms' live settings as MySQL keeps them, their
// record (*orderdb.Rooms).
type RoomControls interface {
	LockRoomControl(ctx context.Context, id int64) (activity.Activity, error)
	SetRoomControl(ctx context.Context, id int64, r activity.WaitingRoom) error
}

// LiveRooms are the rooms' live settings in Redis, which every advance
// reads (*stockredis.Rooms).
type LiveRooms interface {
	ControlRoom(ctx context.Context, r room.Room, c room.Control, now time.Time) error
}

// Audit is the record of the operators' actions on the sales
// (*orderdb.Audit).
type Audit interface {
	RecordAction(ctx context.Context, e activity.AuditEntry) error
	Actions(ctx context.Context, id, before int64, limit int) ([]activity.AuditEntry, error)
}

// ControlledRoom is a sale after a change of its room's control.
type ControlledRoom struct {
	Activity activity.Activity
	// Changed is false when the room already was as asked (a retry): the
	// change was neither written nor recorded again.
	Changed bool
}

// roomControlDetail is a room change's detail in the audit.
type roomControlDetail struct {
	AdmitPerSecond int              `json:"admit_per_second"`
	Paused         bool             `json:"paused"`
	Passthrough    bool             `json:"passthrough"`
	Version        int64            `json:"control_version"`
	Was            roomControlValue `json:"was"`
}

type roomControlValue struct {
	AdmitPerSecond int  `json:"admit_per_second"`
	Paused         bool `json:"paused"`
	Passthrough    bool `json:"passthrough"`
}

// ControlRoom changes sale id's room during the sale, as operator by asked
// (activity.Activity.Controlled has the rules): MySQL's row and the
// change's record commit together, then Redis's live settings, which
// every advance on every instance reads, take it; each instance's answers
// to the waiters show it from its next advance, within about a second.
// Every value is absolute, so sending a change again is harmless: a room
// already as asked is written to Redis again (in case the first answer was
// lost before Redis took it) and nothing is recorded. If Redis does not
// take it, MySQL has it and the error says so: every instance's copy of the
// sale carries it into Redis within activity.CopyTTL (the advance writes a
// copy's control of a later version), and sending it again is harmless.
func (s *Service) ControlRoom(ctx context.Context, id int64, ch activity.RoomControl, by string) (ControlledRoom, error) {
	now := s.Now()
	res, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (ControlledRoom, error) {
		a, err := s.RoomControls.LockRoomControl(ctx, id)
		if err != nil {
			return ControlledRoom{}, err
		}
		next, changed, err := a.Controlled(ch, now)
		if err != nil || !changed {
			return ControlledRoom{Activity: a}, err
		}
		if err := s.RoomControls.SetRoomControl(ctx, id, next); err != nil {
			return ControlledRoom{}, err
		}
		was := a.Room
		a.Room = next
		detail, err := json.Marshal(roomControlDetail{AdmitPerSecond: next.AdmitPerSecond, Paused: next.Paused,
			Passthrough: next.Passthrough, Version: next.ControlVersion,
			Was: roomControlValue{AdmitPerSecond: was.AdmitPerSecond, Paused: was.Paused, Passthrough: was.Passthrough}})
		if err != nil {
			return ControlledRoom{}, err
		}
		err = s.Audit.RecordAction(ctx, activity.AuditEntry{ActivityID: id, Action: activity.ActionRoomControl, Subject: by,
			Detail: string(detail), At: now})
		return ControlledRoom{Activity: a, Changed: true}, err
	})
	if err != nil {
		return ControlledRoom{}, err
	}
	c := room.ControlOf(res.Activity.Room)
	if err := s.LiveRooms.ControlRoom(ctx, waitingroom.StoreRoom(res.Activity, s.PaymentWindow), c, s.Now()); err != nil {
		s.Log.Warn("waiting room: the control's change is in MySQL, not yet in Redis", "request_id", logs.RequestID(ctx),
			"activity_id", id, "control_version", c.Version, "err", err)
		return res, order.Errorf(order.ErrUnavailable, "the change is recorded but Redis did not take it yet; every api instance "+
			"carries it there within %v, and sending the same change again is harmless", activity.CopyTTL)
	}
	s.Log.Info("waiting room controlled", "request_id", logs.RequestID(ctx), "activity_id", id, "operator", by,
		"admit_per_second", c.AdmitPerSecond, "paused", c.Paused, "passthrough", c.Passthrough, "control_version", c.Version,
		"changed", res.Changed)
	return res, nil
}

// Actions returns up to limit (1 to activity.MaxAuditPage) of sale id's
// recorded operator actions, newest first, those recorded before the
// entry before when it is above 0 (the next page).
func (s *Service) Actions(ctx context.Context, id, before int64, limit int) ([]activity.AuditEntry, error) {
	if limit < 1 || limit > activity.MaxAuditPage {
		return nil, order.Errorf(order.ErrInvalidArgument, "limit is between 1 and %d", activity.MaxAuditPage)
	}
	if _, err := s.Sales.Activity(ctx, id); err != nil {
		return nil, err
	}
	return s.Audit.Actions(ctx, id, before, limit)
}
