package draws

import (
	"context"
	"errors"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Guesses counts the invalid presale codes buyers and client addresses
// send (*stockredis.Reservations), the orders' and the entries' alike, so
// guessing codes is slow on either path.
type Guesses interface {
	Guesses(ctx context.Context, item reservation.Item, activityID int64, user, addr string) (byBuyer, byAddr int64, err error)
	Guessed(ctx context.Context, item reservation.Item, activityID int64, user, addr string, buyer, address access.GuessLimit) error
}

// accessCode is the digest of the code an entry of user in a uses ("" when
// the sale takes entries without one), or why the entry may not go on: no
// code in a code_required sale, too many invalid codes lately from this
// buyer or address (addr: the api's address bucket; checked before the
// code, so a guesser over the limit learns nothing more), or a code that
// cannot be one (counted as a guess). It is checked before the buyer's
// entry is looked for, so a retry names its code again (and uses nothing
// more: entry_take.lua finds the entry first).
func (s *Service) accessCode(ctx context.Context, a activity.Activity, user, code, addr string) (access.Digest, error) {
	if a.AccessMode() != access.CodeRequired {
		return "", nil
	}
	if code == "" {
		return "", access.ErrCodeRequired
	}
	if s.Accepting == nil || s.Accepting.Key == nil {
		return "", errors.New("draws: a sale with codes, and no code key (Service.Accepting.Key)")
	}
	if g := s.Accepting.Guesses; g != nil {
		byBuyer, byAddr, err := g.Guesses(ctx, reservation.One(a.ItemID), a.ID, user, addr)
		if err != nil {
			return "", err
		}
		if s.Accepting.PerBuyer.Over(byBuyer) || s.Accepting.PerAddr.Over(byAddr) {
			return "", access.ErrTooManyGuesses
		}
	}
	norm, err := access.Normalize(code)
	if err != nil {
		s.guessed(ctx, a, user, addr)
		return "", access.ErrCodeInvalid
	}
	return access.Hash(s.Accepting.Key, a.ID, norm), nil
}

// guessed counts an invalid code from user and addr in a. A count that
// fails is logged and the answer stands: the limit is a brake on
// guessing, and a Redis that cannot count cannot check a code either.
func (s *Service) guessed(ctx context.Context, a activity.Activity, user, addr string) {
	g := s.Accepting.Guesses
	if g == nil {
		return
	}
	err := g.Guessed(ctx, reservation.One(a.ItemID), a.ID, user, addr, s.Accepting.PerBuyer, s.Accepting.PerAddr)
	if err != nil && s.Accepting.Log != nil {
		s.Accepting.Log.WarnContext(ctx, "invalid access code not counted", "activity_id", a.ID, "err", err)
	}
}
