package fulfil

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/failpoint"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// settleSales confirms in Redis the orders MySQL wrote, one script per
// sale in one pipeline, and releases those it refused. A failure of a
// sale's confirm retries the sale's events; of a release, only that event.
func (p *Handler) settleSales(ctx context.Context, sales []*saleBatch) {
	// A crash here leaves orders in MySQL whose reservations are CLAIMED
	// and whose offsets are not committed: the redelivery must finish them.
	failpoint.Inject("consumer-after-commit")
	var settling []*saleBatch
	for _, b := range sales {
		if !b.final {
			p.sortOut(ctx, b)
			settling = append(settling, b)
		}
	}
	if len(settling) == 0 {
		return
	}
	p.reportMissing(ctx, settling)
	start := time.Now()
	// Sales with nothing to confirm send nothing.
	var sending []reservation.SaleOrders
	var at []int // index into settling of each of sending
	for i, b := range settling {
		if len(b.confirm.Items) > 0 {
			sending = append(sending, b.confirm)
			at = append(at, i)
		}
	}
	errs := make([]error, len(settling))
	if len(sending) > 0 {
		_, sent := p.Stock.ConfirmAll(ctx, sending)
		for j, i := range at {
			errs[i] = sent[j]
		}
	}
	for i, b := range settling {
		b.bt.step("confirm", start, errs[i], b.confirmIdx)
		if errs[i] != nil {
			b.res = retryAll(len(b.events), errs[i])
			continue
		}
		p.releaseRefused(ctx, b)
	}
}

// sortOut sets the result of each order of b MySQL answered for, and lists
// those to confirm (by item) and those to release.
func (p *Handler) sortOut(ctx context.Context, b *saleBatch) {
	bt, res, reqIdx, out := b.bt, b.res, b.reqIdx, b.out
	b.confirm = reservation.SaleOrders{Ctx: bt.context(ctx), Tag: b.tag}
	b.outOfStock = map[int64]bool{}
	byItem := map[int64]int{} // index into b.confirm.Items
	for j, r := range b.reqs {
		e := r.Event
		o := out[e.OrderNo]
		i := reqIdx[j]
		switch {
		case o.Existing:
			res[i] = result(Existing, nil)
		case o.Status == order.Failed:
			res[i] = result(Failed, nil)
		default:
			res[i] = result(Created, nil)
		}
		if o.Status == order.Failed || o.Status == order.Closed {
			// A CLOSED order is a redelivery whose reservation may be
			// live again: Redis came back from a state older than the
			// close's release, whose credit went with it, while MySQL
			// has the units back. A confirm would keep them out of Redis
			// stock for good; the release gives them back, once (the
			// closer's release, if it has not run, then finds RELEASED).
			if o.Reason == order.ReasonOutOfStock {
				b.outOfStock[e.ItemID] = true
			}
			b.failed = append(b.failed, j)
			continue
		}
		// In-flight sums and pending lists are each item's.
		k, ok := byItem[e.ItemID]
		if !ok {
			k = len(b.confirm.Items)
			byItem[e.ItemID] = k
			b.confirm.Items = append(b.confirm.Items, e.ItemID)
			b.confirm.OrderNos = append(b.confirm.OrderNos, nil)
		}
		b.confirm.OrderNos[k] = append(b.confirm.OrderNos[k], e.OrderNo)
		if bt != nil {
			b.confirmIdx = append(b.confirmIdx, i)
		}
		if b.states[i] == reservation.StateMissing {
			b.missing = append(b.missing, i)
		}
		if !o.Existing {
			octx := bt.orderContext(ctx, i)
			p.Metrics.FulfilDelayTrace(time.Since(e.ReservedAt), tracing.TraceID(octx))
			p.Log.InfoContext(octx, "order created", "order_no", e.OrderNo, "request_id", e.RequestID,
				"user_id", e.UserID, "item_id", e.ItemID, "status", order.Created)
		}
	}
}

// reportMissing tells Losses of the live orders of the batch whose claim
// found no reservation, and answers Retry for them when it cannot: their
// events are final only once it was told.
//
// Such an order was reserved in a Redis that has lost it since (it came
// back from an older state, or failed over to a lagging replica) while its
// event waited in Kafka or in the router's backoff, which reaches 5 s while
// Redis is down. The repair after the loss (the consumer's watch, the
// reconciler) sets Redis from MySQL: stock to MySQL's minus what Redis has
// in flight, quota keys and reservations for the live orders MySQL holds.
// A pass that read MySQL before this order's commit counted its unit as
// unsold and gave its buyer no quota key, and nothing Redis holds tells a
// later pass otherwise: the order has no pending entry and adds nothing in
// flight, and the confirm that follows finds no reservation to move. Here
// is the interleaving (the chaos suite's restore scenarios, one stock key
// or buckets alike):
//
//  1. The API reserves the order in Redis, publishes it, answers 202.
//  2. Redis dies before the consumer claims it; the claim fails and the
//     batch waits out the router's backoff.
//  3. Redis comes back without the order; the watch repairs the item from
//     MySQL (no order yet) and closes the incident after a pass that finds
//     Redis and MySQL agreeing.
//  4. The batch is handled again: the claim finds MISSING, MySQL takes the
//     order and its unit.
//
// Redis then sells that unit a second time (stock one above MySQL for
// good, until MySQL refuses an order as OUT_OF_STOCK after its 202) and
// the buyer can reserve again. The watch had no way to know that the
// orders the loss concerned had all reached MySQL; the claim that finds
// the reservation missing is the evidence, after the commit. So the
// consumer records the loss again (the watch's record in MySQL), and a
// watch runs its checked repair pass after that, which reads MySQL with
// the order in it: it restores the order's reservation and quota key and
// sets the stock. A crash between the commit and the record leaves the
// event not final: its redelivery finds the reservation still missing
// (or restored by a pass that ran after the commit) and tells again.
func (p *Handler) reportMissing(ctx context.Context, sales []*saleBatch) {
	if p.Losses == nil {
		return
	}
	var nos []string
	for _, b := range sales {
		for _, i := range b.missing {
			nos = append(nos, b.events[i].OrderNo)
		}
	}
	if len(nos) == 0 {
		return
	}
	err := p.Losses.ReservationsMissing(ctx, nos)
	if err != nil {
		for _, b := range sales {
			for _, i := range b.missing {
				b.res[i] = result(Retry, fmt.Errorf("record the missing reservation of order %s: %w", b.events[i].OrderNo, err))
			}
		}
		return
	}
	p.Log.WarnContext(ctx, "orders written to MySQL whose reservations Redis lost; Redis is repaired from MySQL after them",
		"orders", len(nos), "order_no", nos[0])
}

