package httpapi_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/placing"
)

// codeKey is the tests' order number key, under which codes are hashed.
var codeKey = []byte("codes-test-number-key")

// codedSales is the sales store with the sales in coded marked
// code_required. The sale's access setting is stored by the operator's
// side of the codes (activities.access); the tests set the column too.
type codedSales struct {
	placing.Activities
	mu    sync.Mutex
	coded map[int64]bool
	// priority are the code_priority sales.
	priority map[int64]bool
}

func (c *codedSales) Activity(ctx context.Context, id int64) (activity.Activity, error) {
	a, err := c.Activities.Activity(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.coded[id] {
		a.Access = access.CodeRequired
	}
	if c.priority[id] {
		a.Access = access.CodePriority
	}
	return a, err
}

// codesServer is a test server whose sales may take orders only with codes,
// counting guesses under buyer and addr.
type codesServer struct {
	*testServer
	sales *codedSales
	raw   *sql.DB
}

func newCodesServer(t *testing.T, buyer, addr access.GuessLimit) codesServer {
	sales := &codedSales{coded: map[int64]bool{}, priority: map[int64]bool{}}
	ts := newTestServer(t, func(s *placing.Service) {
		sales.Activities = s.Activities
		s.Activities = sales
		s.Codes = placing.Codes{Key: codeKey, Guesses: s.Reservations.(placing.Guesses), PerBuyer: buyer, PerAddr: addr}
	})
	raw, err := sql.Open("mysql", ts.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return codesServer{ts, sales, raw}
}

// codedSale opens a sale of stock units that takes orders only with a
// code, with codes loaded in MySQL and in Redis as the contract has them.
func (cs codesServer) codedSale(t *testing.T, stock int64, codes map[string]access.Code) (item, act int64) {
	t.Helper()
	item, act = cs.openSale(t, stock, 1)
	cs.sales.mu.Lock()
	cs.sales.coded[act] = true
	cs.sales.mu.Unlock()
	ctx := context.Background()
	if _, err := cs.raw.Exec("UPDATE activities SET access = 'code_required' WHERE id = ?", act); err != nil {
		t.Fatal(err)
	}
	key := cs.store.Keys(reservation.One(item)).Codes(act)
	for code, c := range codes {
		c.Digest = digestOf(t, act, code)
		var sub any
		if c.Subject != "" {
			sub = c.Subject
		}
		if _, err := cs.raw.Exec("INSERT INTO sale_codes (activity_id, digest, uses, used, subject, created_at) VALUES (?, ?, ?, ?, ?, NOW(3))",
			act, c.Digest, c.Uses, c.Used, sub); err != nil {
			t.Fatal(err)
		}
		if err := cs.rdb.HSetNX(ctx, key, string(c.Digest), c.RedisValue()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.rdb.HSet(ctx, key, access.LoadedField, "1").Err(); err != nil {
		t.Fatal(err)
	}
	return item, act
}

func digestOf(t *testing.T, act int64, code string) access.Digest {
	t.Helper()
	n, err := access.Normalize(code)
	if err != nil {
		t.Fatal(err)
	}
	return access.Hash(codeKey, act, n)
}

// placeWith places user's order in act with code ("" sends none).
func (cs codesServer) placeWith(base string, user, act int64, key, code string) (response, error) {
	body := fmt.Sprintf(`{"activity_id":%d}`, act)
	if code != "" {
		body = fmt.Sprintf(`{"activity_id":%d,"access_code":%q}`, act, code)
	}
	tok, err := mintBuyer(user)
	if err != nil {
		return response{}, err
	}
	return cs.tryDo(base, request{method: "POST", path: "/api/v1/orders", token: tok,
		header: map[string]string{"Idempotency-Key": key}, body: body})
}

// left is the code's field in Redis, "<left>|<subject>".
func (cs codesServer) left(t *testing.T, item, act int64, code string) string {
	t.Helper()
	v, err := cs.rdb.HGet(context.Background(), cs.store.Keys(reservation.One(item)).Codes(act), string(digestOf(t, act, code))).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// used is the code's used count in MySQL.
func (cs codesServer) used(t *testing.T, act int64, code string) int {
	t.Helper()
	var n int
	if err := cs.raw.QueryRow("SELECT used FROM sale_codes WHERE activity_id = ? AND digest = ?", act, digestOf(t, act, code)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A sale that takes orders only with a code, through the api: every
// answer, then the final counts in both stores (MySQL's uses are taken by
// the consumer, so none here).
func TestOrdersWithCodes(t *testing.T) {
	t.Parallel()
	cs := newCodesServer(t, access.GuessLimit{Max: 3, Per: time.Minute}, access.GuessLimit{})
	item, act := cs.codedSale(t, 10, map[string]access.Code{
		"ALPHA-0001": {Uses: 1},
		"BRAVO-0002": {Uses: 1, Subject: "2"},
		"DELTA-0004": {Uses: 2},
	})
	steps := []struct {
		name     string
		user     int64
		code     string
		status   int
		wantCode string
	}{
		{"no code", 1, "", http.StatusForbidden, "CODE_REQUIRED"},
		{"not a code at all (a guess)", 1, "!!", http.StatusForbidden, "CODE_INVALID"},
		{"a wrong code (a guess)", 1, "WRONG-CODE", http.StatusForbidden, "CODE_INVALID"},
		{"another buyer's code (a guess)", 1, "BRAVO-0002", http.StatusForbidden, "CODE_INVALID"},
		{"a good code over the guess limit", 1, "ALPHA-0001", http.StatusTooManyRequests, "TOO_MANY_GUESSES"},
		{"a good code, typed loosely", 3, "alpha 0001", http.StatusAccepted, ""},
		{"the used code", 4, "ALPHA-0001", http.StatusConflict, "CODE_USED"},
		{"the buyer's own bound code", 2, "bravo-0002", http.StatusAccepted, ""},
		{"a two-use code", 5, "DELTA-0004", http.StatusAccepted, ""},
	}
	for i, st := range steps {
		r, err := cs.placeWith(cs.url, st.user, act, "k"+strconv.Itoa(i), st.code)
		if err != nil {
			t.Fatal(err)
		}
		if st.status == http.StatusAccepted {
			no := accepted(t, r)
			if info, err := cs.store.Reservations.Reservation(context.Background(), no); err != nil || info.Code != digestOf(t, act, st.code) {
				t.Fatalf("%s: reservation %+v, %v; want the code's digest recorded", st.name, info, err)
			}
			continue
		}
		wantError(t, r, st.status, st.wantCode)
	}
	for code, want := range map[string]string{"ALPHA-0001": "0|", "BRAVO-0002": "0|2", "DELTA-0004": "1|"} {
		if got := cs.left(t, item, act, code); got != want {
			t.Fatalf("%s is %q in Redis, want %q", code, got, want)
		}
		if n := cs.used(t, act, code); n != 0 {
			t.Fatalf("%s: used %d in MySQL before any consumer, want 0", code, n)
		}
	}
	if snap := cs.stock(t, item); snap.Stock != 7 || snap.Inflight != 3 {
		t.Fatalf("stock %+v, want 7 left and 3 in flight", snap)
	}

	// A sale open to everyone ignores the field, whatever it holds.
	_, open := cs.openSale(t, 1, 1)
	r, err := cs.placeWith(cs.url, 9, open, "open", "not a code!")
	if err != nil {
		t.Fatal(err)
	}
	accepted(t, r)
}

// Two buyers racing for one single-use code, at once: exactly one order.
func TestOrdersRaceForOneCode(t *testing.T) {
	t.Parallel()
	cs := newCodesServer(t, access.DefaultGuessesPerBuyer, access.DefaultGuessesPerAddr)
	item, act := cs.codedSale(t, 10, map[string]access.Code{"ONLY-ONCE": {Uses: 1}})
	for round := range 5 {
		if round > 0 {
			// Give the use back for the next round, as a close would.
			key := cs.store.Keys(reservation.One(item)).Codes(act)
			if err := cs.rdb.HSet(context.Background(), key, string(digestOf(t, act, "ONLY-ONCE")), "1|").Err(); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		start := make(chan struct{})
		for b := range 2 {
			wg.Go(func() {
				<-start
				r, err := cs.placeWith(cs.url, int64(100*round+b+1), act, "race", "ONLY-ONCE")
				if err != nil {
					t.Error(err)
					return
				}
				statuses[b] = r.status
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for _, s := range statuses {
			switch s {
			case http.StatusAccepted:
				won++
			case http.StatusConflict:
			default:
				t.Fatalf("round %d: statuses %v", round, statuses)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d orders took the single-use code, want 1 (%v)", round, won, statuses)
		}
		if got := cs.left(t, item, act, "ONLY-ONCE"); got != "0|" {
			t.Fatalf("round %d: code is %q, want 0|", round, got)
		}
	}
	if snap := cs.stock(t, item); snap.Stock != 5 || snap.Inflight != 5 {
		t.Fatalf("stock %+v, want 5 left and 5 in flight", snap)
	}
}

// Invalid codes from one address, whichever buyers send them, stop that
// address's coded orders.
func TestGuessesPerAddress(t *testing.T) {
	t.Parallel()
	cs := newCodesServer(t, access.DefaultGuessesPerBuyer, access.GuessLimit{Max: 2, Per: time.Minute})
	item, act := cs.codedSale(t, 10, map[string]access.Code{"GOOD-CODE": {Uses: 5}})
	for u := range int64(2) {
		r, err := cs.placeWith(cs.url, u+1, act, "k", "BAD-CODE")
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, r, http.StatusForbidden, "CODE_INVALID")
	}
	r, err := cs.placeWith(cs.url, 3, act, "k", "GOOD-CODE")
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, r, http.StatusTooManyRequests, "TOO_MANY_GUESSES")
	if got := cs.left(t, item, act, "GOOD-CODE"); got != "5|" {
		t.Fatalf("code is %q after a refused order, want 5|", got)
	}
	if snap := cs.stock(t, item); snap.Stock != 10 || snap.Inflight != 0 {
		t.Fatalf("stock %+v, want untouched", snap)
	}
}

// mintBuyer is buyerToken for goroutines other than the test's.
func mintBuyer(user int64) (string, error) {
	return auth.Mint(testSecret, strconv.FormatInt(user, 10), "", time.Hour)
}

// The reserve script's answer is lost while it used a code: the api
// answers 503, records the order FAILED in MySQL and releases it, which
// gives the code's use back with the units; the buyer's retry with the
// same key then buys with the same code.
func TestOrderWithCodeReserveLost(t *testing.T) {
	t.Parallel()
	cs := newCodesServer(t, access.DefaultGuessesPerBuyer, access.DefaultGuessesPerAddr)
	p := redistest.NewProxied(t, false, "reserve")
	svc := cs.service(t, cs.svc.Publisher)
	useStore(svc, stockredis.New(p.Client(t), p.Prefix))
	svc.Activities = cs.sales
	svc.Codes = placing.Codes{Key: codeKey, Guesses: svc.Reservations.(placing.Guesses),
		PerBuyer: access.DefaultGuessesPerBuyer, PerAddr: access.DefaultGuessesPerAddr}
	lossy := *cs.testServer
	lossy.url = cs.serve(t, svc, cs.checkers(kafkatest.Brokers()))
	lossy.store, lossy.rdb, lossy.prefix = stockredis.New(p.Direct, p.Prefix), p.Direct, p.Prefix
	ls := codesServer{&lossy, cs.sales, cs.raw}
	item, act := ls.codedSale(t, 5, map[string]access.Code{"LOST-ANSWER": {Uses: 1}})

	p.LoseNext("reserve")
	r, err := ls.placeWith(ls.url, 1, act, "k1", "LOST-ANSWER")
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, r, http.StatusServiceUnavailable, "UNAVAILABLE")
	if p.Lost() != 1 {
		t.Fatalf("%d answers lost, want 1", p.Lost())
	}
	var failed int
	var reason, code string
	if err := ls.raw.QueryRow("SELECT COUNT(*), MAX(failure_reason), MAX(access_code) FROM orders WHERE activity_id = ? AND status = 'FAILED'", act).
		Scan(&failed, &reason, &code); err != nil {
		t.Fatal(err)
	}
	if failed != 1 || reason != "RESERVE_FAILED" || code != string(digestOf(t, act, "LOST-ANSWER")) {
		t.Fatalf("MySQL holds %d FAILED orders (%q, code %q), want the one given up with its code", failed, reason, code)
	}
	if got := ls.left(t, item, act, "LOST-ANSWER"); got != "1|" {
		t.Fatalf("code is %q after the 503, want 1| (its use back)", got)
	}
	if n := ls.used(t, act, "LOST-ANSWER"); n != 0 {
		t.Fatalf("used %d in MySQL, want 0", n)
	}
	if snap := ls.stock(t, item); snap.Stock != 5 || snap.Inflight != 0 {
		t.Fatalf("stock %+v after the 503, want all back", snap)
	}

	r, err = ls.placeWith(ls.url, 1, act, "k1", "LOST-ANSWER")
	if err != nil {
		t.Fatal(err)
	}
	accepted(t, r)
	if got := ls.left(t, item, act, "LOST-ANSWER"); got != "0|" {
		t.Fatalf("code is %q after the retry, want 0|", got)
	}
	if snap := ls.stock(t, item); snap.Stock != 4 || snap.Inflight != 1 {
		t.Fatalf("stock %+v after the retry, want 4 and 1 in flight", snap)
	}
}
