package draws

import (
	"context"

	"github.com/seckill/seckill/pkg/domain/draw"
)

// Summaries read where a sale's draw stands (*orderdb.Draws).
type Summaries interface {
	DrawSummary(ctx context.Context, activity int64) (draw.Summary, error)
}

// Summary reads the sale's draw: its state and entries so far;
// order.ErrNotFound for a sale that is not a draw.
func (s *Service) Summary(ctx context.Context, activity int64) (draw.Summary, error) {
	return s.Summaries.DrawSummary(ctx, activity)
}
