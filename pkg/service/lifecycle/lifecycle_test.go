package lifecycle_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// sale is an item with n orders created through both stores (reserved,
// claimed, written to MySQL, confirmed) whose payment window has passed.
type sale struct {
	db       *mysqltest.DB
	stock    *stockredis.Store
	rdb      redis.UniversalClient
	item     int64
	activity int64
	orders   []order.Event
}

func newExpiredSale(t *testing.T, stock int64, n int) *sale {
	t.Helper()
	return newSale(t, stock, n, order.Money{}, time.Now().Add(-time.Second))
}

// newSale is an item priced at price (none when zero) with n orders of one
// unit created through both stores, payable until deadline.
func newSale(t *testing.T, stock int64, n int, price order.Money, deadline time.Time) *sale {
	t.Helper()
	ctx := context.Background()
	db := mysqltest.New(t)
	rdb, prefix := redistest.New(t)
	st := stockredis.New(rdb, prefix)
	it, err := db.Activities.CreatePricedItem(ctx, "ticket", stock, price)
	if err != nil {
		t.Fatal(err)
	}
	act, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: time.Now().Add(-time.Minute),
		EndsAt: time.Now().Add(time.Hour), PerUserLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Stock.Warmup(ctx, reservation.One(it.ID), time.Hour, func(ctx context.Context) (int64, error) { return db.Activities.ItemStock(ctx, it.ID) }); err != nil {
		t.Fatal(err)
	}
	s := &sale{db: db, stock: st, rdb: rdb, item: it.ID, activity: act.ID}
	gen := order.NewNumberGenerator()
	var reqs []order.FulfilRequest
	var nos []string
	for u := int64(1); u <= int64(n); u++ {
		r := reservation.Reservation{OrderNo: gen.Next(it.ID), UserID: strconv.FormatInt(u, 10), ItemID: it.ID, ActivityID: act.ID,
			Quantity: 1, IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour}
		if _, err := st.Reservations.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
		e := order.Event{Version: order.EventVersion, OrderNo: r.OrderNo, IdempotencyKey: r.IdempotencyKey,
			UserID: strconv.FormatInt(u, 10), ItemID: it.ID, ActivityID: act.ID, Quantity: 1, ReservedAt: r.At}
		s.orders = append(s.orders, e)
		reqs = append(reqs, order.FulfilRequest{Event: e, PayDeadline: deadline, UnitPrice: price})
		nos = append(nos, r.OrderNo)
	}
	if _, err := st.Reservations.Claim(ctx, reservation.One(it.ID), nos); err != nil {
		t.Fatal(err)
	}
	out, err := mysqltest.Fulfil(ctx, db.DB, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for no, o := range out {
		if o.Status != order.Created {
			t.Fatalf("order %s: %+v", no, o)
		}
	}
	if _, err := st.Reservations.Confirm(ctx, reservation.One(it.ID), nos); err != nil {
		t.Fatal(err)
	}
	return s
}

// stocks reads the item's MySQL stock and its Redis stock and in-flight.
func (s *sale) stocks(t *testing.T) (int64, reservation.Snapshot) {
	t.Helper()
	ctx := context.Background()
	dbStock, err := s.db.Activities.ItemStock(ctx, s.item)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.stock.Stock.Stock(ctx, reservation.One(s.item))
	if err != nil {
		t.Fatal(err)
	}
	return dbStock, snap
}

func (s *sale) service() *lifecycle.Service {
	return &lifecycle.Service{Tx: s.db, Events: s.db.Outbox, DB: s.db.Orders, Payments: s.db.Payments, Stock: s.stock.Reservations, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// raceCloser moves every deadline of the sale to 15 ms from now and runs
// pay for each order, spread over 30 ms, while the closer runs every 2 ms:
// some payments land before the deadline and some after, at the instant
// the closer acts. It returns when all of them are done.
func (s *sale) raceCloser(t *testing.T, svc *lifecycle.Service, pay func(i int, e order.Event)) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Millisecond).UTC()
	if err := s.db.Gorm().Exec("UPDATE orders SET pay_deadline = ? WHERE item_id = ?", deadline, s.item).Error; err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, e := range s.orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(time.Duration(i) * 1500 * time.Microsecond)))
			pay(i, e)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Since(start) < 60*time.Millisecond {
			if _, err := svc.CloseExpired(ctx, time.Now(), 500, nil); err != nil {
				t.Error(err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	wg.Wait()
}

// Two closers that overlap (the lock normally keeps them apart) close each
// expired order once and give its stock and quota back once, in both
// stores.
func TestOverlappingClosersCloseEachOrderOnce(t *testing.T) {
	t.Parallel()
	const stock, n = 30, 20
	s := newExpiredSale(t, stock, n)
	ctx := context.Background()

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		closed int
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.service().CloseExpired(ctx, time.Now(), 500, nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			closed += st.Closed
			mu.Unlock()
		}()
	}
	wg.Wait()
	if closed != n {
		t.Fatalf("the closers report %d closes of %d expired orders", closed, n)
	}
	counts, err := s.db.Orders.StatusCounts(ctx, s.item)
	if err != nil {
		t.Fatal(err)
	}
	if counts[order.Closed] != n || len(counts) != 1 {
		t.Fatalf("orders by status %v, want %d CLOSED", counts, n)
	}
	dbStock, snap := s.stocks(t)
	if dbStock != stock || snap.Stock != stock || snap.Inflight != 0 {
		t.Fatalf("after the closes: MySQL stock %d, Redis %+v; want %d in both, nothing in flight", dbStock, snap, stock)
	}
	// Every quota came back: each buyer can reserve again.
	gen := order.NewNumberGenerator()
	for _, e := range s.orders {
		_, err := s.stock.Reservations.Reserve(ctx, reservation.Reservation{OrderNo: gen.Next(s.item), UserID: e.UserID, ItemID: s.item,
			ActivityID: s.activity, Quantity: 1, IdempotencyKey: "again", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour})
		if err != nil {
			t.Fatalf("user %s after the close: %v", e.UserID, err)
		}
	}
}

// Paying races the timeout close at the deadline: each order ends PAID or
// CLOSED, never both, and stock comes back only for the closed ones.
func TestPayRacesTimeoutClose(t *testing.T) {
	t.Parallel()
	const stock, n = 30, 20
	s := newExpiredSale(t, stock, n)
	ctx := context.Background()
	svc := s.service()

	paid := make([]bool, n)
	s.raceCloser(t, svc, func(i int, e order.Event) {
		o, err := svc.Pay(ctx, e.UserID, e.OrderNo)
		paid[i] = err == nil && o.Status == order.Paid
	})
	// Whatever pay lost, the closer closes (the deadline has passed now).
	if _, err := svc.CloseExpired(ctx, time.Now().Add(time.Second), 500, nil); err != nil {
		t.Fatal(err)
	}
	nPaid := 0
	for i, e := range s.orders {
		o, err := s.db.Orders.Order(ctx, e.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		want := order.Closed
		if paid[i] {
			want = order.Paid
			nPaid++
		}
		if o.Status != want {
			t.Fatalf("order %s: pay answered paid=%v but the order is %s", e.OrderNo, paid[i], o.Status)
		}
	}
	dbStock, snap := s.stocks(t)
	want := int64(stock - nPaid)
	if dbStock != want || snap.Stock != want || snap.Inflight != 0 {
		t.Fatalf("%d paid: MySQL stock %d, Redis %+v; want %d in both", nPaid, dbStock, snap, want)
	}
	t.Logf("%d paid, %d closed", nPaid, n-nPaid)
}

// Redis came back from an older state: one closed order's reservation is
// CLAIMED again, one RESERVED, one gone. The closer releases each from
// whatever live state it is in, records the release in MySQL only then,
// and frees every buyer's quota; the unit of the missing reservation stays
// out of Redis (an undersell the repair puts back), never in twice.
func TestCloseAfterRedisWentBack(t *testing.T) {
	t.Parallel()
	const stock = 10
	s := newExpiredSale(t, stock, 3)
	ctx := context.Background()
	rdb := s.rdb
	k := s.stock.Keys(reservation.One(s.item))
	for i, state := range []reservation.State{reservation.StateClaimed, reservation.StateReserved} {
		no := s.orders[i].OrderNo
		rdb.HSet(ctx, k.Reservation(no), "state", string(state))
		rdb.IncrBy(ctx, k.Inflight(), 1)
		rdb.ZAdd(ctx, k.Pending(), redis.Z{Score: float64(time.Now().UnixMilli()), Member: no})
	}
	rdb.Del(ctx, k.Reservation(s.orders[2].OrderNo))

	st, err := s.service().CloseExpired(ctx, time.Now(), 100, nil)
	if err != nil || st.Closed != 3 {
		t.Fatalf("closer: %+v, %v; want 3 closed", st, err)
	}
	due, err := s.db.Orders.ReleasesDue(ctx, time.Now().Add(time.Hour), 100)
	if err != nil || len(due) != 0 {
		t.Fatalf("releases still due: %v (%v)", due, err)
	}
	dbStock, snap := s.stocks(t)
	if dbStock != stock || snap.Stock != stock-1 || snap.Inflight != 0 {
		t.Fatalf("MySQL stock %d, Redis %+v; want %d, and %d with nothing in flight", dbStock, snap, stock, stock-1)
	}
	if n := rdb.ZCard(ctx, k.Pending()).Val(); n != 0 {
		t.Fatalf("%d orders still pending for the sweep", n)
	}
	for _, e := range s.orders {
		if v := rdb.Get(ctx, k.Quota(s.activity, e.UserID)).Val(); v != "" {
			t.Fatalf("user %s's quota still held by %q after the close", e.UserID, v)
		}
	}
}
