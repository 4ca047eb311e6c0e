package waitingroom

import (
	"context"
	"errors"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
)

// CodeChecker reads a sale's presale codes without using one
// (*stockredis.Codes).
type CodeChecker interface {
	CheckCode(ctx context.Context, sale activity.Activity, d access.Digest, user string) error
}

// checkCode lets a join into a code_required sale's room only with a code
// the buyer may use now (one never given, revoked or bound to another
// buyer is access.ErrCodeInvalid, one whose uses are held
// access.ErrCodeUsed). The join uses nothing: the order does, in the
// reserve script, and may still find the code used by then. Other sales
// ignore the code.
func (s *Service) checkCode(ctx context.Context, a activity.Activity, user, code string) error {
	if a.AccessMode() != access.CodeRequired {
		return nil
	}
	if code == "" {
		return access.ErrCodeRequired
	}
	if s.Codes == nil || s.CodeKey == nil {
		return errors.New("waitingroom: a sale with codes, and no code reader or key (Service.Codes, CodeKey)")
	}
	norm, err := access.Normalize(code)
	if err != nil {
		return access.ErrCodeInvalid
	}
	return s.Codes.CheckCode(ctx, a, access.Hash(s.CodeKey, a.ID, norm), user)
}
