package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// streamOf reads order no's events and checks what every stream holds:
// seq 1, 2, ... with the ids they give, the order's own fields, times in
// commit order, and a last event stating the status MySQL has.
func streamOf(t *testing.T, db *mysqltest.DB, no string) []outbox.Event {
	t.Helper()
	ctx := context.Background()
	evs, err := db.Outbox.Stream(ctx, no)
	if err != nil {
		t.Fatal(err)
	}
	o, err := db.Orders.Order(ctx, no)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.Data.Seq != i+1 || e.ID != outbox.IDOf(no, i+1) {
			t.Fatalf("order %s: event %d is seq %d id %s", no, i, e.Data.Seq, e.ID)
		}
		if e.Data.OrderNo != no || e.Data.Subject != o.UserID || e.Data.SaleID != o.ActivityID || e.Data.ItemID != o.ItemID ||
			e.Data.Quantity != o.Quantity {
			t.Fatalf("order %s: event %+v does not describe the order %+v", no, e.Data, o)
		}
		if i > 0 && e.Time.Before(evs[i-1].Time) {
			t.Fatalf("order %s: event %d at %s, before the one it follows", no, i, e.Time)
		}
	}
	if len(evs) == 0 || order.Status(evs[len(evs)-1].Data.Status) != o.Status {
		t.Fatalf("order %s is %s in MySQL; its events: %+v", no, o.Status, evs)
	}
	return evs
}

func types(evs []outbox.Event) string {
	s := ""
	for _, e := range evs {
		s += string(e.Type) + " "
	}
	return s
}

// Buyers pay and cancel their orders while the payment provider notifies
// payments, twice each, all at once; then payments arrive for orders
// already cancelled. Each change MySQL committed has exactly one event,
// written with it: created, then paid or closed (never both, never twice
// for a notification sent twice), then a refund owed for a payment of a
// closed order, numbered in the order they committed.
func TestEveryCommittedChangeHasOneEventInOrder(t *testing.T) {
	t.Parallel()
	price := order.Money{Amount: 500, Currency: "EUR"}
	s := newSale(t, 40, 30, price, time.Now().Add(time.Hour))
	svc := s.service()
	ctx := context.Background()
	var wg sync.WaitGroup
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && !errors.Is(err, order.ErrNotPayable) && !errors.Is(err, order.ErrNotCancellable) {
				t.Error(err)
			}
		}()
	}
	for i, e := range s.orders {
		switch i % 3 {
		case 0: // the buyer pays and cancels at once: one of them wins
			run(func() error { _, err := svc.Pay(ctx, e.UserID, e.OrderNo); return err })
			run(func() error { _, err := svc.Cancel(ctx, e.UserID, e.OrderNo); return err })
		case 1:
			run(func() error { _, err := svc.Cancel(ctx, e.UserID, e.OrderNo); return err })
		case 2: // the provider notifies twice
			for range 2 {
				run(func() error { _, err := svc.RecordPayment(ctx, fmt.Sprintf("tx-%d", i), e.OrderNo, price); return err })
			}
		}
	}
	wg.Wait()
	for i, e := range s.orders {
		if i%3 == 1 {
			if _, err := svc.RecordPayment(ctx, fmt.Sprintf("late-%d", i), e.OrderNo, price); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, e := range s.orders {
		evs := streamOf(t, s.db, e.OrderNo)
		first := evs[0]
		if first.Type != outbox.OrderCreated || first.Data.Status != string(order.Created) || first.Data.Amount == nil ||
			*first.Data.Amount != 500 || first.Data.Currency != "EUR" {
			t.Fatalf("order %d's first event: %+v", i, first)
		}
		var want string
		switch last := evs[len(evs)-1]; i % 3 {
		case 0:
			want = "order.created order.paid "
			if last.Data.Status == string(order.Closed) {
				want = "order.created order.closed "
			}
		case 1:
			want = "order.created order.closed refund.owed "
			if last.Data.TransactionID != fmt.Sprintf("late-%d", i) || evs[1].Data.Reason != order.ReasonCancelled {
				t.Fatalf("order %d: %+v", i, evs)
			}
		case 2:
			want = "order.created order.paid "
			if last.Data.TransactionID != fmt.Sprintf("tx-%d", i) {
				t.Fatalf("order %d's payment event: %+v", i, last)
			}
		}
		if got := types(evs); got != want {
			t.Fatalf("order %d's events: %s, want %s", i, got, want)
		}
	}
}

// failingEvents records the events in the unit, then fails: the step after
// the events failed, so the unit rolls back.
type failingEvents struct{ lifecycleEvents }

type lifecycleEvents interface {
	Record(ctx context.Context, evs ...outbox.Event) error
}

var errLater = errors.New("a later write in the unit failed")

func (f failingEvents) Record(ctx context.Context, evs ...outbox.Event) error {
	if err := f.lifecycleEvents.Record(ctx, evs...); err != nil {
		return err
	}
	return errLater
}

// A payment whose unit fails after its event was written leaves neither
// the payment nor the event, and its place in the order's sequence is not
// used up: the retry's event follows the last committed one.
func TestAChangeThatRollsBackLeavesNoEvent(t *testing.T) {
	t.Parallel()
	s := newSale(t, 2, 1, order.Money{}, time.Now().Add(time.Hour))
	e := s.orders[0]
	ctx := context.Background()
	failing := s.service()
	failing.Events = failingEvents{s.db.Outbox}
	if _, err := failing.Pay(ctx, e.UserID, e.OrderNo); !errors.Is(err, errLater) {
		t.Fatalf("pay: %v, want the unit's failure", err)
	}
	if evs := streamOf(t, s.db, e.OrderNo); types(evs) != "order.created " {
		t.Fatalf("after the rolled-back payment: %s", types(evs))
	}
	if _, err := s.service().Pay(ctx, e.UserID, e.OrderNo); err != nil {
		t.Fatal(err)
	}
	if evs := streamOf(t, s.db, e.OrderNo); types(evs) != "order.created order.paid " {
		t.Fatalf("after the payment: %s", types(evs))
	}
}

// A refund owed for a payment of an order paid already is an event of the
// order, not a change of it: the order's updated_at (when its status last
// changed) stays.
func TestAnEventAloneLeavesTheOrdersTimeAsItWas(t *testing.T) {
	t.Parallel()
	price := order.Money{Amount: 500, Currency: "EUR"}
	s := newSale(t, 2, 1, price, time.Now().Add(time.Hour))
	e := s.orders[0]
	ctx := context.Background()
	svc := s.service()
	paid, err := svc.Pay(ctx, e.UserID, e.OrderNo)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := svc.RecordPayment(ctx, "tx-late", e.OrderNo, price); err != nil {
		t.Fatal(err)
	}
	after, err := s.db.Orders.Order(ctx, e.OrderNo)
	if err != nil {
		t.Fatal(err)
	}
	if evs := streamOf(t, s.db, e.OrderNo); types(evs) != "order.created order.paid refund.owed " {
		t.Fatalf("events: %s", types(evs))
	}
	if !after.UpdatedAt.Equal(paid.UpdatedAt) {
		t.Fatalf("updated_at moved from %s to %s with the refund's event", paid.UpdatedAt, after.UpdatedAt)
	}
}
