package fulfil_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/consumer/internal/fulfil"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// An instance sold on a copy of the sale older than MySQL's: orders
// reserved after an end or a cancel it had not seen, and an order above a
// per-user limit lowered before the start (the PATCH raced against it).
// MySQL's row decides in the transaction that writes the orders: each ends
// FAILED with a reason the buyer sees, its reservation released and its
// units back in both stores, never CREATED and never dead-lettered; the
// order reserved before the end is created. Whole batches and the
// order-by-order path (MySQL short of stock) alike.
func TestHandleRefusesWhatMySQLsSaleRefuses(t *testing.T) {
	t.Parallel()
	base := newEnv(t)
	for _, tc := range []struct {
		name    string
		dbStock int64 // MySQL's stock, below Redis's 10 to force the order-by-order path; -1 leaves it
	}{
		{"whole batch", -1},
		{"order by order", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := base.with(t)
			ctx := context.Background()
			ended, cancelled := e.newSale(10, 1), e.newSale(10, 1)
			before := e.reserve(ended, 1, 1)
			over := e.reserve(ended, 2, 2) // the instance still had a limit of 2
			end, err := e.db.Activities.EndActivity(ctx, ended.activity, time.Now(), activity.EndNow)
			if err != nil {
				t.Fatal(err)
			}
			cancel, err := e.db.Activities.EndActivity(ctx, cancelled.activity, time.Now(), activity.CancelNow)
			if err != nil {
				t.Fatal(err)
			}
			afterEnd := e.reserve(ended, 3, 1)
			afterCancel := e.reserve(cancelled, 4, 1)
			// The times the events carry, from the instances' clock: MySQL
			// keeps ends_at to the millisecond, and an order reserved at
			// the end itself is after it.
			before.ReservedAt, over.ReservedAt = end.EndsAt.Add(-time.Millisecond), end.EndsAt.Add(-time.Millisecond)
			afterEnd.ReservedAt, afterCancel.ReservedAt = end.EndsAt, cancel.EndsAt.Add(time.Millisecond)
			if tc.dbStock >= 0 {
				for _, s := range []sale{ended, cancelled} {
					if err := e.db.Activities.SetItemStock(ctx, s.item, tc.dbStock); err != nil {
						t.Fatal(err)
					}
				}
			}
			batch := []order.Event{before, over, afterEnd, afterCancel}
			beforeWant := struct {
				out    fulfil.Outcome
				reason string
			}{fulfil.Created, ""}
			if tc.dbStock == 0 {
				beforeWant.out, beforeWant.reason = fulfil.Failed, order.ReasonOutOfStock
			}
			want := []struct {
				out    fulfil.Outcome
				reason string
			}{beforeWant, {fulfil.Failed, order.ReasonOverLimit},
				{fulfil.Failed, order.ReasonSaleEnded}, {fulfil.Failed, order.ReasonSaleCancelled}}
			res := e.handler.Handle(ctx, batch)
			for i, ev := range batch {
				if fulfil.OutcomeOf(res[i]) != want[i].out {
					t.Errorf("event %d: %s %v, want %s", i, fulfil.OutcomeOf(res[i]), res[i].Err, want[i].out)
					continue
				}
				o, err := e.db.Orders.Order(ctx, ev.OrderNo)
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if want[i].out == fulfil.Failed && (o.Status != order.Failed || o.FailureReason != want[i].reason) {
					t.Errorf("event %d: order %s %q, want FAILED %q", i, o.Status, o.FailureReason, want[i].reason)
				}
				if want[i].out == fulfil.Failed {
					if got := e.state(ev); got != reservation.StateReleased {
						t.Errorf("event %d: reservation %s, want RELEASED", i, got)
					}
				}
			}
			if tc.dbStock < 0 {
				e.wantStock(ended.item, 9)
				e.wantStock(cancelled.item, 10)
			}
		})
	}
}
