package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// prioritySale opens a code_priority room sale of one unit admitting one
// buyer a second, with code (single use) loaded in MySQL and Redis.
func (cs codesServer) prioritySale(t *testing.T, code string) (item, act int64, d access.Digest) {
	t.Helper()
	item, act = cs.openRoomSale(t, 1, 1)
	cs.sales.mu.Lock()
	cs.sales.priority[act] = true
	cs.sales.mu.Unlock()
	if _, err := cs.raw.Exec("UPDATE activities SET access = 'code_priority' WHERE id = ?", act); err != nil {
		t.Fatal(err)
	}
	d = digestOf(t, act, code)
	if _, err := cs.raw.Exec("INSERT INTO sale_codes (activity_id, digest, uses, used, created_at) VALUES (?, ?, 1, 0, NOW(3))", act, d); err != nil {
		t.Fatal(err)
	}
	key := cs.store.Keys(reservation.One(item)).Codes(act)
	if err := cs.rdb.HSet(context.Background(), key, string(d), "1|", access.LoadedField, "1").Err(); err != nil {
		t.Fatal(err)
	}
	return item, act, d
}

// joinWith joins user to act's room with code.
func (cs codesServer) joinWith(t *testing.T, act, user int64, code string) response {
	t.Helper()
	return cs.do(t, cs.url, request{method: "POST", path: fmt.Sprintf("/api/v1/activities/%d/queue", act), token: buyerToken(t, user),
		body: fmt.Sprintf(`{"access_code":%q}`, code)})
}

// Through the api: a code_priority room sale of one unit. A buyer joins
// the line first, then a holder joins with a code (the poll says
// priority); the holder is admitted first, orders without sending the
// code, and the order's event carries the code, so the reservation holds
// its use and the code has none left in Redis; the line's buyer is never
// admitted (the one unit is the holder's).
func TestPriorityRoomOrderTakesThePlacesCode(t *testing.T) {
	t.Parallel()
	cs := newCodesServer(t, access.GuessLimit{Max: 100, Per: time.Minute}, access.GuessLimit{Max: 100, Per: time.Minute})
	item, act, d := cs.prioritySale(t, "HOLD-ER01")
	ctx := context.Background()
	cs.queue(t, cs.url, "POST", act, 1)
	r := cs.joinWith(t, act, 2, "hold-er01")
	if r.status != http.StatusOK {
		t.Fatalf("the holder's join: %d %s", r.status, r.body)
	}
	if cs.left(t, item, act, "HOLD-ER01") != "0|" {
		t.Fatalf("the code after the holder's join: %q, want its use held", cs.left(t, item, act, "HOLD-ER01"))
	}
	var adm string
	waittest.Until(t, 10*time.Second, "the holder admitted", func() bool {
		q := cs.queue(t, cs.url, "GET", act, 2)
		adm = q.Admission
		return adm != ""
	})
	if q := cs.queue(t, cs.url, "GET", act, 1); q.Admission != "" {
		t.Fatalf("the line's buyer admitted before or with the holder: %+v", q)
	}
	r = cs.do(t, cs.url, request{method: "POST", path: "/api/v1/orders", token: buyerToken(t, 2),
		header: map[string]string{"Idempotency-Key": "k-" + strconv.Itoa(2), "X-Admission": adm},
		body:   fmt.Sprintf(`{"activity_id":%d}`, act)})
	if r.status != http.StatusAccepted {
		t.Fatalf("the holder's order: %d %s", r.status, r.body)
	}
	nos := cs.reservations(t, item)
	if len(nos) != 1 {
		t.Fatalf("reservations: %v, want the holder's", nos)
	}
	if info, err := cs.store.Reservations.Reservation(ctx, nos[0]); err != nil || info.Code != d {
		t.Fatalf("the holder's reservation: %+v, %v; want it holding the code", info, err)
	}
	if ev := cs.events(t, 1); ev[0].AccessCode != string(d) || ev[0].UserID != "2" {
		t.Fatalf("the order's event: %+v, want the holder's with the code (for MySQL's use)", ev[0])
	}
	if got := cs.left(t, item, act, "HOLD-ER01"); got != "0|" {
		t.Fatalf("the code after the order: %q, want no second use and none left", got)
	}
}

// Wrong codes on joins count as guesses, with the orders': past the
// buyer's limit even a valid code is 429 TOO_MANY_GUESSES, and nothing is
// taken; another buyer joins with it.
func TestRoomJoinsCountCodeGuesses(t *testing.T) {
	t.Parallel()
	cs := newCodesServer(t, access.GuessLimit{Max: 3, Per: time.Minute}, access.GuessLimit{})
	item, act, _ := cs.prioritySale(t, "GOOD-CODE")
	for i := range 3 {
		// Not a code at all, then well-formed codes never given.
		code := []string{"!", "WRONG-0001", "WRONG-0002"}[i]
		if r := cs.joinWith(t, act, 5, code); r.status != http.StatusForbidden {
			t.Fatalf("wrong code %d: %d %s, want 403", i, r.status, r.body)
		}
	}
	if r := cs.joinWith(t, act, 5, "GOOD-CODE"); r.status != http.StatusTooManyRequests {
		t.Fatalf("a good code past the limit: %d %s, want 429", r.status, r.body)
	}
	if got := cs.left(t, item, act, "GOOD-CODE"); got != "1|" {
		t.Fatalf("the code after the refused join: %q, want untouched", got)
	}
	if r := cs.joinWith(t, act, 6, "GOOD-CODE"); r.status != http.StatusOK {
		t.Fatalf("another buyer's join with the code: %d %s", r.status, r.body)
	}
}
