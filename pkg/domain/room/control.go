package room

import "github.com/seckill/seckill/pkg/domain/activity"

// Control is a room's live settings as Redis holds them beside the room
// (activity.RoomControl changes them): every advance, on every instance,
// reads them there, so a change reaches every instance with its next
// advance (about once a second) whatever its copy of the sale says.
// Version is activity.WaitingRoom.ControlVersion: of two controls, the one
// of the higher version wins, whichever is written second.
type Control struct {
	AdmitPerSecond      int
	Paused, Passthrough bool
	Version             int64
}

// ControlOf is the control of a sale's room as its settings say.
func ControlOf(w activity.WaitingRoom) Control {
	return Control{AdmitPerSecond: w.AdmitPerSecond, Paused: w.Paused, Passthrough: w.Passthrough, Version: w.ControlVersion}
}
