package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/seckill/seckill/pkg/domain/draw"
)

// drawCheck is what the run found of one draw sale.
type drawCheck struct {
	activity         int64
	state            string
	entries, won     int
	numbered, issued int64
	promoted         int64
	problems         []string
}

// checkDraws checks every draw sale the run covers (--activity, or the
// ones ending within --window of now): once drawn, its published record
// recomputes (draw.Verifier on MySQL's rows, a page at a time), no order of the sale is
// another than its picks', and every pick whose event reached Kafka has
// its order in MySQL (read again after --recheck before it counts, as an
// order may be on its way). It writes nothing.
func (r *reconciler) checkDraws(ctx context.Context) ([]drawCheck, error) {
	var ids []int64
	if len(r.opts.activities) > 0 {
		ids = r.opts.activities
	} else if len(r.opts.items) > 0 {
		return nil, nil // an item-only run leaves the draws out
	}
	sales, err := r.db.Draws.DrawSales(ctx, r.checker.Now().Add(-r.opts.window), ids)
	if err != nil {
		return nil, err
	}
	var out []drawCheck
	for _, id := range sales {
		head, _, err := r.db.Draws.DrawHead(ctx, id)
		if err != nil {
			return nil, err
		}
		c := drawCheck{activity: id, state: head.State}
		if head.State != draw.StateDrawn {
			out = append(out, c)
			continue
		}
		// Checked a page at a time, as verify-draw checks the api's.
		v := draw.NewVerifier()
		v.Head(head)
		err = r.db.Draws.DrawRanking(ctx, id, func(page []draw.Ranked) error {
			for _, e := range page {
				v.Add(e)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		c.entries, c.won = v.Entries()
		if err := v.Err(); err != nil {
			c.problems = append(c.problems, "the record does not recompute: "+err.Error())
		}
		audit, err := r.db.Draws.DrawAudit(ctx, id)
		if err != nil {
			return nil, err
		}
		if audit.Missing > 0 {
			select {
			case <-time.After(r.opts.recheck):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if audit, err = r.db.Draws.DrawAudit(ctx, id); err != nil {
				return nil, err
			}
		}
		c.numbered, c.issued, c.promoted = audit.Numbered, audit.Issued, audit.Promoted
		if audit.Stray > 0 {
			c.problems = append(c.problems, fmt.Sprintf("%d orders of the sale belong to no pick of its draw", audit.Stray))
		}
		if audit.Missing > 0 {
			c.problems = append(c.problems, fmt.Sprintf("%d picks were issued but their orders are not in MySQL", audit.Missing))
		}
		out = append(out, c)
	}
	return out, nil
}

// writeDraws prints the draws' lines below the report's table.
func writeDraws(w io.Writer, checks []drawCheck) error {
	if len(checks) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w, "\nDraws:"); err != nil {
		return err
	}
	for _, c := range checks {
		var err error
		switch {
		case c.state != draw.StateDrawn:
			_, err = fmt.Fprintf(w, "  activity %d: %s, not drawn yet\n", c.activity, c.state)
		case len(c.problems) == 0:
			_, err = fmt.Fprintf(w, "  activity %d: holds (%d entries, %d won, %d alternates given units since; %d of %d orders issued)\n",
				c.activity, c.entries, c.won, c.promoted, c.issued, c.numbered)
		default:
			_, err = fmt.Fprintf(w, "  activity %d: DRIFT\n", c.activity)
			for _, p := range c.problems {
				if err == nil {
					_, err = fmt.Fprintf(w, "    - %s\n", p)
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
