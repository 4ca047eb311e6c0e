package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/verify"
)

// The codes scenario (issue 45, item 5): presale codes on the hot path.
// Three runs in one session:
//
//   - codes-off: flash's load on an open sale;
//   - codes-on: the same load on a sale that takes only codes
//     ("access": "code_required"), after 100,000 codes were generated for
//     it through the admin API: request n carries code n mod 100,000, so
//     past the first 100,000 requests the crowd sends codes already tried;
//     checked afterwards: no code held by two live orders, every live
//     order holds one, and MySQL's count of used codes is the live orders';
//   - codes-priority: a room sale whose code holders go first
//     ("access": "code_priority"): buyers without a code join first, then
//     the code holders; after the start every buyer polls until admitted,
//     and every holder's admission must be older than every other
//     buyer's (an admission's expiry is its admission time plus the
//     room's fixed lifetime).
//
// The figure read against the goal is codes-on's requests/s
// against codes-off's (within 10 %).

const (
	// codesGenerated is how many codes the sale of codes-on gets.
	codesGenerated = 100_000
	// codesPlain and codesHolders are the priority room's buyers without
	// and with a code.
	codesPlain, codesHolders = 2000, 500
	// codesAdmitRate is the priority room's pace: slow enough that the
	// holders' turns and the others' are seconds apart.
	codesAdmitRate = 500
	// codesStartMargin is from the last join to the priority sale's
	// start.
	codesStartMargin = 2 * time.Second
	// codesPollFor bounds the priority room's polls after its start.
	codesPollFor = 60 * time.Second
)

// The scenario's invariants, beside verify's.
const (
	invCodeOnce      = "no code held by two live orders"
	invCodeEveryLive = "every live order of a code-only sale holds a code"
	invCodeCount     = "MySQL's used codes equal the live orders"
	invHoldersFirst  = "every code holder admitted before any other buyer"
	invAllAdmitted   = "every buyer of the priority room admitted"
)

// codesScenario runs the codes scenario's three runs.
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

	pr, note, err := e.codesPriority(ctx, sh)
	if pr != nil {
		runs = append(runs, pr)
	}
	if note != "" {
		notes = append(notes, note)
	}
	return runs, notes, err
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

// codesPriority runs codes-priority: codesPlain buyers join a
// code_priority room, then codesHolders join with a code each; after the
// start everyone polls until admitted. Its run's figures are the joins';
// the note gives the admissions' order.
func (e *env) codesPriority(ctx context.Context, sh shape) (*report.Run, string, error) {
	const name = "codes-priority"
	n := codesPlain + codesHolders
	base := userBase()
	tk, err := e.mintTokens(name, base, int64(n))
	if err != nil {
		return nil, "", err
	}
	conns := min(sh.connections, 200)
	b, err := e.newBuyers(e.apis, conns, 0, e.opts.quantity, tk)
	if err != nil {
		return nil, "", err
	}
	defer b.close()
	now := time.Now().UTC()
	// The start leaves time for the joins at a few hundred a second.
	starts := now.Add(time.Duration(n)*4*time.Millisecond + 5*time.Second).Truncate(time.Millisecond)
	s, err := e.makeSale(ctx, name, int64(n*e.opts.quantity), e.opts.quantity, map[string]any{
		"starts_at": starts, "ends_at": now.Add(3 * time.Hour), "access": "code_priority",
		"waiting_room": map[string]any{"admit_per_second": codesAdmitRate, "admission_ttl_seconds": queueAdmissionTTL},
	})
	if err != nil {
		return nil, "", err
	}
	var gen struct {
		Codes []string `json:"codes"`
	}
	if err := e.adminCall(ctx, http.MethodPost, fmt.Sprintf("/admin/v1/activities/%d/codes", s.activity),
		map[string]any{"count": codesHolders, "uses": 1}, &gen, http.StatusCreated); err != nil {
		return nil, "", err
	}
	if len(gen.Codes) != codesHolders {
		return nil, "", fmt.Errorf("%s: %d codes generated, want %d", name, len(gen.Codes), codesHolders)
	}
	urls := queueURLs(e.apis, s.activity)
	// join sends buyer i's join (a holder's with its code); every
	// answer must be WAITING.
	join := func(ctx context.Context, w int, i int) load.Outcome {
		c := load.Call{Method: http.MethodPost, Token: tk.For(base + int64(i))}
		if i >= codesPlain {
			c.Body = fmt.Appendf(nil, `{"access_code":%q}`, gen.Codes[i-codesPlain])
		}
		st, body := b.do(ctx, w, urls, c)
		o := load.Classify(st, body)
		if o == load.Accepted && !bytes.Contains(body, stateWaiting) {
			return load.ClientError
		}
		return o
	}
	b.t0 = time.Now()
	stopCPU := e.measureCPU()
	plain := load.Run(ctx, load.Config{Workers: conns, Ops: codesPlain},
		func(ctx context.Context, w int, seq int64) load.Outcome { return join(ctx, w, int(seq)) })
	holders := load.Run(ctx, load.Config{Workers: conns, Ops: codesHolders},
		func(ctx context.Context, w int, seq int64) load.Outcome { return join(ctx, w, codesPlain+int(seq)) })
	cpu := stopCPU()
	joinsEnd := time.Now()
	r := runResult(name, shape{connections: conns, stock: s.stock}, s, plain)
	r.CPU, r.Buyers = cpu, int64(n)
	r.Violations = []verify.Violation{} // it places no order
	refused := errorCount(plain) + errorCount(holders)
	if ctx.Err() != nil {
		return r, "", ctx.Err()
	}
	if time.Until(starts) < codesStartMargin {
		return r, "", fmt.Errorf("%s: the joins ended %.1f s before the start, want %s: the machine is too slow for this room", name,
			time.Until(starts).Seconds(), codesStartMargin)
	}

	// The polls: each worker polls its buyers not yet admitted, until all
	// are or codesPollFor passed the start.
	select {
	case <-ctx.Done():
		return r, "", ctx.Err()
	case <-time.After(time.Until(starts)):
	}
	admittedAt := pollAdmissions(ctx, b, urls, tk, base, n, conns, time.Now().Add(codesPollFor))
	lastHolder, firstPlain, violations := holdersFirst(admittedAt)
	r.Violations = append(r.Violations, violations...)
	missing := 0
	for _, at := range admittedAt {
		if at <= 0 {
			missing++
		}
	}
	note := fmt.Sprintf("codes-priority: %d buyers joined without a code, then %d with one (%d joins refused; joins ended %.1f s before the start); the last holder was admitted %d ms after the start, the first buyer without a code %d ms after it; %d not admitted.",
		codesPlain, codesHolders, refused, starts.Sub(joinsEnd).Seconds(), lastHolder-queueAdmissionTTL*1000-starts.UnixMilli(),
		firstPlain-queueAdmissionTTL*1000-starts.UnixMilli(), missing)
	e.meter.say("%s", note)
	return r, note, nil
}

