package drawer

import (
	"sync"

	"github.com/seckill/seckill/pkg/domain/draw"
)

// held is what a sale's picks that could not have their order now hold
// back in this pass, by size (item id). Safe for concurrent use.
type held struct {
	mu sync.Mutex
	// winners: a winner of the size has no reservation (refused, failed
	// or backed off): its units are not free for an alternate.
	winners map[int64]bool
	// alternates: an alternate of the size failed or is backed off: the
	// ones after it wait, in rank order.
	alternates map[int64]bool
}

func newHeld() *held { return &held{winners: map[int64]bool{}, alternates: map[int64]bool{}} }

// hold records that p could not have its order now.
func (h *held) hold(p draw.Picked) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.Outcome == draw.Won {
		h.winners[p.ItemID] = true
	} else {
		h.alternates[p.ItemID] = true
	}
}

// size reports whether the alternates of item wait this pass: a winner of
// it or an alternate before them is held.
func (h *held) size(item int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.winners[item] || h.alternates[item]
}
