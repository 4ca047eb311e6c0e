package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
)

// secondInstance starts another api on the test's Redis, MySQL and topic,
// with its own copies of the sales and its own memory of the rooms.
func (ts *testServer) secondInstance(t *testing.T) string {
	t.Helper()
	pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: ts.topic})
	t.Cleanup(func() { pub.Close() })
	return ts.serve(t, ts.service(t, pub), ts.checkers(nil))
}

// openRoomSale creates a warmed item with stock and a sale of it running
// now with a waiting room admitting rate a second, one unit a buyer.
func (ts *testServer) openRoomSale(t *testing.T, stock int64, rate int) (item, activity int64) {
	t.Helper()
	item = ts.newItem(t, stock)
	body := fmt.Sprintf(`{"item_id":%d,"starts_at":%q,"ends_at":%q,"per_user_limit":1,"waiting_room":{"admit_per_second":%d}}`, item,
		time.Now().Add(-time.Minute).Format(time.RFC3339Nano), time.Now().Add(time.Hour).Format(time.RFC3339Nano), rate)
	r := ts.do(t, ts.url, request{method: "POST", path: "/admin/v1/activities", token: adminToken(t), body: body})
	if r.status != http.StatusCreated {
		t.Fatalf("create room sale: %d %s", r.status, r.body)
	}
	var a httpapi.ActivityView
	r.decode(t, &a)
	ts.warm(t, a.ActivityID)
	return item, a.ActivityID
}

func (ts *testServer) queue(t *testing.T, base, method string, activity, user int64) httpapi.QueueView {
	t.Helper()
	r := ts.do(t, base, request{method: method, path: fmt.Sprintf("/api/v1/activities/%d/queue", activity), token: buyerToken(t, user)})
	if r.status != http.StatusOK {
		t.Fatalf("%s queue as %d: %d %s", method, user, r.status, r.body)
	}
	var q httpapi.QueueView
	r.decode(t, &q)
	return q
}

