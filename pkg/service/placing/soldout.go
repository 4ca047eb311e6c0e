package placing

import (
	"sync/atomic"
	"time"
)

// SoldOutTTL is how long the in-process sold-out flag is trusted before the
// next request asks Redis again (released stock sells again within it).
const SoldOutTTL = time.Second

func (s *Service) flaggedSoldOut(item int64, now time.Time) bool {
	v, ok := s.soldOut.Load(item)
	if !ok {
		return false
	}
	m := v.(soldOutMark)
	if now.Sub(m.at) < SoldOutTTL && m.gen == s.stockGeneration(item) {
		return true
	}
	s.soldOut.CompareAndDelete(item, v)
	return false
}

// soldOutMark is when a reserve found the item sold out, and the item's
// stock generation before that reserve ran.
type soldOutMark struct {
	at  time.Time
	gen uint64
}

func (s *Service) stockGeneration(item int64) uint64 {
	if v, ok := s.stockGen.Load(item); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

// ClearSoldOut forgets the sold-out flag of item (stock came back here),
// and the refusals of reserves that started before: they saw the stock
// without what came back.
func (s *Service) ClearSoldOut(item int64) {
	v, _ := s.stockGen.LoadOrStore(item, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
	s.soldOut.Delete(item)
}
