package stockredis

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// ClaimAll claims the reservations of several sales' orders (RESERVED ->
// CLAIMED, see Claim), one script per sale, all in one pipeline: one round
// trip on a single node, one per node on a cluster. It returns each sale's
// states (in the order of its order numbers) or its error; every step is
// idempotent, so a sale whose answer was lost is simply claimed again.
func (s *Reservations) ClaimAll(ctx context.Context, sales []reservation.SaleOrders) ([][]reservation.State, []error) {
	calls := make([]scriptCall, len(sales))
	for i, sale := range sales {
		k := s.keys(reservation.One(sale.Tag))
		nos := sale.OrderNos[0]
		keys := make([]string, len(nos))
		for j, no := range nos {
			keys[j] = k.Reservation(no)
		}
		calls[i] = scriptCall{ctx: sale.Ctx, item: reservation.One(sale.Tag), size: len(nos), keys: keys}
	}
	cmds, errs := s.pipelined(ctx, "claim", s.claim, calls)
	states := make([][]reservation.State, len(sales))
	for i, cmd := range cmds {
		if errs[i] != nil {
			continue
		}
		res, err := cmd.StringSlice()
		if err == nil && len(res) != len(calls[i].keys) {
			err = fmt.Errorf("%d states for %d orders", len(res), len(calls[i].keys))
		}
		if err != nil {
			errs[i] = unavailable("claim", err)
			continue
		}
		// (A lost answer is cmd's error, set by pipelined.)
		states[i] = make([]reservation.State, len(res))
		for j, st := range res {
			states[i][j] = reservation.State(st)
		}
	}
	return states, errs
}

// ConfirmAll marks the reservations of several sales' orders committed in
// MySQL as CONFIRMED (see Confirm): one script per sale for all its items,
// all in one pipeline. It returns how many reservations of each sale it
// moved, or the sale's error; confirming is idempotent.
func (s *Reservations) ConfirmAll(ctx context.Context, sales []reservation.SaleOrders) ([]int64, []error) {
	calls := make([]scriptCall, len(sales))
	for i, sale := range sales {
		var keys []string
		args := []any{len(sale.Items)}
		size := 0
		for j, id := range sale.Items {
			args = append(args, len(sale.OrderNos[j]))
			size += len(sale.OrderNos[j])
			k := s.keys(reservation.In(sale.Tag, id))
			keys = append(keys, k.Inflight(), k.Pending())
			for _, no := range sale.OrderNos[j] {
				keys = append(keys, k.Reservation(no))
			}
		}
		for j := range sale.Items {
			for _, no := range sale.OrderNos[j] {
				args = append(args, no)
			}
		}
		calls[i] = scriptCall{ctx: sale.Ctx, item: reservation.One(sale.Tag), size: size, keys: keys, args: args}
	}
	cmds, errs := s.pipelined(ctx, "confirm", s.confirm, calls)
	moved := make([]int64, len(sales))
	for i, cmd := range cmds {
		if errs[i] == nil {
			if moved[i], errs[i] = cmd.Int64(); errs[i] != nil {
				errs[i] = unavailable("confirm", errs[i])
			}
		}
	}
	return moved, errs
}

// scriptCall is one run of a script in a pipeline, with the span it is
// traced in.
type scriptCall struct {
	ctx  context.Context  // the span's parent; nil: the pipeline's
	item reservation.Item // for the span
	size int              // orders, for the span
	keys []string
	args []any
}

// pipelined runs script once per call in one pipeline (EVALSHA, then EVAL
// for the calls a node did not know the script for) and returns each
// call's command, or the error that left it without an answer. Each call
// has a span of its own, under its ctx. The script must be idempotent.
func (s *Reservations) pipelined(ctx context.Context, name string, script *redis.Script, calls []scriptCall) ([]*redis.Cmd, []error) {
	errs := make([]error, len(calls))
	spans := make([]func(error), len(calls))
	for i, c := range calls {
		sctx := c.ctx
		if sctx == nil {
			sctx = ctx
		}
		_, span := s.span(sctx, name, c.item)
		if span.IsRecording() {
			span.SetAttributes(tracing.AttrBatchSize.Int(c.size))
		}
		spans[i] = func(err error) { endSpan(span, err) }
	}
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 1 {
		// Alone, as one command, which the client never sends twice (see
		// noResend).
		c := calls[0]
		cmds[0] = script.Run(ctx, s.rdb, c.keys, c.args...)
		err := cmds[0].Err()
		if err != nil {
			errs[0] = unavailable(name, err)
		}
		spans[0](errs[0])
		return cmds, errs
	}
	// go-redis may send a pipeline again after a lost answer (the cluster
	// client does, whatever the hooks say), so only scripts safe to run
	// twice come here: claim and confirm are.
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = script.EvalSha(ctx, p, c.keys, c.args...)
		}
		return nil
	})
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range again {
				cmds[i] = script.Eval(ctx, p, calls[i].keys, calls[i].args...)
			}
			return nil
		})
	}
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			errs[i] = unavailable(name, err)
		}
		spans[i](errs[i])
	}
	return cmds, errs
}