func operatorToken(t *testing.T, subject string) string {
	t.Helper()
	tok, err := auth.Mint(testSecret, subject, auth.RoleAdmin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (ts *testServer) controlRoom(t *testing.T, token string, activity int64, body string) response {
	t.Helper()
	return ts.do(t, ts.url, request{method: "PATCH", path: fmt.Sprintf("/admin/v1/activities/%d/room", activity), token: token, body: body})
}

func (ts *testServer) mustControl(t *testing.T, token string, activity int64, body string) httpapi.RoomControlView {
	t.Helper()
	r := ts.controlRoom(t, token, activity, body)
	if r.status != http.StatusOK {
		t.Fatalf("PATCH room %s: %d %s", body, r.status, r.body)
	}
	var v httpapi.RoomControlView
	r.decode(t, &v)
	return v
}

// within polls until seen holds on both instances, and fails unless it
// did within a second of since (and the round trips of the polls).
func within(t *testing.T, since time.Time, what string, seen func(base string) bool, bases ...string) {
	t.Helper()
	waittest.Until(t, 5*time.Second, what, func() bool {
		for _, b := range bases {
			if !seen(b) {
				return false
			}
		}
		return true
	})
	// An instance answers from a room state read at most a second before
	// (roomPollTTL); an advance and the polls' round trips take the rest.
	if took := time.Since(since); took > time.Second+300*time.Millisecond {
		t.Fatalf("%s took %v, want about a second at most", what, took)
	}
}

// admittedCount polls every buyer on base and returns how many are
// admitted, failing unless they are the first positions (the room's
// order). It polls from the back of the line: the room moves on while the
// polls go, so a buyer polled before one behind them could read WAITING
// only because their turn came between the two polls. Polled after, a
// buyer ahead of one admitted must read admitted too.
func (ts *testServer) admittedCount(t *testing.T, base string, activity int64, buyers []int64) int {
	t.Helper()
	n, behind := 0, int64(0)
	for i := len(buyers) - 1; i >= 0; i-- {
		u := buyers[i]
		q := ts.queue(t, base, "GET", activity, u)
		switch {
		case q.State == httpapi.QueueAdmitted:
			n++
			if behind == 0 {
				behind = u
			}
		case behind != 0:
			t.Fatalf("buyer %d admitted before buyer %d, who is ahead of them: not the room's order", behind, u)
		}
	}
	return n
}

// The operator steers a room during its sale, seen by two api instances
// within a second: a pause (nobody admitted while it lasts, the waiters
// told so and keeping their places), a rate change, a resume (admissions go
// on in the room's order); every change is in the audit with the
// operator's subject, and a change sent again is harmless and not
// recorded twice.
func TestRoomControlSeenByTwoInstances(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	other := ts.secondInstance(t)
	bases := []string{ts.url, other}
	_, act := ts.openRoomSale(t, 100, 1)
	var buyers []int64
	for u := int64(1); u <= 8; u++ {
		if q := ts.queue(t, ts.url, "POST", act, u); q.Position == nil || *q.Position != u {
			t.Fatalf("buyer %d joined at %+v, want position %d", u, q.Position, u)
		}
		buyers = append(buyers, u)
	}
	alice := operatorToken(t, "ops-alice")
	last := buyers[len(buyers)-1]

	sent := time.Now()
	v := ts.mustControl(t, alice, act, `{"paused":true}`)
	if !v.Paused || v.AdmitPerSecond != 1 || !v.Changed || v.ControlVersion != 1 {
		t.Fatalf("pause: %+v", v)
	}
	within(t, sent, "the pause seen by both instances", func(b string) bool {
		return ts.queue(t, b, "GET", act, last).Paused
	}, bases...)
	held := ts.admittedCount(t, ts.url, act, buyers)
	if held >= len(buyers) {
		t.Fatalf("%d of %d admitted before the pause: the room went too fast to test it", held, len(buyers))
	}

	// A rate change while paused: the waiters' estimate follows it on both
	// instances; nobody is admitted.
	sent = time.Now()
	if v := ts.mustControl(t, alice, act, `{"admit_per_second":4}`); v.AdmitPerSecond != 4 || !v.Paused || v.ControlVersion != 2 {
		t.Fatalf("rate change: %+v", v)
	}
	ahead := int64(len(buyers) - held - 1)
	within(t, sent, "the new rate seen by both instances", func(b string) bool {
		q := ts.queue(t, b, "GET", act, last)
		return q.Paused && q.Ahead == ahead && q.ETASeconds == (ahead+3)/4
	}, bases...)
	// Two seconds paused (8 admissions' worth at the new rate): nobody more
	// on either instance, and the waiters keep their places.
	pauseEnds := time.Now().Add(2 * time.Second)
	for time.Now().Before(pauseEnds) {
		for _, b := range bases {
			if n := ts.admittedCount(t, b, act, buyers); n != held {
				t.Fatalf("%d admitted during the pause, want the %d of before it", n, held)
			}
		}
		if q := ts.queue(t, other, "GET", act, last); q.State != httpapi.QueueWaiting || *q.Position != last || !q.Paused {
			t.Fatalf("the last waiter during the pause: %+v", q)
		}
		time.Sleep(200 * time.Millisecond) // pacing the polls, not a wait for anything
	}

	sent = time.Now()
	if v := ts.mustControl(t, alice, act, `{"paused":false}`); v.Paused || v.ControlVersion != 3 {
		t.Fatalf("resume: %+v", v)
	}
	within(t, sent, "the resume seen by both instances", func(b string) bool {
		return !ts.queue(t, b, "GET", act, last).Paused
	}, bases...)
	// A retry of the resume (its answer lost): the same answer, not
	// recorded again.
	if v := ts.mustControl(t, alice, act, `{"paused":false}`); v.Paused || v.Changed || v.ControlVersion != 3 {
		t.Fatalf("the resume sent again: %+v, want unchanged at version 3", v)
	}
	waittest.Until(t, 10*time.Second, "every buyer admitted after the resume, in order", func() bool {
		return ts.admittedCount(t, other, act, buyers) == len(buyers)
	})

	// The audit: the three changes, newest first, with the subject, after
	// the sale's creation and warm-up.
	r := ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/admin/v1/activities/%d/audit", act), token: adminToken(t)})
	if r.status != http.StatusOK {
		t.Fatalf("audit: %d %s", r.status, r.body)
	}
	var audit httpapi.AuditView
	r.decode(t, &audit)
	want := []struct {
		paused bool
		rate   int
	}{{false, 4}, {true, 4}, {true, 1}}
	if len(audit.Actions) != len(want)+2 || audit.NextBefore != nil ||
		audit.Actions[3].Action != "sale.warmup" || audit.Actions[4].Action != "sale.create" {
		t.Fatalf("audit: %s, want the 3 changes after the creation and the warm-up", r.body)
	}
	var created struct {
		AdmitPerSecond int    `json:"admit_per_second"`
		Access         string `json:"access"`
		Mode           string `json:"mode"`
	}
	if err := json.Unmarshal(audit.Actions[4].Detail, &created); err != nil || created.AdmitPerSecond != 1 ||
		created.Access != "open" || created.Mode != "first_come" {
		t.Fatalf("the creation's detail: %s, %v", audit.Actions[4].Detail, err)
	}
	audit.Actions = audit.Actions[:3]
	for i, e := range audit.Actions {
		var d struct {
			AdmitPerSecond int  `json:"admit_per_second"`
			Paused         bool `json:"paused"`
		}
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			t.Fatal(err)
		}
		if e.Action != "room.control" || e.Subject != "ops-alice" || d.Paused != want[i].paused || d.AdmitPerSecond != want[i].rate ||
			e.At.IsZero() || (i > 0 && e.ID >= audit.Actions[i-1].ID) {
			t.Fatalf("audit entry %d: %+v %s, want room.control by ops-alice, paused %v at %d a second", i, e, e.Detail, want[i].paused, want[i].rate)
		}
	}
	// Paged: one at a time, newest first.
	r = ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/admin/v1/activities/%d/audit?limit=1&before=%d", act,
		audit.Actions[0].ID), token: adminToken(t)})
	var page httpapi.AuditView
	r.decode(t, &page)
	if len(page.Actions) != 1 || page.Actions[0].ID != audit.Actions[1].ID || page.NextBefore == nil || *page.NextBefore != audit.Actions[1].ID {
		t.Fatalf("the audit's second page of one: %s", r.body)
	}
}

