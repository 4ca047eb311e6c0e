package httpapi

import (
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/room"
)

// waitingRoomBody is a sale's "waiting_room" in POST /admin/v1/activities.
type waitingRoomBody struct {
	AdmitPerSecond      optional[int]       `json:"admit_per_second"`
	AdmissionTTLSeconds optional[int]       `json:"admission_ttl_seconds"`
	ProofOfWorkBits     optional[int]       `json:"proof_of_work_bits"`
	OpensAt             optional[time.Time] `json:"opens_at"`
}

// UnmarshalJSON decodes as strictly as the body around it: no unknown
// field, none in another case or twice.
func (w *waitingRoomBody) UnmarshalJSON(b []byte) error {
	type plain waitingRoomBody
	return decodeStrict(b, (*plain)(w))
}

// waitingRoom is the room the operator asked for, with its seed and key
// drawn now.
func (w waitingRoomBody) waitingRoom() (activity.WaitingRoom, error) {
	if err := refuseNull(field{"waiting_room.admit_per_second", w.AdmitPerSecond},
		field{"waiting_room.admission_ttl_seconds", w.AdmissionTTLSeconds},
		field{"waiting_room.proof_of_work_bits", w.ProofOfWorkBits}, field{"waiting_room.opens_at", w.OpensAt}); err != nil {
		return activity.WaitingRoom{}, err
	}
	var opens *time.Time
	if w.OpensAt.Set {
		at := w.OpensAt.Value.Truncate(timePrecision)
		opens = &at
	}
	r, err := activity.NewWaitingRoom(w.AdmitPerSecond.ptr(), w.AdmissionTTLSeconds.ptr(), w.ProofOfWorkBits.ptr(), opens)
	if err != nil {
		return r, err
	}
	r.Seed, r.Key = room.NewSeed(), room.NewSeed()
	return r, nil
}

// WaitingRoomView is a sale's room in the admin's answers.
type WaitingRoomView struct {
	AdmitPerSecond      int        `json:"admit_per_second"`
	AdmissionTTLSeconds int        `json:"admission_ttl_seconds"`
	ProofOfWorkBits     int        `json:"proof_of_work_bits"`
	OpensAt             *time.Time `json:"opens_at,omitempty"`
	// SeedCommitment is SHA-256 of the seed that orders the early joiners.
	SeedCommitment string `json:"seed_commitment"`
}

func waitingRoomView(r activity.WaitingRoom) *WaitingRoomView {
	if !r.On() {
		return nil
	}
	v := &WaitingRoomView{AdmitPerSecond: r.AdmitPerSecond, AdmissionTTLSeconds: int(r.AdmissionTTL / time.Second),
		ProofOfWorkBits: r.ProofOfWorkBits, SeedCommitment: room.Seed(r.Seed).Commitment()}
	if !r.OpensAt.IsZero() {
		at := r.OpensAt.UTC()
		v.OpensAt = &at
	}
	return v
}