// releaseRefused gives back in Redis what the orders of b that MySQL
// refused or closed held, once b's others are confirmed.
func (p *Handler) releaseRefused(ctx context.Context, b *saleBatch) {
	bt, res, states, reqs, reqIdx, out := b.bt, b.res, b.states, b.reqs, b.reqIdx, b.out
	dbStock := map[int64]int64{}
	for item := range b.outOfStock {
		// MySQL had less than Redis believed. Read what it has now (after
		// this batch's orders are confirmed, so they no longer count as in
		// flight): the releases below cap Redis at it.
		n, err := p.Activities.ItemStock(ctx, item)
		if err != nil {
			for _, j := range b.failed {
				res[reqIdx[j]] = result(Retry, err)
			}
			return
		}
		dbStock[item] = n
	}
	for _, j := range b.failed {
		e := reqs[j].Event
		o := out[e.OrderNo]
		capAt, ok := dbStock[e.ItemID]
		if !ok {
			capAt = -1
		}
		if err := p.release(bt.orderContext(ctx, reqIdx[j]), bt.scriptContext(ctx, reqIdx[j]), e, o, states[reqIdx[j]], capAt); err != nil {
			res[reqIdx[j]] = result(Retry, err)
		}
	}
}

// release gives the stock and quota of an order MySQL refused (status
// FAILED) or closed (CLOSED) back in Redis, from a live reservation
// (RESERVED or CLAIMED; a CONFIRMED one of a closed order is the closer's);
// o is what MySQL made of it (not Existing: it became FAILED in this
// batch). For an order MySQL refused for lack of stock, dbStock (>= 0)
// caps Redis stock at what MySQL can still fulfil, in the same script; for
// one refused for the buyer's live order, the quota it took goes to that
// order (o.Holder) instead of being freed.
// The release script runs under sctx's span (the order's, or the batch's
// for an order whose trace is not sampled); ctx is the lines' context.
func (p *Handler) release(ctx, sctx context.Context, e order.Event, o order.FulfilOutcome, claimState reservation.State, dbStock int64) error {
	status, reason, fresh := o.Status, o.Reason, !o.Existing
	log := p.Log.With("order_no", e.OrderNo, "request_id", e.RequestID, "user_id", e.UserID, "item_id", e.ItemID)
	if claimState == reservation.StateMissing {
		// Redis lost the reservation: there is nothing to give back there;
		// the reconciler aligns Redis with MySQL.
		if status == order.Failed {
			log.WarnContext(ctx, "order failed; its reservation is missing in Redis", "reason", reason, "status", status)
		}
		return nil
	}
	ref := reservation.EventRef(e)
	live := []reservation.State{reservation.StateReserved, reservation.StateClaimed}
	var (
		rel reservation.Released
		err error
	)
	if reason == order.ReasonOutOfStock && dbStock >= 0 {
		rel, err = p.Stock.ReleaseCapped(sctx, ref, reservation.ReleaseOptions{Reason: reason, From: live}, dbStock)
	} else {
		// An order the API gave up (it answered 503) frees its idempotency
		// key too, so the buyer's retry with that key tries anew.
		rel, err = p.Stock.Release(sctx, ref, reservation.ReleaseOptions{Reason: reason, From: live,
			FreeKey: order.AnsweredUnavailable(reason), QuotaTo: o.Holder})
	}
	if err != nil {
		return err
	}
	released, state := rel.Released, rel.State
	if status == order.Closed {
		if released {
			log.InfoContext(ctx, "order closed already; its live reservation released", "reason", reason, "status", status)
		}
		return nil
	}
	if released && reason == order.ReasonOutOfStock {
		log.Log(ctx, logs.Alert, "Redis and MySQL disagree: MySQL had no stock for a reservation Redis accepted",
			"reason", reason, "quantity", e.Quantity, "status", order.Failed)
	} else if released {
		log.InfoContext(ctx, "order failed; reservation released", "reason", reason, "status", order.Failed)
	} else if fresh {
		log.InfoContext(ctx, "order failed; reservation already final", "reason", reason, "state", state, "status", order.Failed)
	} else {
		log.Debug("order failed; reservation already final", "state", state)
	}
	return nil
}