// Passthrough lets every waiter in at once, and still never more than the
// units left: of ten waiters for three units, three are admitted and
// order, the others are refused; Redis ends with no unit left and three
// reservations.
func TestRoomControlPassthroughKeepsTheStockRule(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	other := ts.secondInstance(t)
	item, act := ts.openRoomSale(t, 3, 1)
	var buyers []int64
	for u := int64(1); u <= 10; u++ {
		ts.queue(t, ts.url, "POST", act, u)
		buyers = append(buyers, u)
	}
	ts.mustControl(t, operatorToken(t, "ops-bob"), act, `{"passthrough":true}`)
	waittest.Until(t, 5*time.Second, "the three units' buyers admitted", func() bool {
		return ts.admittedCount(t, other, act, buyers) == 3
	})
	// Longer than a second more: still three (held never passes left).
	time.Sleep(1500 * time.Millisecond) // the room's next advances, which must admit nobody
	if n := ts.admittedCount(t, ts.url, act, buyers); n != 3 {
		t.Fatalf("%d admitted in passthrough with 3 units, want 3", n)
	}
	placedN := 0
	for i, u := range buyers {
		base := bases2(ts.url, other, i)
		q := ts.queue(t, base, "GET", act, u)
		r := ts.do(t, base, request{method: "POST", path: "/api/v1/orders", token: buyerToken(t, u),
			header: map[string]string{"Idempotency-Key": "k-" + strconv.FormatInt(u, 10), "X-Admission": q.Admission},
			body:   fmt.Sprintf(`{"activity_id":%d}`, act)})
		switch {
		case i < 3 && r.status == http.StatusAccepted:
			placedN++
		case i >= 3 && r.status == http.StatusForbidden:
		default:
			t.Fatalf("buyer %d (position %d, %s) ordering: %d %s", u, i+1, q.State, r.status, r.body)
		}
	}
	if snap := ts.stock(t, item); placedN != 3 || snap.Stock != 0 || snap.Inflight != 3 {
		t.Fatalf("after passthrough: %d orders, Redis %+v; want 3 orders, no unit left, 3 in flight", placedN, snap)
	}
	if n := len(ts.reservations(t, item)); n != 3 {
		t.Fatalf("%d reservations in Redis, want 3", n)
	}
}

// bases2 alternates between two instances.
func bases2(a, b string, i int) string {
	if i%2 == 0 {
		return a
	}
	return b
}

