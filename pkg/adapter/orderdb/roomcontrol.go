package orderdb

import (
	"context"

	"github.com/seckill/seckill/pkg/domain/activity"
)

// LockRoomControl returns sale id (order.ErrNotFound if none) with its
// room (zero: none), holding its room's row for update in the transaction
// ctx carries: changes of one room's control run one at a time, and wait
// for a rebuild of the room (which reads the control under the same lock).
func (s *Rooms) LockRoomControl(ctx context.Context, id int64) (activity.Activity, error) {
	var n []int64
	if err := s.db(ctx).Raw("SELECT activity_id FROM activity_rooms WHERE activity_id = ? FOR UPDATE", id).Scan(&n).Error; err != nil {
		return activity.Activity{}, wrap("lock the waiting room", err)
	}
	return (&Activities{s.conn}).Activity(ctx, id)
}

// SetRoomControl writes r's rate, pause, passthrough and control version
// as sale id's room's.
func (s *Rooms) SetRoomControl(ctx context.Context, id int64, r activity.WaitingRoom) error {
	err := s.db(ctx).Model(&roomRow{}).Where("activity_id = ?", id).Updates(map[string]any{
		"admit_per_second": r.AdmitPerSecond, "paused": r.Paused, "passthrough": r.Passthrough,
		"control_version": r.ControlVersion}).Error
	return wrap("change the waiting room's control", err)
}