// admissionExpiry is the expiry (Unix ms) an admission token carries
// ("<version>.<activity>.<expires>.<user>...", docs/admission.md), or -1.
func admissionExpiry(token string) int64 {
	parts := strings.SplitN(token, ".", 4)
	if len(parts) < 4 {
		return -1
	}
	ms, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || ms <= 0 {
		return -1
	}
	return ms
}

// pollAdmissions polls n buyers (user base+i) on conns workers until each is
// admitted or deadline passes, and returns each one's admission expiry
// (Unix ms; 0: not admitted).
func pollAdmissions(ctx context.Context, b *buyers, urls []string, tk *tokens, base int64, n, conns int, deadline time.Time) []int64 {
	admittedAt := make([]int64, n)
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				waiting := 0
				for i := w; i < n; i += conns {
					if admittedAt[i] != 0 {
						continue
					}
					waiting++
					st, body := b.do(ctx, w, urls, load.Call{Method: http.MethodGet, Token: tk.For(base + int64(i))})
					if load.Classify(st, body) == load.Accepted && bytes.Contains(body, stateAdmitted) {
						admittedAt[i] = admissionExpiry(jsonString(body, "admission"))
					}
				}
				if waiting == 0 {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	return admittedAt
}

// holdersFirst checks the priority room's admissions (buyers below
// codesPlain joined without a code): every buyer admitted, and none without
// a code before the last holder. It returns the last holder's and the
// first other buyer's admission expiries.
func holdersFirst(admittedAt []int64) (lastHolder, firstPlain int64, out []verify.Violation) {
	missing, before := 0, 0
	for i, at := range admittedAt {
		switch {
		case at <= 0:
			missing++
		case i >= codesPlain:
			lastHolder = max(lastHolder, at)
		case firstPlain == 0 || at < firstPlain:
			firstPlain = at
		}
	}
	for i := range codesPlain {
		if admittedAt[i] > 0 && admittedAt[i] < lastHolder {
			before++
		}
	}
	if missing > 0 {
		out = append(out, verify.Violation{Invariant: invAllAdmitted, By: int64(missing),
			Detail: fmt.Sprintf("%d of %d buyers were not admitted within %s of the start", missing, len(admittedAt), codesPollFor)})
	}
	if before > 0 {
		out = append(out, verify.Violation{Invariant: invHoldersFirst, By: int64(before),
			Detail: fmt.Sprintf("%d buyers without a code were admitted before the last code holder", before)})
	}
	return lastHolder, firstPlain, out
}