// Bad changes get a clear error and change nothing.
func TestRoomControlRefusals(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	_, act := ts.openRoomSale(t, 10, 5)
	_, plain := ts.openSale(t, 10, 1)
	admin := adminToken(t)
	for _, c := range []struct {
		name, body string
		activity   int64
		status     int
		code       string
	}{
		{"an unknown field", `{"pause":true}`, act, 400, "INVALID_ARGUMENT"},
		{"paused and passthrough", `{"paused":true,"passthrough":true}`, act, 400, "INVALID_ARGUMENT"},
		{"a rate of 0", `{"admit_per_second":0}`, act, 400, "INVALID_ARGUMENT"},
		{"a rate above the bound", `{"admit_per_second":100001}`, act, 400, "INVALID_ARGUMENT"},
		{"a null", `{"paused":null}`, act, 400, "INVALID_ARGUMENT"},
		{"a string", `{"paused":"yes"}`, act, 400, "INVALID_ARGUMENT"},
		{"nothing", `{}`, act, 400, "INVALID_ARGUMENT"},
		{"a sale with no room", `{"paused":true}`, plain, 409, "NO_WAITING_ROOM"},
		{"no such sale", `{"paused":true}`, 1 << 40, 404, "NOT_FOUND"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, ts.controlRoom(t, admin, c.activity, c.body), c.status, c.code)
		})
	}
	wantError(t, ts.controlRoom(t, buyerToken(t, 5), act, `{"paused":true}`), 403, "FORBIDDEN")
	// Paused, then passthrough alone: the room would be both.
	ts.mustControl(t, admin, act, `{"paused":true}`)
	wantError(t, ts.controlRoom(t, admin, act, `{"passthrough":true}`), 400, "INVALID_ARGUMENT")
	if v := ts.mustControl(t, admin, act, `{"paused":false,"passthrough":true}`); v.Paused || !v.Passthrough {
		t.Fatalf("passthrough with the pause lifted: %+v", v)
	}
	// An ended sale's room admits nobody any more: no control.
	if r := ts.do(t, ts.url, request{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/end", act), token: admin}); r.status != 200 {
		t.Fatalf("end: %d %s", r.status, r.body)
	}
	wantError(t, ts.controlRoom(t, admin, act, `{"passthrough":false}`), 409, "ACTIVITY_NOT_ACTIVE")
	// The audit: the two changes and the end, nothing of the refusals.
	r := ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/admin/v1/activities/%d/audit", act), token: admin})
	var audit httpapi.AuditView
	r.decode(t, &audit)
	var got []string
	for _, e := range audit.Actions {
		got = append(got, e.Action+" by "+e.Subject)
	}
	if want := "[sale.end by 1 room.control by 1 room.control by 1 sale.warmup by 1 sale.create by 1]"; fmt.Sprint(got) != want {
		t.Fatalf("audit %v, want %s", got, want)
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=x", "before=0", "before=x"} {
		wantError(t, ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/admin/v1/activities/%d/audit?%s", act, q), token: admin}),
			400, "INVALID_ARGUMENT")
	}
	wantError(t, ts.do(t, ts.url, request{method: "GET", path: "/admin/v1/activities/1099511627776/audit", token: admin}), 404, "NOT_FOUND")
}

// The audit lists the sale's creation, its changes before the start and an
// operator's warm-up, each by its operator with the sale's settings after
// it, and nothing of a change refused.
func TestAuditRecordsCreateChangeAndWarmup(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	bob := operatorToken(t, "ops-bob")
	item := ts.newItem(t, 10)
	now := time.Now().UTC()
	r := ts.do(t, ts.url, request{method: "POST", path: "/admin/v1/activities", token: bob,
		body: fmt.Sprintf(`{"item_id":%d,"starts_at":%q,"ends_at":%q}`, item, now.Add(time.Hour).Format(time.RFC3339Nano),
			now.Add(2*time.Hour).Format(time.RFC3339Nano))})
	act := activityID(t, r)
	patch := func(body string) response {
		return ts.do(t, ts.url, request{method: "PATCH", path: fmt.Sprintf("/admin/v1/activities/%d", act), token: bob, body: body})
	}
	if r := patch(`{"per_user_limit":3}`); r.status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	wantError(t, patch(`{"per_user_limit":0}`), 400, "INVALID_ARGUMENT")
	if r := ts.do(t, ts.url, request{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/warmup", act), token: bob}); r.status != http.StatusOK {
		t.Fatalf("warm-up: %d %s", r.status, r.body)
	}
	r = ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/admin/v1/activities/%d/audit", act), token: adminToken(t)})
	var audit httpapi.AuditView
	r.decode(t, &audit)
	var got []string
	for _, e := range audit.Actions {
		var d struct {
			PerUserLimit int     `json:"per_user_limit"`
			Items        []int64 `json:"items"`
		}
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s by %s limit %d items %v", e.Action, e.Subject, d.PerUserLimit, d.Items))
	}
	want := fmt.Sprintf("[sale.warmup by ops-bob limit 3 items [%d] sale.change by ops-bob limit 3 items [%d] sale.create by ops-bob limit 1 items [%d]]",
		item, item, item)
	if fmt.Sprint(got) != want {
		t.Fatalf("audit %v,\nwant %s", got, want)
	}
}
