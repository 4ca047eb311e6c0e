package placing

import (
	"context"
	"errors"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Guesses counts the invalid presale codes buyers and client addresses
// send (*stockredis.Reservations), so guessing codes is slow.
type Guesses interface {
	Guesses(ctx context.Context, item reservation.Item, activityID int64, user, addr string) (byBuyer, byAddr int64, err error)
	Guessed(ctx context.Context, item reservation.Item, activityID int64, user, addr string, buyer, address access.GuessLimit) error
}

// Codes is what the service needs for sales that take orders only with a
// presale code (access.CodeRequired).
type Codes struct {
	// Key is the order number key every instance shares: a code's digest
	// is access.Hash under it.
	Key []byte
	// Guesses counts invalid codes; PerBuyer and PerAddr bound them.
	Guesses           Guesses
	PerBuyer, PerAddr access.GuessLimit
}

// accessCode is the digest of the code r's order uses in act ("" when the
// sale takes orders without one), or why the order may not go on: no code
// in a sale that needs one, too many invalid codes lately from this buyer
// or address (checked before the code, so a guesser over the limit learns
// nothing more), or a code that cannot be one (counted as a guess). A
// sale with priority for code holders takes orders without a code: its
// waiting room read the code when the buyer joined.
func (s *Service) accessCode(ctx context.Context, r PlaceRequest, act activity.Activity, item reservation.Item) (access.Digest, error) {
	if act.Access != access.CodeRequired {
		return "", nil
	}
	if r.AccessCode == "" {
		return "", access.ErrCodeRequired
	}
	if s.Codes.Guesses == nil || s.Codes.Key == nil {
		return "", errors.New("placing: a sale with codes, and no code key or guess counter (Service.Codes)")
	}
	byBuyer, byAddr, err := s.Codes.Guesses.Guesses(ctx, item, act.ID, r.UserID, r.ClientAddr)
	if err != nil {
		return "", err
	}
	if s.Codes.PerBuyer.Over(byBuyer) || s.Codes.PerAddr.Over(byAddr) {
		return "", access.ErrTooManyGuesses
	}
	norm, err := access.Normalize(r.AccessCode)
	if err != nil {
		s.guessed(ctx, r, act, item)
		return "", access.ErrCodeInvalid
	}
	return access.Hash(s.Codes.Key, act.ID, norm), nil
}

// guessed counts an invalid code from r's buyer and address. A count
// that fails is logged and the answer stands: the limit is a brake on
// guessing, and a Redis that cannot count cannot check a code either.
func (s *Service) guessed(ctx context.Context, r PlaceRequest, act activity.Activity, item reservation.Item) {
	if err := s.Codes.Guesses.Guessed(ctx, item, act.ID, r.UserID, r.ClientAddr, s.Codes.PerBuyer, s.Codes.PerAddr); err != nil {
		s.Log.WarnContext(ctx, "invalid access code not counted", "request_id", r.RequestID, "activity_id", act.ID, "err", err)
	}
}

// laneCode is the digest of the code a code_priority sale's order took over
// from its buyer's place in the priority lane (reserve.lua; "" for a buyer
// from the line), read back from the reservation: the event carries it so
// the consumer takes MySQL's use and every close gives it back. The read
// writes nothing, so a lost answer is read again; when it still fails the
// order is given up (503), which gives the place its hold on the use back.
func (s *Service) laneCode(ctx context.Context, orderNo string) (string, error) {
	var err error
	for range 3 {
		var info reservation.Info
		if info, err = s.Reservations.Reservation(ctx, orderNo); err == nil {
			return string(info.Code), nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return "", err
}
