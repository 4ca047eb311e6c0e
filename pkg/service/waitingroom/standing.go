package waitingroom

import (
	"context"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/room"
)

// State is where a buyer stands in a sale's waiting room.
type State string

// The room's states, as the API names them.
const (
	Waiting  State = "WAITING"
	Admitted State = "ADMITTED"
	SoldOut  State = "SOLD_OUT"
	Ended    State = "ENDED"
	// Expired: the buyer's admission expired unused; its units went to
	// the next in line.
	Expired State = "EXPIRED"
	// Ordered: the buyer holds an order in the sale (OrderNo): their turn
	// is done, whatever became of the admission since; the order's own
	// status says what is left to do (pay).
	Ordered State = "ORDERED"
)

// Standing is what a buyer is told of their place.
type Standing struct {
	State State
	// Position is the buyer's place in line from 1; 0 before the start
	// for those who joined before it (their order is drawn at the start).
	Position int64
	// Ahead is how many positions are still to be admitted before the
	// buyer's; ETASeconds how long that takes at the room's pace.
	Ahead, ETASeconds int64
	// PollAfterMS is when to poll again.
	PollAfterMS int64
	// Admission is the signed admission, sent with the order, until
	// AdmissionExpires (zero: none).
	Admission        string
	AdmissionExpires time.Time
	// OrderNo is the order the buyer holds in the sale (Ordered).
	OrderNo string
	// Paused: the operator paused the room's admissions; the waiter keeps
	// their place (Waiting or SoldOut) and admissions resume in the same
	// order.
	Paused bool
	// Priority: the buyer joined a code_priority sale's room with a valid
	// code and waits in its priority lane, admitted before the line;
	// Position and Ahead are then the lane's.
	Priority bool
}

// Work is what a join carries: the proof of work (a room with
// proof_of_work_bits asks for it) and the buyer's presale code as typed
// (a code_required sale's join needs one).
type Work struct {
	Challenge, Solution string
	AccessCode          string
	// Addr is the client's address bucket the code's guesses are
	// counted under ("" for none).
	Addr string
}

// Queue puts user in sale a's room when join is set (once: joining again
// from anywhere answers the same place), and says where they stand: from
// this instance's memory but for the room's state, read once a second per
// instance. work is asked for only for a join the room is open to; its
// error is returned as it is.
func (s *Service) Queue(ctx context.Context, a activity.Activity, user string, join bool, work func() (Work, error)) (Standing, error) {
	now := s.now()
	if !now.Before(a.EndsAt) {
		return Standing{State: Ended}, nil
	}
	var code access.Digest
	var w Work
	if join {
		if now.Before(a.Room.OpensAt) {
			return Standing{}, order.Errorf(order.ErrActivityNotActive, "the waiting room opens at %s", a.Room.OpensAt.UTC().Format(time.RFC3339))
		}
		var err error
		if w, err = work(); err != nil {
			return Standing{}, err
		}
		if a.Room.ProofOfWorkBits > 0 {
			if err := room.CheckWork(a.Room.Key[:], w.Challenge, w.Solution, a.ID, user, a.Room.ProofOfWorkBits, now); err != nil {
				return Standing{}, err
			}
		}
		if code, err = s.checkCode(ctx, a, user, w.AccessCode, w.Addr); err != nil {
			return Standing{}, err
		}
	}
	// Built only when Redis is read: most polls are answered from memory.
	storeRoom := func() room.Room { return StoreRoom(a, s.PaymentWindow) }
	st, err := s.state(ctx, a.ID, storeRoom, now)
	if err != nil {
		return Standing{}, err
	}
	p, err := s.place(ctx, a.ID, storeRoom, user, func() uint64 { return room.Rank(a.Room.Seed, user) }, join, code, st, now)
	if err != nil {
		if code != "" {
			// A code_priority join's code the join script found invalid.
			s.guessed(ctx, a, user, w.Addr, err)
		}
		return Standing{}, err
	}
	if !p.Joined {
		return Standing{}, order.Errorf(order.ErrNotFound, "you are not in this sale's queue: join it first (POST)")
	}
	var held string
	if turnCame(p, st) || !p.Admission.IsZero() || p.Used {
		// Only a buyer let in can hold an order: one shared read for
		// them, none for the waiters. Not kept: the order may yet be
		// given back (a 503's release returns the admission).
		if held, err = s.HeldOrder(ctx, a, user); err != nil {
			return Standing{}, err
		}
	}
	return standing(a, s.signer(a), user, p, st, held, now), nil
}

