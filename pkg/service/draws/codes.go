package draws

import (
	"errors"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
)

// accessCode is the digest of the code an entry in a uses ("" when the
// sale takes entries without one), or why the entry may not go on: no
// code in a code_required sale, or a code that cannot be one. It is
// checked before the buyer's entry is looked for, so a retry must name
// its code again (it uses nothing more: entry_take.lua finds the entry
// first).
func (s *Service) accessCode(a activity.Activity, code string) (access.Digest, error) {
	if a.AccessMode() != access.CodeRequired {
		return "", nil
	}
	if code == "" {
		return "", access.ErrCodeRequired
	}
	if s.Accepting == nil || s.Accepting.Key == nil {
		return "", errors.New("draws: a sale with codes, and no code key (Service.Accepting.Key)")
	}
	norm, err := access.Normalize(code)
	if err != nil {
		return "", access.ErrCodeInvalid
	}
	return access.Hash(s.Accepting.Key, a.ID, norm), nil
}
