package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// wantMessage is wantError that also checks the message names the problem.
func wantMessage(t *testing.T, r response, status int, code, part string) {
	t.Helper()
	wantError(t, r, status, code)
	var e errorBody
	r.decode(t, &e)
	if !strings.Contains(e.Error.Message, part) {
		t.Fatalf("message %q does not say %q", e.Error.Message, part)
	}
}

// What scripts/api-fuzz (Schemathesis against docs/openapi.yaml) found,
// each through HTTP against the real services, with the valid neighbour of
// each refused request accepted, so the refusal is the rule's.
func TestFuzzerFindings(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	admin := adminToken(t)
	item, open := ts.openSale(t, 10, 2)
	adminReq := func(method, path, body string) request {
		return request{method: method, path: path, token: admin, body: body}
	}

	t.Run("null quantity", func(t *testing.T) {
		order := func(key, body string) request {
			return request{method: "POST", path: "/api/v1/orders", token: buyerToken(t, 700),
				header: map[string]string{"Idempotency-Key": key}, body: body}
		}
		ts.noWrites(t, []int64{item}, func() {
			wantMessage(t, ts.do(t, ts.url, order("null-1", fmt.Sprintf(`{"activity_id":%d,"quantity":null}`, open))),
				http.StatusBadRequest, "INVALID_ARGUMENT", "quantity must not be null")
		})
		// Left out, it is 1.
		accepted(t, ts.do(t, ts.url, order("null-2", fmt.Sprintf(`{"activity_id":%d}`, open))))
		if got := ts.stock(t, item); got.Stock != 9 {
			t.Fatalf("stock %+v, want 9 after one unit", got)
		}
	})

	t.Run("null activity fields", func(t *testing.T) {
		for _, f := range []string{"per_user_limit", "payment_window_seconds", "stock_buckets"} {
			body := fmt.Sprintf(`{"item_id":%d,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z","%s":null}`, item, f)
			wantMessage(t, ts.do(t, ts.url, adminReq("POST", "/admin/v1/activities", body)),
				http.StatusBadRequest, "INVALID_ARGUMENT", f+" must not be null")
		}
	})

	t.Run("create: ends_at not after starts_at", func(t *testing.T) {
		create := func(starts, ends string) response {
			return ts.do(t, ts.url, adminReq("POST", "/admin/v1/activities",
				fmt.Sprintf(`{"item_id":%d,"starts_at":%q,"ends_at":%q}`, item, starts, ends)))
		}
		for _, tc := range [][2]string{
			{"2030-01-01T00:00:00Z", "2030-01-01T00:00:00Z"},           // equal
			{"2030-01-01T00:00:00Z", "2029-12-31T23:59:59Z"},           // before
			{"2030-01-01T01:00:00+01:00", "2030-01-01T00:00:00Z"},      // the same instant in another zone
			{"2030-01-01T00:00:00.0004Z", "2030-01-01T00:00:00.0006Z"}, // the same millisecond, as MySQL keeps them
		} {
			wantMessage(t, create(tc[0], tc[1]), http.StatusBadRequest, "INVALID_ARGUMENT", "ends_at must be after starts_at")
		}
		if r := create("2030-01-01T00:00:00Z", "2030-01-01T00:00:01Z"); r.status != http.StatusCreated {
			t.Fatalf("a sale of one second: %d %s", r.status, r.body)
		}
	})

	t.Run("PATCH: ends_at not after starts_at", func(t *testing.T) {
		starts := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		ends := starts.Add(time.Hour)
		id := ts.newActivity(t, ts.newItem(t, 10), starts, ends, 1) // an item of its own: the open sale runs until then
		path := fmt.Sprintf("/admin/v1/activities/%d", id)
		at := func(t time.Time) string { return t.Format(time.RFC3339) }
		for _, body := range []string{
			fmt.Sprintf(`{"starts_at":%q,"ends_at":%q}`, at(starts), at(starts)),                    // both, equal
			fmt.Sprintf(`{"starts_at":%q,"ends_at":%q}`, at(ends), at(starts)),                      // both, swapped
			fmt.Sprintf(`{"ends_at":%q}`, at(starts)),                                               // at the current start
			fmt.Sprintf(`{"ends_at":%q}`, at(starts.Add(-time.Minute))),                             // before the current start
			fmt.Sprintf(`{"starts_at":%q}`, at(ends)),                                               // at the current end
			fmt.Sprintf(`{"starts_at":%q,"per_user_limit":2}`, at(ends.Add(time.Hour))),             // after the current end
			fmt.Sprintf(`{"starts_at":%q,"ends_at":%q}`, at(ends.Add(time.Hour)), at(ends.Add(-1))), // both moved, crossed
			`{"starts_at":"2030-01-01T00:00:00.0004Z","ends_at":"2030-01-01T00:00:00.0006Z"}`,       // the same millisecond
		} {
			wantMessage(t, ts.do(t, ts.url, adminReq("PATCH", path, body)), http.StatusBadRequest, "INVALID_ARGUMENT", "must be after starts_at")
		}
		a, err := ts.db.Activities.Activity(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !a.StartsAt.Equal(starts) || !a.EndsAt.Equal(ends) || a.PerUserLimit != 1 {
			t.Fatalf("a refused PATCH changed the sale: %s - %s limit %d", a.StartsAt, a.EndsAt, a.PerUserLimit)
		}
		if r := ts.do(t, ts.url, adminReq("PATCH", path, fmt.Sprintf(`{"ends_at":%q}`, at(starts.Add(time.Second))))); r.status != http.StatusOK {
			t.Fatalf("ends_at a second after starts_at: %d %s", r.status, r.body)
		}
	})

	t.Run("item names in characters, not all blank", func(t *testing.T) {
		name := func(n string) response {
			return ts.do(t, ts.url, adminReq("POST", "/admin/v1/items", fmt.Sprintf(`{"name":%q,"stock":1}`, n)))
		}
		if r := name(strings.Repeat("é", 200)); r.status != http.StatusCreated {
			t.Fatalf("200 two-byte characters: %d %s", r.status, r.body)
		}
		wantError(t, name(strings.Repeat("é", 201)), http.StatusBadRequest, "INVALID_ARGUMENT")
		wantError(t, name("\u00a0\u3000"), http.StatusBadRequest, "INVALID_ARGUMENT")
	})

	t.Run("order list parameters", func(t *testing.T) {
		list := func(query string) response {
			return ts.do(t, ts.url, request{method: "GET", path: "/api/v1/orders?" + query, token: buyerToken(t, 700)})
		}
		wantMessage(t, list("stauts=PAID"), http.StatusBadRequest, "INVALID_ARGUMENT", `unknown query parameter "stauts"`)
		wantMessage(t, list("=null"), http.StatusBadRequest, "INVALID_ARGUMENT", "unknown query parameter")
		wantMessage(t, list("limit=1&limit=2"), http.StatusBadRequest, "INVALID_ARGUMENT", `"limit" given twice`)
		if r := list("limit=1&status=CREATED"); r.status != http.StatusOK {
			t.Fatalf("a valid list: %d %s", r.status, r.body)
		}
	})

	t.Run("warm-up of a long-ended sale", func(t *testing.T) {
		old := ts.newItem(t, 5)
		now := time.Now()
		ended := ts.newActivity(t, old, now.Add(-10*24*time.Hour), now.Add(-9*24*time.Hour), 1)
		ts.noWrites(t, []int64{old}, func() {
			wantMessage(t, ts.do(t, ts.url, adminReq("POST", fmt.Sprintf("/admin/v1/activities/%d/warmup", ended), "")),
				http.StatusConflict, "ACTIVITY_NOT_ACTIVE", "nothing to warm up")
		})
		// Ended an hour ago, its keys still live: it warms up.
		recent := ts.newActivity(t, old, now.Add(-2*time.Hour), now.Add(-time.Hour), 1)
		ts.warm(t, recent)
	})
}