// signer is the signer of a's admissions, made once per room (and again
// for a sale of the same id with another key: a test's other database).
func (s *Service) signer(a activity.Activity) *room.Signer {
	if v, ok := s.signers.Load(a.ID); ok && v.(*room.Signer).Signs(a.Room.Key[:]) {
		return v.(*room.Signer)
	}
	sg := room.NewSigner(a.Room.Key[:])
	s.signers.Store(a.ID, sg)
	return sg
}

// standing is what the buyer at p, holding the order held ("" for none),
// is told at now.
func standing(a activity.Activity, signer *room.Signer, user string, p room.Place, st room.State, held string, now time.Time) Standing {
	v := Standing{State: Waiting, Position: p.Position}
	expires := p.Admission
	if p.Used {
		expires = p.UsedExpires // the order's retries need it
	}
	// The room's live rate (the operator may have changed it), as Redis
	// had it at the state's advance.
	rate := int64(st.Control.AdmitPerSecond)
	if rate < 1 {
		rate = int64(a.Room.AdmitPerSecond)
	}
	switch {
	case held != "":
		// Their turn is done: a retry of the order needs its key only.
		v.State, v.OrderNo, v.PollAfterMS = Ordered, held, 0
	case !expires.IsZero() && now.Before(expires):
		v.State, v.PollAfterMS = Admitted, 5000
		v.Admission = signer.Sign(room.Admission{ActivityID: a.ID, UserID: user, Expires: expires})
		v.AdmissionExpires = expires
	case !expires.IsZero() || turnCame(p, st):
		v.State, v.PollAfterMS = Expired, 0
	case st.SoldOut():
		// Units may still come back (an unpaid order closed, a cancel):
		// the waiter keeps their place and polls slowly.
		v.State, v.PollAfterMS = SoldOut, 5000
	case !st.Started:
		v.ETASeconds = int64(a.StartsAt.Sub(now).Round(time.Second) / time.Second)
		v.PollAfterMS = min(max(a.StartsAt.Sub(now).Milliseconds()/2, 500), 5000)
	case p.Lane:
		v.Position, v.Ahead = p.LanePosition, max(p.LanePosition-st.LaneNext-1, 0)
		v.ETASeconds = (v.Ahead + rate - 1) / rate
		v.PollAfterMS = min(max(v.ETASeconds*1000/4, 1000), 10000)
	default:
		// The lane's waiters go first.
		v.Ahead = max(p.Position-st.Next-1, 0) + max(st.Lane-st.LaneNext, 0)
		v.ETASeconds = (v.Ahead + rate - 1) / rate
		// Close to the front: every second; far back: up to every 10 s.
		v.PollAfterMS = min(max(v.ETASeconds*1000/4, 1000), 10000)
	}
	if v.State == Waiting || v.State == SoldOut {
		v.Paused = st.Control.Paused
		v.Priority = p.Lane
		if p.Lane && p.LanePosition > 0 {
			v.Position = p.LanePosition
		}
	}
	return v
}

// turnCame reports whether the room reached p's place: in the line, or in
// the priority lane for a buyer in it (who is admitted from the lane, before
// the line reaches them).
func turnCame(p room.Place, st room.State) bool {
	if p.Lane {
		return p.LanePosition > 0 && p.LanePosition <= st.LaneNext
	}
	return p.Position > 0 && p.Position <= st.Next
}

// Room is sale a's room as this instance last read it, at most a second
// old (the same read the buyers' polls share): how many joined, how far
// the admissions went, the units they hold, and the live control the room
// ran with. A sale without a room is activity.ErrNoRoom.
func (s *Service) Room(ctx context.Context, a activity.Activity) (room.State, error) {
	if !a.Room.On() {
		return room.State{}, order.Errorf(activity.ErrNoRoom, "sale %d sells without one: nobody queues", a.ID)
	}
	return s.state(ctx, a.ID, func() room.Room { return StoreRoom(a, s.PaymentWindow) }, s.now())
}
