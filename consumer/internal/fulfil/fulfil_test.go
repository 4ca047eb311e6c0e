package fulfil_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/consumer/internal/fulfil"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/fulfilment"
)

// env is one test's Redis prefix and MySQL database, and a handler over
// them whose MySQL sessions wait at most a second for a row lock, so a
// locked row is a transient error within the test's time.
type env struct {
	t       *testing.T
	store   *stockredis.Store
	rdb     redis.UniversalClient
	db      *mysqltest.DB
	handler *fulfil.Handler
	gen     *order.NumberGenerator
	keys    *atomic.Int64
}

// with is e reporting to t (a subtest).
func (e *env) with(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

func newEnv(t *testing.T) *env {
	t.Helper()
	rdb, prefix := redistest.New(t)
	db := mysqltest.New(t)
	sep := "?"
	if strings.Contains(db.DSN, "?") {
		sep = "&"
	}
	hdb, err := orderdb.Open(orderdb.Config{DSN: db.DSN + sep + "innodb_lock_wait_timeout=1", MaxOpenConns: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hdb.Close() })
	store := stockredis.New(rdb, prefix)
	return &env{t: t, store: store, rdb: rdb, db: db, gen: order.NewNumberGenerator(), keys: new(atomic.Int64),
		handler: &fulfil.Handler{Stock: store.Reservations, DB: &fulfilment.Service{Tx: hdb, Orders: hdb.Orders, Events: hdb.Outbox, Draws: hdb.Draws}, Activities: hdb.Activities, PaymentWindow: time.Hour,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
}

// sale is an item with stock units in MySQL and Redis and an activity
// selling it, limit units per user.
type sale struct {
	item, activity int64
}

func (e *env) newSale(stock int64, limit int) sale {
	e.t.Helper()
	ctx := context.Background()
	it, err := e.db.Activities.CreateItem(ctx, "x", stock)
	if err != nil {
		e.t.Fatal(err)
	}
	act, err := e.db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: time.Now().Add(-time.Hour),
		EndsAt: time.Now().Add(time.Hour), PerUserLimit: limit})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Stock.Warmup(ctx, reservation.One(it.ID), 2*time.Hour, func(ctx context.Context) (int64, error) {
		return e.db.Activities.ItemStock(ctx, it.ID)
	}); err != nil {
		e.t.Fatal(err)
	}
	return sale{item: it.ID, activity: act.ID}
}

// reserve reserves qty units for user in Redis and returns the event the
// API would publish.
func (e *env) reserve(s sale, user int64, qty int) order.Event {
	e.t.Helper()
	return e.reserveEvent(s, e.event(s, user, qty))
}

// reserveEvent reserves ev in Redis and returns it.
func (e *env) reserveEvent(s sale, ev order.Event) order.Event {
	e.t.Helper()
	if _, err := e.store.Reservations.Reserve(context.Background(), e.reservationOf(ev)); err != nil {
		e.t.Fatalf("reserve: %v", err)
	}
	return ev
}

// reservationOf is the reservation the API makes for ev.
func (e *env) reservationOf(ev order.Event) reservation.Reservation {
	return reservation.Reservation{OrderNo: ev.OrderNo, UserID: ev.UserID,
		ItemID: ev.ItemID, ActivityID: ev.ActivityID, Quantity: ev.Quantity, IdempotencyKey: ev.IdempotencyKey, At: ev.ReservedAt,
		QuotaTTL: 2 * time.Hour, ReservationTTL: 3 * time.Hour}
}

// event is an event of a new order that was never reserved.
func (e *env) event(s sale, user int64, qty int) order.Event {
	return order.Event{Version: order.EventVersion, OrderNo: e.gen.Next(s.item),
		IdempotencyKey: fmt.Sprintf("k%d", e.keys.Add(1)), UserID: strconv.FormatInt(user, 10), ItemID: s.item,
		ActivityID: s.activity, Quantity: qty, ReservedAt: time.Now(), RequestID: "req"}
}

// state is the reservation's state, or MISSING.
func (e *env) state(ev order.Event) reservation.State {
	e.t.Helper()
	info, err := e.store.Reservations.Reservation(context.Background(), ev.OrderNo)
	if errors.Is(err, order.ErrNotFound) {
		return reservation.StateMissing
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State
}

// status is the order's status in MySQL, or "" when it has no row.
func (e *env) status(no string) order.Status {
	e.t.Helper()
	o, err := e.db.Orders.Order(context.Background(), no)
	if errors.Is(err, order.ErrNotFound) {
		return ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return o.Status
}

// lockItem holds item's item_stock row in an open transaction until the
// returned function is called.
func (e *env) lockItem(item int64) func() {
	e.t.Helper()
	raw, err := sql.Open("mysql", e.db.DSN)
	if err != nil {
		e.t.Fatal(err)
	}
	tx, err := raw.Begin()
	if err != nil {
		e.t.Fatal(err)
	}
	var stock int64
	if err := tx.QueryRow("SELECT stock FROM item_stock WHERE item_id = ? FOR UPDATE", item).Scan(&stock); err != nil {
		e.t.Fatal(err)
	}
	var once atomic.Bool
	unlock := func() {
		if once.CompareAndSwap(false, true) {
			_ = tx.Rollback()
			raw.Close()
		}
	}
	e.t.Cleanup(unlock)
	return unlock
}

// wantStock checks that MySQL and Redis both hold stock units of item,
// with none in flight.
func (e *env) wantStock(item, stock int64) {
	e.t.Helper()
	ctx := context.Background()
	db, err := e.db.Activities.ItemStock(ctx, item)
	if err != nil {
		e.t.Fatal(err)
	}
	snap, err := e.store.Stock.Stock(ctx, reservation.One(item))
	if err != nil {
		e.t.Fatal(err)
	}
	if db != stock || snap.Stock != stock || snap.Inflight != 0 {
		e.t.Errorf("item %d: MySQL %d, Redis %+v; want %d in both with none in flight", item, db, snap, stock)
	}
}

// TestHandleClaimTimesMySQL runs the handler on one event for every state
// the claim can find the reservation in, against every answer MySQL can
// give, and checks the outcome, the reservation's state and the order's
// row. A transient MySQL error (a locked row) leaves the event to retry,
// and the retry, once the row is free, finishes it.
func TestHandleClaimTimesMySQL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const user = 7

	// Each claim setup leaves the reservation of ev in one state.
	claims := []struct {
		name  reservation.State
		setup func(e *env, ev order.Event)
	}{
		{reservation.StateReserved, func(*env, order.Event) {}},
		{reservation.StateClaimed, func(e *env, ev order.Event) {
			if _, err := e.store.Reservations.Claim(ctx, reservation.One(ev.ItemID), []string{ev.OrderNo}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{reservation.StateConfirmed, func(e *env, ev order.Event) {
			if _, err := e.store.Reservations.Claim(ctx, reservation.One(ev.ItemID), []string{ev.OrderNo}); err != nil {
				e.t.Fatal(err)
			}
			if _, err := e.store.Reservations.Confirm(ctx, reservation.One(ev.ItemID), []string{ev.OrderNo}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{reservation.StateReleased, func(e *env, ev order.Event) {
			if rel, err := e.store.Reservations.Release(ctx, reservation.EventRef(ev), reservation.ReleaseOptions{Reason: order.ReasonPublishFailed, From: []reservation.State{reservation.StateReserved}}); err != nil || !rel.Released {
				e.t.Fatalf("release: %v %v", rel.Released, err)
			}
		}},
		{reservation.StateMissing, func(e *env, ev order.Event) {
			if err := e.rdb.Del(ctx, e.store.Keys(reservation.One(ev.ItemID)).Reservation(ev.OrderNo)).Err(); err != nil {
				e.t.Fatal(err)
			}
		}},
	}
	// Each MySQL setup makes MySQL answer one way for ev; it returns the
	// function that ends a transient fault (nil for the others).
	mysqls := []struct {
		name    string
		setup   func(e *env, s sale, ev order.Event) (unlock func())
		outcome fulfil.Outcome
		status  order.Status // the order's row afterwards
	}{
		{"created", func(*env, sale, order.Event) func() { return nil }, fulfil.Created, order.Created},
		{"duplicate order_no", func(e *env, s sale, ev order.Event) func() {
			if _, err := mysqltest.Fulfil(ctx, e.db.DB, []order.FulfilRequest{{Event: ev, PayDeadline: time.Now().Add(time.Hour)}}); err != nil {
				e.t.Fatal(err)
			}
			return nil
		}, fulfil.Existing, order.Created},
		{"out of stock", func(e *env, s sale, _ order.Event) func() {
			if err := e.db.Activities.SetItemStock(ctx, s.item, 0); err != nil {
				e.t.Fatal(err)
			}
			return nil
		}, fulfil.Failed, order.Failed},
		{"already purchased", func(e *env, s sale, ev order.Event) func() {
			other := e.event(s, user, 1)
			if out, err := mysqltest.Fulfil(ctx, e.db.DB, []order.FulfilRequest{{Event: other, PayDeadline: time.Now().Add(time.Hour)}}); err != nil ||
				out[other.OrderNo].Status != order.Created {
				e.t.Fatalf("the other order: %+v %v", out, err)
			}
			return nil
		}, fulfil.Failed, order.Failed},
		// Created, cancelled and its release recorded, and then Redis came
		// back from an older state: the redelivery finds the reservation
		// live again while MySQL has the unit back.
		{"closed and released", func(e *env, s sale, ev order.Event) func() {
			if _, err := mysqltest.Fulfil(ctx, e.db.DB, []order.FulfilRequest{{Event: ev, PayDeadline: time.Now().Add(time.Hour)}}); err != nil {
				e.t.Fatal(err)
			}
			if tr, err := e.db.Orders.CloseOrder(ctx, ev.UserID, ev.OrderNo, order.ReasonCancelled); err != nil || !tr.Won {
				e.t.Fatalf("close: %+v %v", tr, err)
			}
			if err := e.db.Orders.MarkReleased(ctx, ev.OrderNo); err != nil {
				e.t.Fatal(err)
			}
			return nil
		}, fulfil.Existing, order.Closed},
		{"transient error", func(e *env, s sale, _ order.Event) func() { return e.lockItem(s.item) }, fulfil.Retry, ""},
	}
	for _, c := range claims {
		for _, m := range mysqls {
			t.Run(string(c.name)+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				e := e.with(t)
				s := e.newSale(10, 1)
				ev := e.reserve(s, user, 1)
				c.setup(e, ev)
				unlock := m.setup(e, s, ev)
				before := e.status(ev.OrderNo)

				res := e.handler.Handle(ctx, []order.Event{ev})

				want, wantStatus, wantState := m.outcome, m.status, c.name
				switch {
				case c.name == reservation.StateReleased:
					// The API gave it back: MySQL is not asked.
					want, wantStatus = fulfil.Skipped, before
				case c.name == reservation.StateMissing:
				case m.outcome == fulfil.Retry:
					if c.name == reservation.StateReserved {
						wantState = reservation.StateClaimed
					}
				case m.outcome == fulfil.Failed && c.name != reservation.StateConfirmed:
					wantState = reservation.StateReleased
				case m.outcome == fulfil.Failed:
					// A confirmed reservation is never released by the consumer.
				case m.status == order.Closed && c.name != reservation.StateConfirmed:
					// Released, not confirmed: MySQL has the unit back.
					wantState = reservation.StateReleased
				case m.status == order.Closed:
					// A confirmed one is the closer's to release.
				default:
					wantState = reservation.StateConfirmed
				}
				if len(res) != 1 || fulfil.OutcomeOf(res[0]) != want {
					t.Fatalf("outcome %v, want %s", res, want)
				}
				if got := e.state(ev); got != wantState {
					t.Errorf("reservation %s, want %s", got, wantState)
				}
				if got := e.status(ev.OrderNo); got != wantStatus {
					t.Errorf("MySQL status %q, want %q", got, wantStatus)
				}
				if m.status == order.Closed && wantState == reservation.StateReleased {
					e.wantStock(s.item, 10)
				}
				if unlock == nil {
					return
				}
				if c.name == reservation.StateReleased {
					unlock()
					return
				}
				// The fault ends: the retry finishes the order.
				unlock()
				res = e.handler.Handle(ctx, []order.Event{ev})
				if fulfil.OutcomeOf(res[0]) != fulfil.Created {
					t.Fatalf("retry: %v, want Created", res)
				}
				if got := e.status(ev.OrderNo); got != order.Created {
					t.Errorf("after the retry MySQL status %q, want CREATED", got)
				}
				if got := e.state(ev); c.name != reservation.StateMissing && got != reservation.StateConfirmed {
					t.Errorf("after the retry reservation %s, want CONFIRMED", got)
				}
			})
		}
	}
}

// TestHandleBatchMixingItems hands one batch of three items' events,
// interleaved, with an impossible event among them: every valid order is
// created and confirmed, each item's stock taken in both stores, and the
// impossible event is poison whose reservation the dead-letter hook gives
// back.
func TestHandleBatchMixingItems(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	sales := []sale{e.newSale(10, 1), e.newSale(10, 1), e.newSale(10, 1)}
	var batch []order.Event
	for u := int64(1); u <= 3; u++ {
		for _, s := range sales {
			batch = append(batch, e.reserve(s, u, 1))
		}
	}
	// Reserved for an activity that exists, but the event names another
	// one (of another item): impossible.
	bad := e.reserve(sales[0], 9, 1)
	bad.ActivityID = sales[1].activity
	batch = append(batch[:4], append([]order.Event{bad}, batch[4:]...)...)

	res := e.handler.Handle(ctx, batch)
	if len(res) != len(batch) {
		t.Fatalf("%d results for %d events", len(res), len(batch))
	}
	for i, ev := range batch {
		want := fulfil.Created
		if ev.OrderNo == bad.OrderNo {
			want = fulfil.Poison
		}
		if fulfil.OutcomeOf(res[i]) != want {
			t.Errorf("event %d (%s): %s %v, want %s", i, ev.OrderNo, fulfil.OutcomeOf(res[i]), res[i].Err, want)
		}
	}
	if err := e.handler.DeadLettered(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if got := e.state(bad); got != reservation.StateReleased {
		t.Errorf("the impossible event's reservation %s, want RELEASED", got)
	}
	if got := e.status(bad.OrderNo); got != "" {
		t.Errorf("the impossible event has a %s row", got)
	}
	for _, s := range sales {
		e.wantStock(s.item, 7)
	}
}

// TestHandleExactTail gives MySQL less stock than Redis believes: the batch
// cannot be taken whole, so it goes order by order and sells the exact tail
// (2+2 of 5, then the last unit to a 1-unit order after a 2-unit order is
// refused), and the refusal caps Redis at what MySQL has.
func TestHandleExactTail(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	s := e.newSale(10, 2)
	if err := e.db.Activities.SetItemStock(ctx, s.item, 5); err != nil {
		t.Fatal(err)
	}
	batch := []order.Event{e.reserve(s, 1, 2), e.reserve(s, 2, 2), e.reserve(s, 3, 2), e.reserve(s, 4, 1)}
	want := []fulfil.Outcome{fulfil.Created, fulfil.Created, fulfil.Failed, fulfil.Created}
	res := e.handler.Handle(ctx, batch)
	for i := range batch {
		if fulfil.OutcomeOf(res[i]) != want[i] {
			t.Errorf("event %d: %s %v, want %s", i, fulfil.OutcomeOf(res[i]), res[i].Err, want[i])
		}
	}
	if got := e.state(batch[2]); got != reservation.StateReleased {
		t.Errorf("refused reservation %s, want RELEASED", got)
	}
	o, err := e.db.Orders.Order(ctx, batch[2].OrderNo)
	if err != nil || o.Status != order.Failed || o.FailureReason != order.ReasonOutOfStock {
		t.Errorf("refused order %+v %v, want FAILED %s", o, err, order.ReasonOutOfStock)
	}
	e.wantStock(s.item, 0)
}

// One batch, two sales: their orders go into MySQL in one transaction, and
// when that fails for one sale (its stock row held by another transaction
// past MySQL's lock wait) the other sale's orders are still created and
// confirmed; only the blocked sale's events are retried, and the retry
// finishes them once the row is free.
func TestHandleOneSaleMySQLCannotTakeDoesNotBlockTheOther(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	blocked, free := e.newSale(10, 1), e.newSale(10, 1)
	batch := []order.Event{e.reserve(blocked, 1, 1), e.reserve(free, 2, 1), e.reserve(blocked, 3, 1), e.reserve(free, 4, 1)}
	unlock := e.lockItem(blocked.item)
	res := e.handler.Handle(ctx, batch)
	unlock()
	for i, ev := range batch {
		want := fulfil.Created
		if ev.ItemID == blocked.item {
			want = fulfil.Retry
		}
		if fulfil.OutcomeOf(res[i]) != want {
			t.Fatalf("event %d of item %d: %s %v, want %s", i, ev.ItemID, fulfil.OutcomeOf(res[i]), res[i].Err, want)
		}
	}
	e.wantStock(free.item, 8)
	retry := []order.Event{batch[0], batch[2]}
	for i, r := range e.handler.Handle(ctx, retry) {
		if fulfil.OutcomeOf(r) != fulfil.Created {
			t.Fatalf("retry of event %d: %s %v, want Created", i, fulfil.OutcomeOf(r), r.Err)
		}
	}
	e.wantStock(blocked.item, 8)
}

// losses records what the handler reports as missing reservations, and
// fails while err is set.
type losses struct {
	told [][]string
	err  error
}

func (l *losses) ReservationsMissing(_ context.Context, nos []string) error {
	if l.err != nil {
		return l.err
	}
	l.told = append(l.told, append([]string(nil), nos...))
	return nil
}

// An order MySQL takes whose reservation Redis lost (claim MISSING) is
// reported before its event is final, so the repair after the loss runs
// again after its commit (redisloss.Reporter); a reservation Redis has is
// not, nor an order MySQL refuses (it took no unit). When the report
// fails, that event alone is retried, and its redelivery (MySQL has the
// order by then) reports it again.
func TestHandleReportsOrdersWhoseReservationsRedisLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.newSale(10, 1)
	l := &losses{err: errors.New("mysql down")}
	h := &fulfil.Handler{Stock: e.handler.Stock, DB: e.handler.DB, Activities: e.handler.Activities, PaymentWindow: e.handler.PaymentWindow, Log: e.handler.Log,
		Losses: l}
	kept := e.reserve(s, 1, 1)
	lost := e.event(s, 2, 1)
	again := e.event(s, 1, 1) // user 1 holds a live order: MySQL refuses it
	res := h.Handle(context.Background(), []order.Event{kept, lost, again})
	want := []fulfil.Outcome{fulfil.Created, fulfil.Retry, fulfil.Failed}
	for i, r := range res {
		if got := fulfil.OutcomeOf(r); got != want[i] {
			t.Fatalf("event %d with the report failing: %s (%v), want %s", i, got, r.Err, want[i])
		}
	}
	if e.status(lost.OrderNo) != order.Created {
		t.Fatalf("the order whose reservation is missing: %q in MySQL, want CREATED", e.status(lost.OrderNo))
	}
	l.err = nil
	res = h.Handle(context.Background(), []order.Event{lost})
	if got := fulfil.OutcomeOf(res[0]); got != fulfil.Existing {
		t.Fatalf("redelivery: %s (%v), want existing", got, res[0].Err)
	}
	if len(l.told) != 1 || len(l.told[0]) != 1 || l.told[0][0] != lost.OrderNo {
		t.Fatalf("told %v, want [[%s]]", l.told, lost.OrderNo)
	}
}
