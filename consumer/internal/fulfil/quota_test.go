package fulfil_test

import (
	"context"
	"testing"

	"github.com/seckill/seckill/consumer/internal/fulfil"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// A buyer's quota key lost with Redis data lets a second order of theirs
// through the reserve script; MySQL refuses it (ALREADY_PURCHASED, the
// buyer's first order is live there), and its release must hand the quota
// to that first order, not delete it: deleted, the live order holds no
// quota, the buyer's next attempt passes Redis again, and Redis no longer
// equals MySQL (the replicated soak's seed 2 at 79bfe23: two buyers of
// sale B, each PAID, with no quota key after the drain). A redelivery of
// the refused order, whose release never ran, hands it over too; and a
// DUPLICATE_REQUEST (the key's first order live) likewise.
func TestRefusedSecondOrderHandsTheQuotaToTheLiveOne(t *testing.T) {
	t.Parallel()
	base := newEnv(t)
	for _, tc := range []struct {
		name       string
		redeliver  bool // the refused order's release did not run the first time
		sameKey    bool // the second order reuses the first's key: DUPLICATE_REQUEST
		wantReason string
	}{
		{"already purchased", false, false, order.ReasonAlreadyPurchased},
		{"already purchased, redelivered", true, false, order.ReasonAlreadyPurchased},
		{"duplicate request", false, true, order.ReasonDuplicateRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := base.with(t)
			ctx := context.Background()
			s := e.newSale(10, 1)
			first := e.reserve(s, 7, 1)
			if res := e.handler.Handle(ctx, []order.Event{first}); fulfil.OutcomeOf(res[0]) != fulfil.Created {
				t.Fatalf("first order: %s %v", fulfil.OutcomeOf(res[0]), res[0].Err)
			}
			quota := e.store.Keys(reservation.One(s.item)).Quota(s.activity, "7")
			// Redis loses the buyer's quota (a failover to a lagging
			// replica): a second order passes the reserve script.
			if err := e.rdb.Del(ctx, quota).Err(); err != nil {
				t.Fatal(err)
			}
			second := e.event(s, 7, 1)
			if tc.sameKey {
				second.IdempotencyKey = first.IdempotencyKey
				// The key's record went with the quota.
				if err := e.rdb.Del(ctx, e.store.Keys(reservation.One(s.item)).Idem("7", first.IdempotencyKey)).Err(); err != nil {
					t.Fatal(err)
				}
			}
			second = e.reserveEvent(s, second)
			if got := e.rdb.Get(ctx, quota).Val(); got != second.OrderNo {
				t.Fatalf("quota after the second reserve holds %q, want %s", got, second.OrderNo)
			}
			if tc.redeliver {
				// The consumer wrote the refusal and died before its
				// release: the redelivery finds the order in MySQL.
				if _, err := e.db.Orders.FulfilOne(ctx, order.FulfilRequest{Event: second}); err != nil {
					t.Fatal(err)
				}
			}
			want := fulfil.Failed
			if tc.redeliver {
				want = fulfil.Existing
			}
			if res := e.handler.Handle(ctx, []order.Event{second}); fulfil.OutcomeOf(res[0]) != want {
				t.Fatalf("second order: %s %v, want %s", fulfil.OutcomeOf(res[0]), res[0].Err, want)
			}
			o, err := e.db.Orders.Order(ctx, second.OrderNo)
			if err != nil || o.Status != order.Failed || o.FailureReason != tc.wantReason {
				t.Fatalf("second order in MySQL: %+v %v, want FAILED %s", o, err, tc.wantReason)
			}
			if got := e.state(second); got != reservation.StateReleased {
				t.Errorf("second reservation %s, want RELEASED", got)
			}
			if got := e.rdb.Get(ctx, quota).Val(); got != first.OrderNo {
				t.Errorf("quota after the refusal holds %q, want the live order %s", got, first.OrderNo)
			}
			// The release's answer lost: the event comes again, and the
			// release runs again on a reservation already RELEASED.
			// (The claim finds it released: skipped, done.)
			if res := e.handler.Handle(ctx, []order.Event{second}); fulfil.OutcomeOf(res[0]) != fulfil.Skipped {
				t.Fatalf("second order again: %s %v, want %s", fulfil.OutcomeOf(res[0]), res[0].Err, fulfil.Skipped)
			}
			if got := e.rdb.Get(ctx, quota).Val(); got != first.OrderNo {
				t.Errorf("quota after the release ran twice holds %q, want the live order %s", got, first.OrderNo)
			}
			// The buyer's third attempt is refused by Redis itself.
			third := e.event(s, 7, 1)
			_, err = e.store.Reservations.Reserve(ctx, e.reservationOf(third))
			if err != order.ErrAlreadyPurchased {
				t.Errorf("a third order: %v, want %v", err, order.ErrAlreadyPurchased)
			}
			e.wantStock(s.item, 9)
		})
	}
}
