package waitingroom

import (
	"context"
	"errors"
	"log/slog"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// CodeChecker reads a sale's presale codes without using one
// (*stockredis.Codes).
type CodeChecker interface {
	CheckCode(ctx context.Context, sale activity.Activity, d access.Digest, user string) error
}

// Guesses counts the invalid presale codes buyers and client addresses
// send (*stockredis.Reservations), as the orders' and the entries' do.
type Guesses interface {
	Guesses(ctx context.Context, item reservation.Item, activityID int64, user, addr string) (byBuyer, byAddr int64, err error)
	Guessed(ctx context.Context, item reservation.Item, activityID int64, user, addr string, buyer, address access.GuessLimit) error
}

// CodeGuesses bound the invalid codes joins may send: per buyer and per
// address, counted with the orders' and entries' (nil Counter: not
// counted).
type CodeGuesses struct {
	Counter           Guesses
	PerBuyer, PerAddr access.GuessLimit
	Log               *slog.Logger
}

// checkCode lets a join into a code_required sale's room only with a code
// the buyer may use now (one never given, revoked or bound to another
// buyer is access.ErrCodeInvalid, one whose uses are held
// access.ErrCodeUsed). The join uses nothing: the order does, in the
// reserve script, and may still find the code used by then. A
// code_priority sale's join may carry a code: its digest is returned, and
// the join script checks it and takes a use with the place in the lane. Other sales
// ignore the code.
// Too many invalid codes lately from the buyer or their address (addr) is
// access.ErrTooManyGuesses, checked before the code, so a guesser over the
// limit learns nothing more; an invalid code is counted.
func (s *Service) checkCode(ctx context.Context, a activity.Activity, user, code, addr string) (access.Digest, error) {
	mode := a.AccessMode()
	if mode == access.Open || (mode == access.CodePriority && code == "") {
		return "", nil
	}
	if code == "" {
		return "", access.ErrCodeRequired
	}
	if s.Codes == nil || s.CodeKey == nil {
		return "", errors.New("waitingroom: a sale with codes, and no code reader or key (Service.Codes, CodeKey)")
	}
	if g := s.Guesses.Counter; g != nil {
		byBuyer, byAddr, err := g.Guesses(ctx, reservation.One(a.ItemID), a.ID, user, addr)
		if err != nil {
			return "", err
		}
		if s.Guesses.PerBuyer.Over(byBuyer) || s.Guesses.PerAddr.Over(byAddr) {
			return "", access.ErrTooManyGuesses
		}
	}
	norm, err := access.Normalize(code)
	if err != nil {
		s.guessed(ctx, a, user, addr, access.ErrCodeInvalid)
		return "", access.ErrCodeInvalid
	}
	d := access.Hash(s.CodeKey, a.ID, norm)
	if mode == access.CodePriority {
		return d, nil
	}
	err = s.Codes.CheckCode(ctx, a, d, user)
	s.guessed(ctx, a, user, addr, err)
	return "", err
}

// guessed counts the code a join of user from addr in a sent when err says
// it was invalid. A count that fails is logged and the answer stands: the
// limit is a brake on guessing.
func (s *Service) guessed(ctx context.Context, a activity.Activity, user, addr string, err error) {
	g := s.Guesses.Counter
	if g == nil || !errors.Is(err, access.ErrCodeInvalid) {
		return
	}
	if err := g.Guessed(ctx, reservation.One(a.ItemID), a.ID, user, addr, s.Guesses.PerBuyer, s.Guesses.PerAddr); err != nil && s.Guesses.Log != nil {
		s.Guesses.Log.WarnContext(ctx, "invalid access code of a join not counted", "activity_id", a.ID, "err", err)
	}
}
