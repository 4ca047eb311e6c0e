package fulfil_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/consumer/internal/fulfil"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// codeOf is the digest of code in s's sale (any key: the stores keep
// digests, never codes).
func codeOf(s sale, code string) access.Digest { return access.Hash([]byte("k"), s.activity, code) }

// addCode writes a code of s's sale in MySQL (uses, used) and in Redis with
// redisLeft uses left, as the operator's loader would (or a Redis copy that
// lags MySQL, when redisLeft is above uses - used).
func (e *env) addCode(s sale, code string, uses, used, redisLeft int) {
	e.t.Helper()
	raw, err := sql.Open("mysql", e.db.DSN)
	if err != nil {
		e.t.Fatal(err)
	}
	defer raw.Close()
	d := codeOf(s, code)
	if _, err := raw.Exec("INSERT INTO sale_codes (activity_id, digest, uses, used, created_at) VALUES (?, ?, ?, ?, NOW(3))",
		s.activity, d, uses, used); err != nil {
		e.t.Fatal(err)
	}
	key := e.store.Keys(reservation.One(s.item)).Codes(s.activity)
	if err := e.rdb.HSet(context.Background(), key, string(d), strconv.Itoa(redisLeft)+"|", access.LoadedField, "1").Err(); err != nil {
		e.t.Fatal(err)
	}
}

// codeCounts are the code's used count in MySQL and its field in Redis.
func (e *env) codeCounts(s sale, code string) (used int, redis string) {
	e.t.Helper()
	raw, err := sql.Open("mysql", e.db.DSN)
	if err != nil {
		e.t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.QueryRow("SELECT used FROM sale_codes WHERE activity_id = ? AND digest = ?", s.activity, codeOf(s, code)).Scan(&used); err != nil {
		e.t.Fatal(err)
	}
	redis, err = e.rdb.HGet(context.Background(), e.store.Keys(reservation.One(s.item)).Codes(s.activity), string(codeOf(s, code))).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return used, redis
}

// reserveWithCode is reserve for an order that uses code.
func (e *env) reserveWithCode(s sale, user int64, code string) order.Event {
	e.t.Helper()
	ev := e.event(s, user, 1)
	ev.AccessCode = string(codeOf(s, code))
	_, err := e.store.Reservations.Reserve(context.Background(), reservation.Reservation{OrderNo: ev.OrderNo, UserID: ev.UserID,
		ItemID: s.item, ActivityID: s.activity, Quantity: 1, IdempotencyKey: ev.IdempotencyKey, At: ev.ReservedAt,
		QuotaTTL: 2 * time.Hour, ReservationTTL: 3 * time.Hour, Code: codeOf(s, code)})
	if err != nil {
		e.t.Fatalf("reserve: %v", err)
	}
	return ev
}

// The consumer takes each order's code in MySQL with the order: an order
// whose code MySQL has no use of (Redis's copy lagged) fails CODE_USED,
// its units come back to both stores and Redis keeps the use taken; the
// order MySQL takes holds its code until it closes unpaid, when MySQL's
// use and Redis's come back together, and the code buys again.
func TestHandleTakesCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	s := e.newSale(10, 1)
	e.addCode(s, "STALE", 1, 1, 1) // MySQL: held by an order Redis does not know of
	e.addCode(s, "FRESH", 1, 0, 1)
	stale, fresh := e.reserveWithCode(s, 1, "STALE"), e.reserveWithCode(s, 2, "FRESH")
	res := e.handler.Handle(ctx, []order.Event{stale, fresh})
	if fulfil.OutcomeOf(res[0]) != fulfil.Failed || fulfil.OutcomeOf(res[1]) != fulfil.Created {
		t.Fatalf("outcomes %s %v, %s %v", fulfil.OutcomeOf(res[0]), res[0].Err, fulfil.OutcomeOf(res[1]), res[1].Err)
	}
	if o, err := e.db.Orders.Order(ctx, stale.OrderNo); err != nil || o.FailureReason != order.ReasonCodeUsed {
		t.Fatalf("stale code's order: %+v, %v; want FAILED CODE_USED", o, err)
	}
	if got := e.state(stale); got != reservation.StateReleased {
		t.Fatalf("stale code's reservation %s, want RELEASED", got)
	}
	for code, want := range map[string]struct {
		used  int
		redis string
	}{"STALE": {1, "0|"}, "FRESH": {1, "0|"}} {
		if used, redis := e.codeCounts(s, code); used != want.used || redis != want.redis {
			t.Fatalf("%s: used %d in MySQL and %q in Redis, want %d and %q", code, used, redis, want.used, want.redis)
		}
	}
	e.wantStock(s.item, 9)

	// The created order closes unpaid: both stores get the use back.
	closer := &lifecycle.Service{Tx: e.db.DB, Events: e.db.Outbox, DB: e.db.Orders, Stock: e.store.Reservations,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	st, err := closer.CloseExpired(ctx, time.Now().Add(2*time.Hour), 10, nil)
	if err != nil || st.Closed != 1 {
		t.Fatalf("close expired: %+v, %v", st, err)
	}
	if used, redis := e.codeCounts(s, "FRESH"); used != 0 || redis != "1|" {
		t.Fatalf("after the close: used %d in MySQL and %q in Redis, want 0 and 1|", used, redis)
	}
	e.wantStock(s.item, 10)

	// The code that came back buys again; a second close of the closed
	// order gives nothing more.
	again := e.reserveWithCode(s, 3, "FRESH")
	if res := e.handler.Handle(ctx, []order.Event{again}); fulfil.OutcomeOf(res[0]) != fulfil.Created {
		t.Fatalf("the code back: %s %v", fulfil.OutcomeOf(res[0]), res[0].Err)
	}
	if _, err := e.db.Orders.CloseOrder(ctx, "", fresh.OrderNo, order.ReasonPaymentTimeout); err != nil {
		t.Fatal(err)
	}
	if used, redis := e.codeCounts(s, "FRESH"); used != 1 || redis != "0|" {
		t.Fatalf("the code's second order: used %d in MySQL and %q in Redis, want 1 and 0|", used, redis)
	}
}
