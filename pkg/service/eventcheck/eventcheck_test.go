package eventcheck_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/relaytest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/draws"
	"github.com/seckill/seckill/pkg/service/eventcheck"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// world is a database with a sale's orders in every state and a draw
// sale's entries, the outbox relayed to a topic of its own.
type world struct {
	db    *mysqltest.DB
	topic string
	sale  int64
	draw  int64
	// orders by number: what each became.
	paid, closed, refunded, failed []string
}

func (w *world) checker() *eventcheck.Checker {
	return &eventcheck.Checker{Tx: w.db, Store: w.db.Streams}
}

// newWorld writes 30 orders of a sale of 24 units, in three consumer
// batches at once (6 fail, out of stock), then pays, cancels, pays and
// cancels at once, and pays cancelled orders (a refund owed), all at once,
// and runs a draw of 5 entries for 2 units, while three relays publish the
// outbox (one dying after its first batches, so some events are on the
// topic twice); it returns once the outbox has drained.
func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	db := mysqltest.New(t)
	w := &world{db: db, topic: kafkatest.NewTopic(t, 4)}
	kw := orderevents.NewOutboxWriter(orderevents.Config{Brokers: kafkatest.Brokers()}, w.topic)
	t.Cleanup(func() { _ = kw.Close() })
	stop := relaytest.Run(db, 5, kw, kw, relaytest.Dying(kw, 2))

	price := order.Money{Amount: 900, Currency: "EUR"}
	a := db.OpenSale(t, 24, price)
	w.sale = a.ID
	gen := order.NewNumberGenerator()
	var reqs []order.FulfilRequest
	for u := 1; u <= 30; u++ {
		reqs = append(reqs, order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: gen.Next(a.ItemID),
			IdempotencyKey: "k", UserID: strconv.Itoa(u), ItemID: a.ItemID, ActivityID: a.ID, Quantity: 1, ReservedAt: time.Now()},
			PayDeadline: time.Now().Add(time.Hour), UnitPrice: price})
	}
	var wg sync.WaitGroup
	for batch := range slices.Chunk(reqs, 10) {
		wg.Go(func() {
			if _, err := mysqltest.Fulfil(ctx, db.DB, batch); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	rdb, prefix := redistest.New(t)
	svc := &lifecycle.Service{Tx: db, Events: db.Outbox, DB: db.Orders, Payments: db.Payments,
		Stock: stockredis.New(rdb, prefix).Reservations, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	w.change(t, svc, reqs)
	w.draw = runDraw(t, db)

	relaytest.WaitDrained(t, db)
	stop()
	return w
}

// change moves the sale's orders on, all at once: of every five created,
// one is paid, one cancelled, one paid and cancelled at once (one wins),
// one cancelled and then paid (a refund owed), one left as it is.
func (w *world) change(t *testing.T, svc *lifecycle.Service, reqs []order.FulfilRequest) {
	t.Helper()
	ctx := context.Background()
	var created []order.Event
	for _, r := range reqs {
		o, err := w.db.Orders.Order(ctx, r.Event.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status == order.Failed {
			w.failed = append(w.failed, o.OrderNo)
			continue
		}
		created = append(created, r.Event)
	}
	var wg sync.WaitGroup
	do := func(f func() error) {
		wg.Go(func() {
			if err := f(); err != nil && !errors.Is(err, order.ErrNotPayable) && !errors.Is(err, order.ErrNotCancellable) {
				t.Error(err)
			}
		})
	}
	pay := func(e order.Event) func() error {
		return func() error { _, err := svc.Pay(ctx, e.UserID, e.OrderNo); return err }
	}
	cancel := func(e order.Event) func() error {
		return func() error { _, err := svc.Cancel(ctx, e.UserID, e.OrderNo); return err }
	}
	for i, e := range created {
		switch i % 5 {
		case 0:
			do(pay(e))
		case 1:
			do(cancel(e))
		case 2:
			do(pay(e))
			do(cancel(e))
		case 3:
			do(func() error {
				if err := cancel(e)(); err != nil {
					return err
				}
				_, err := svc.RecordPayment(ctx, "tx-"+e.OrderNo, e.OrderNo, order.Money{Amount: 900, Currency: "EUR"})
				return err
			})
		}
	}
	wg.Wait()
	for i, e := range created {
		o, err := w.db.Orders.Order(ctx, e.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i%5 == 3:
			w.refunded = append(w.refunded, e.OrderNo)
		case o.Status == order.Paid:
			w.paid = append(w.paid, e.OrderNo)
		case o.Status == order.Closed:
			w.closed = append(w.closed, e.OrderNo)
		}
	}
	if len(w.failed) != 6 || len(w.paid) < 4 || len(w.closed) < 4 || len(w.refunded) != 5 {
		t.Fatalf("failed %d, paid %d, closed %d, refunded %d", len(w.failed), len(w.paid), len(w.closed), len(w.refunded))
	}
}

// runDraw makes a draw sale of 2 units, enters 5 buyers and runs it.
func runDraw(t *testing.T, db *mysqltest.DB) int64 {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	a, closes := db.OpenDraw(t, 2, now)
	s := &draws.Service{Tx: db, Store: db.Draws, Events: db.Outbox, Now: func() time.Time { return now }}
	for u := range 5 {
		if _, _, err := s.Enter(ctx, a, "d"+strconv.Itoa(u), 0, 1, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := s.Run(ctx, a.ID, closes); err != nil || !res.Ran {
		t.Fatalf("the draw: %+v, %v", res, err)
	}
	return a.ID
}

// delivered is what the topic holds, partition after partition, each in
// the order Kafka holds it (a reader of one partition gets it so).
func (w *world) delivered(t *testing.T) []outbox.Event {
	t.Helper()
	return kafkatest.ReadEvents(t, w.topic)
}

func (w *world) check(t *testing.T, delivered []outbox.Event) eventcheck.Report {
	t.Helper()
	rep, err := w.checker().Check(context.Background(), []int64{w.sale, w.draw}, delivered)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// committed counts the outbox's events.
func (w *world) committed(t *testing.T) int {
	t.Helper()
	all, _, err := w.db.Outbox.Since(context.Background(), 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	return len(all)
}

// kinds lists the report's violations as "kind stream id" lines, sorted.
func kinds(rep eventcheck.Report) string {
	var s []string
	for _, v := range rep.Violations {
		s = append(s, strings.TrimSpace(fmt.Sprintf("%s %s %s", v.Kind, v.Stream, v.ID)))
	}
	slices.Sort(s)
	return strings.Join(s, "\n")
}
