package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/verify"
)

// The codes scenario (issue 45, item 5): presale codes on the hot path.
// Two runs in one session:
//
//   - codes-off: flash's load on an open sale;
//   - codes-on: the same load on a sale that takes only codes
//     ("access": "code_required"), after 100,000 codes were generated for
//     it through the admin API: request n carries code n mod 100,000, so
//     past the first 100,000 requests the crowd sends codes already tried;
//     checked afterwards: no code held by two live orders, every live
//     order holds one, and MySQL's count of used codes is the live orders'.
//
// The figure read against the goal is codes-on's requests/s
// against codes-off's (within 10 %).

// codesGenerated is how many codes the sale of codes-on gets.
const codesGenerated = 100_000

// The scenario's invariants, beside verify's.
const (
	invCodeOnce      = "no code held by two live orders"
	invCodeEveryLive = "every live order of a code-only sale holds a code"
	invCodeCount     = "MySQL's used codes equal the live orders"
)

// codesScenario runs the codes scenario's two runs.
func (e *env) codesScenario(ctx context.Context, sh shape) ([]*report.Run, []string, error) {
	var runs []*report.Run
	var notes []string
	off, err := e.flash(ctx, "codes-off", sh, 1)
	if off != nil {
		runs = append(runs, off)
	}
	if err != nil {
		return runs, notes, err
	}

	now := time.Now().UTC()
	s, err := e.makeSale(ctx, "codes-on", sh.stock, e.opts.quantity, map[string]any{
		"starts_at": now.Add(-time.Minute), "ends_at": now.Add(3 * time.Hour), "access": "code_required",
	})
	if err != nil {
		return runs, notes, err
	}
	began := time.Now()
	var gen struct {
		Codes []string `json:"codes"`
	}
	if err := e.adminCall(ctx, http.MethodPost, fmt.Sprintf("/admin/v1/activities/%d/codes", s.activity),
		map[string]any{"count": codesGenerated, "uses": 1}, &gen, http.StatusCreated); err != nil {
		return runs, notes, err
	}
	took := time.Since(began)
	if len(gen.Codes) != codesGenerated {
		return runs, notes, fmt.Errorf("codes: %d generated, want %d", len(gen.Codes), codesGenerated)
	}
	e.meter.say("codes: %d codes generated in %.1f s", codesGenerated, took.Seconds())
	bodies := make([][]byte, len(gen.Codes))
	for i, c := range gen.Codes {
		bodies[i] = fmt.Appendf(nil, `{"activity_id":%d,"quantity":%d,"access_code":%q}`, s.activity, s.quantity, c)
	}
	on, err := e.flashAt(ctx, "codes-on", sh, s, func(seq int64) []byte { return bodies[seq%int64(len(bodies))] })
	if on != nil {
		on.Violations = append(on.Violations, e.checkCodes(context.WithoutCancel(ctx), s)...)
		runs = append(runs, on)
	}
	if err != nil {
		return runs, notes, err
	}
	notes = append(notes, fmt.Sprintf("codes: %d codes generated through the admin API in %.1f s; codes-on %.0f requests/s against codes-off %.0f (%+.1f %%); P99 %.2f ms against %.2f ms.",
		codesGenerated, took.Seconds(), on.Throughput, off.Throughput, 100*(on.Throughput/off.Throughput-1), on.Latency.P99Ms, off.Latency.P99Ms))

	return runs, notes, nil
}

// checkCodes reads MySQL for the code-only sale s, once the pipeline
// drained: each code in at most one live order (its uses are 1), every
// live order with a code, and the codes' used counts summing to the live
// orders.
func (e *env) checkCodes(ctx context.Context, s sale) []verify.Violation {
	g := e.db.Gorm().WithContext(ctx)
	var twice, bare, live, used int64
	out := []verify.Violation{}
	fail := func(inv string, by int64, detail string) {
		out = append(out, verify.Violation{Invariant: inv, By: by, Detail: detail})
	}
	if err := g.Raw(`SELECT COUNT(*) FROM (SELECT access_code FROM orders WHERE activity_id = ? AND status IN ('CREATED', 'PAID')
		AND access_code IS NOT NULL GROUP BY access_code HAVING COUNT(*) > 1) t`, s.activity).Scan(&twice).Error; err != nil {
		fail(invCodeOnce, 1, "could not be read: "+err.Error())
		return out
	}
	if err := g.Raw(`SELECT COUNT(*), COALESCE(SUM(access_code IS NULL), 0) FROM orders WHERE activity_id = ? AND status IN ('CREATED', 'PAID')`,
		s.activity).Row().Scan(&live, &bare); err != nil {
		fail(invCodeEveryLive, 1, "could not be read: "+err.Error())
		return out
	}
	if err := g.Raw(`SELECT COALESCE(SUM(used), 0) FROM sale_codes WHERE activity_id = ?`, s.activity).Scan(&used).Error; err != nil {
		fail(invCodeCount, 1, "could not be read: "+err.Error())
		return out
	}
	if twice > 0 {
		fail(invCodeOnce, twice, fmt.Sprintf("%d codes are held by more than one live order", twice))
	}
	if bare > 0 {
		fail(invCodeEveryLive, bare, fmt.Sprintf("%d of %d live orders hold no code", bare, live))
	}
	if used != live {
		fail(invCodeCount, used-live, fmt.Sprintf("sale_codes counts %d uses, MySQL holds %d live orders", used, live))
	}
	return out
}
