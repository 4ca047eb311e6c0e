package activity

import (
	"errors"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// ErrNoRoom is the answer to a room's control on a sale without one.
var ErrNoRoom = errors.New("the sale has no waiting room")

// RoomControl is the operator's change of a room during its sale; nil
// fields stay. Each field is an absolute value, so a change sent twice
// leaves the room as once.
type RoomControl struct {
	AdmitPerSecond      *int
	Paused, Passthrough *bool
}

// Empty reports whether the change names nothing.
func (c RoomControl) Empty() bool {
	return c.AdmitPerSecond == nil && c.Paused == nil && c.Passthrough == nil
}

// Controlled is a's room after c at now, and whether c changed anything.
// The sale must have a room and not have ended (a room ends with its sale:
// nobody is admitted after it); the rate keeps the bounds it has at
// creation; a room is never paused and passthrough at once (a paused room
// admits nobody, a passthrough one everyone: the operator says which).
// A change that changes nothing is not a change: it is neither written
// nor recorded again, which makes a retry of a change whose answer was
// lost harmless.
func (a Activity) Controlled(c RoomControl, now time.Time) (WaitingRoom, bool, error) {
	r := a.Room
	switch {
	case !r.On():
		return r, false, order.Errorf(ErrNoRoom, "sale %d sells without one: there is no admission to pace, pause or let through", a.ID)
	case !now.Before(a.EndsAt):
		return r, false, order.Errorf(order.ErrActivityNotActive, "sale %d ended at %s, and its room with it",
			a.ID, a.EndsAt.UTC().Format(time.RFC3339))
	case c.Empty():
		return r, false, order.Errorf(order.ErrInvalidArgument, "name at least one of admit_per_second, paused, passthrough")
	}
	next := r
	if c.AdmitPerSecond != nil {
		next.AdmitPerSecond = *c.AdmitPerSecond
		if err := next.Validate(); err != nil {
			return r, false, order.Errorf(order.ErrInvalidArgument, "admit_per_second must be from 1 to %d", MaxAdmitPerSecond)
		}
	}
	if c.Paused != nil {
		next.Paused = *c.Paused
	}
	if c.Passthrough != nil {
		next.Passthrough = *c.Passthrough
	}
	if next.Paused && next.Passthrough {
		return r, false, order.Errorf(order.ErrInvalidArgument,
			"a room is not paused and passthrough at once: send \"paused\": false with \"passthrough\": true, or the reverse")
	}
	if next == r {
		return r, false, nil
	}
	next.ControlVersion++
	return next, true, nil
}
