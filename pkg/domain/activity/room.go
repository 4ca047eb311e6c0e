package activity

import (
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// Bounds of a waiting room's settings.
const (
	MaxAdmitPerSecond   = 100_000
	DefaultAdmissionTTL = 120 * time.Second
	MinAdmissionTTL     = 10 * time.Second
	MaxAdmissionTTL     = time.Hour
	MaxProofOfWorkBits  = 24
)

// WaitingRoom is a sale's waiting room (package room has its rules).
// The zero value is no room.
type WaitingRoom struct {
	// AdmitPerSecond is the most positions admitted per second (1-100,000);
	// 0 is no room.
	AdmitPerSecond int
	// AdmissionTTL is how long an admission may be used.
	AdmissionTTL time.Duration
	// ProofOfWorkBits is the leading zero bits a join's solution must
	// have (0: no challenge).
	ProofOfWorkBits int
	// OpensAt is when buyers may join; zero: from the sale's creation.
	OpensAt time.Time
	// Seed orders the early joiners (room.Seed; its SHA-256 is public
	// from the room's making, the seed itself from the start); Key signs
	// the admissions and is never shown.
	Seed, Key [32]byte
	// Paused and Passthrough are the operator's live control of the room
	// during the sale (RoomControl); ControlVersion counts the changes of
	// them and of AdmitPerSecond, so the copy of a later change wins
	// wherever two copies meet (Redis's live settings).
	Paused, Passthrough bool
	ControlVersion      int64
}

// On reports whether the sale has a room.
func (s WaitingRoom) On() bool { return s.AdmitPerSecond > 0 }

// NewWaitingRoom is the room an operator asked for: admit is required;
// ttl (seconds), bits and opensAt may be left out (nil). Its seed and key
// are drawn when it is stored.
func NewWaitingRoom(admit, ttlSeconds, bits *int, opensAt *time.Time) (WaitingRoom, error) {
	if admit == nil {
		return WaitingRoom{}, order.Errorf(order.ErrInvalidArgument, "waiting_room.admit_per_second is required")
	}
	s := WaitingRoom{AdmitPerSecond: *admit, AdmissionTTL: DefaultAdmissionTTL}
	if ttlSeconds != nil {
		s.AdmissionTTL = time.Duration(*ttlSeconds) * time.Second
	}
	if bits != nil {
		s.ProofOfWorkBits = *bits
	}
	if opensAt != nil {
		s.OpensAt = *opensAt
	}
	return s, s.Validate()
}

// Validate checks the bounds, with a message naming the field.
func (s WaitingRoom) Validate() error {
	switch {
	case s.AdmitPerSecond < 1 || s.AdmitPerSecond > MaxAdmitPerSecond:
		return order.Errorf(order.ErrInvalidArgument, "waiting_room.admit_per_second must be from 1 to %d", MaxAdmitPerSecond)
	case s.AdmissionTTL < MinAdmissionTTL || s.AdmissionTTL > MaxAdmissionTTL || s.AdmissionTTL%time.Second != 0:
		return order.Errorf(order.ErrInvalidArgument, "waiting_room.admission_ttl_seconds must be from %d to %d",
			int(MinAdmissionTTL/time.Second), int(MaxAdmissionTTL/time.Second))
	case s.ProofOfWorkBits < 0 || s.ProofOfWorkBits > MaxProofOfWorkBits:
		return order.Errorf(order.ErrInvalidArgument, "waiting_room.proof_of_work_bits must be from 0 to %d", MaxProofOfWorkBits)
	}
	return nil
}

// CheckRoom checks the sale's room against the sale's other settings.
func (a Activity) CheckRoom() error {
	switch {
	case !a.Room.On():
		return nil
	case a.StockBuckets > 1:
		// The room paces the crowd, so no key is hot; and its scripts read
		// every item's stock in the sale's slot.
		return order.Errorf(order.ErrInvalidArgument, "a sale with a waiting_room keeps one stock key an item: leave stock_buckets out")
	case !a.Room.OpensAt.IsZero() && !a.Room.OpensAt.Before(a.StartsAt):
		return order.Errorf(order.ErrInvalidArgument, "waiting_room.opens_at must be before starts_at")
	}
	return nil
}
