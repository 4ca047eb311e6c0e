package httpapi_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/api/wiring"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/webhooks"
)

// hookURL is an endpoint's URL; nothing listens there (the api only
// registers endpoints, the consumer's dispatcher delivers).
const hookURL = "http://127.0.0.1:9/hook"

// secretForm is a secret as Standard Webhooks has it: "whsec_" and the
// standard base64 of 32 bytes.
var secretForm = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`)

func (ts *testServer) admin(t *testing.T, method, path, body string) response {
	t.Helper()
	return ts.do(t, ts.url, request{method: method, path: path, token: adminToken(t), body: body})
}

// register registers an endpoint through the api and checks the answer.
func (ts *testServer) register(t *testing.T, url string, events ...string) httpapi.CreatedWebhookView {
	t.Helper()
	r := ts.admin(t, "POST", "/admin/v1/webhooks", fmt.Sprintf(`{"url":%q,"events":[%s]}`, url, quoted(events)))
	if r.status != http.StatusCreated {
		t.Fatalf("register %s %v: %d %s", url, events, r.status, r.body)
	}
	var v httpapi.CreatedWebhookView
	r.decode(t, &v)
	return v
}

func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ",")
}

// webhookOf reads endpoint id through the api (status 200 expected).
func (ts *testServer) webhookOf(t *testing.T, id int64) httpapi.WebhookView {
	t.Helper()
	r := ts.admin(t, "GET", fmt.Sprintf("/admin/v1/webhooks/%d", id), "")
	if r.status != http.StatusOK {
		t.Fatalf("get webhook %d: %d %s", id, r.status, r.body)
	}
	var v httpapi.WebhookView
	r.decode(t, &v) // strict: a secret field would fail it
	return v
}

// liveSecrets is what the dispatcher signs endpoint id's deliveries with now.
func (ts *testServer) liveSecrets(t *testing.T, id int64) []string {
	t.Helper()
	keys, err := ts.db.Webhooks.Secrets(context.Background(), id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Value
	}
	return out
}

// Registering answers 201 with the endpoint, on, and a new secret of the
// Standard Webhooks form, the one the store signs with; the list and the
// endpoint's page show it without any secret.
func TestWebhookRegisterListGet(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	before := time.Now().Add(-time.Second)
	r := ts.admin(t, "POST", "/admin/v1/webhooks", `{"url":"`+hookURL+`","events":["order.*","refund.owed","order.*"],"description":"the shop's ERP"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	var c httpapi.CreatedWebhookView
	r.decode(t, &c)
	if c.WebhookID <= 0 || c.URL != hookURL || !slices.Equal(c.Events, []string{"order.*", "refund.owed"}) ||
		c.Description != "the shop's ERP" || !c.Enabled || c.DisabledReason != "" || c.DisabledAt != nil ||
		c.FailingSince != nil || c.CreatedAt.Before(before) {
		t.Fatalf("registered %+v", c)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(c.Secret, "whsec_"))
	if !secretForm.MatchString(c.Secret) || err != nil || len(key) != 32 {
		t.Fatalf("secret %q: not whsec_ and the base64 of 32 bytes (%v, %d bytes)", c.Secret, err, len(key))
	}
	if got := ts.liveSecrets(t, c.WebhookID); !slices.Equal(got, []string{c.Secret}) {
		t.Fatalf("the store signs with %v, want the secret answered", got)
	}
	other := ts.register(t, "https://93.184.215.14/hooks", "*")
	if other.Secret == c.Secret || other.WebhookID == c.WebhookID {
		t.Fatalf("two endpoints share a secret or an id: %+v %+v", c, other)
	}

	r = ts.admin(t, "GET", "/admin/v1/webhooks", "")
	var list struct {
		Webhooks []httpapi.WebhookView `json:"webhooks"`
	}
	r.decode(t, &list)
	if r.status != http.StatusOK || len(list.Webhooks) != 2 || list.Webhooks[0].WebhookID != c.WebhookID ||
		list.Webhooks[1].WebhookID != other.WebhookID || !slices.Equal(list.Webhooks[1].Events, []string{"*"}) {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	g := ts.admin(t, "GET", fmt.Sprintf("/admin/v1/webhooks/%d", c.WebhookID), "")
	for _, b := range [][]byte{r.body, g.body} {
		if strings.Contains(string(b), "whsec_") || strings.Contains(string(b), "secret") {
			t.Fatalf("an answer shows a secret: %s", b)
		}
	}
	if v := ts.webhookOf(t, c.WebhookID); v.WebhookID != c.WebhookID || v.URL != hookURL || !v.Enabled ||
		!slices.Equal(v.Events, c.Events) || !v.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("get: %+v, want %+v", v, c.WebhookView)
	}
	wantError(t, ts.admin(t, "GET", "/admin/v1/webhooks/999999999", ""), http.StatusNotFound, "NOT_FOUND")
	wantError(t, ts.admin(t, "GET", "/admin/v1/webhooks/abc", ""), http.StatusNotFound, "NOT_FOUND")
	wantError(t, ts.do(t, ts.url, request{method: "GET", path: "/admin/v1/webhooks", token: buyerToken(t, 1)}), http.StatusForbidden, "FORBIDDEN")
	wantError(t, ts.do(t, ts.url, request{method: "GET", path: "/admin/v1/webhooks"}), http.StatusUnauthorized, "UNAUTHENTICATED")
}

// PATCH turns an endpoint off (disabled_reason "operator", and the relay's
// fan-out no longer sees it) and on again (the reason cleared); a new URL
// or events are checked as at registration, and a refused change leaves
// the endpoint as it was.
func TestWebhookPatch(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	c := ts.register(t, hookURL, "order.*")
	path := fmt.Sprintf("/admin/v1/webhooks/%d", c.WebhookID)
	patch := func(body string) httpapi.WebhookView {
		t.Helper()
		r := ts.admin(t, "PATCH", path, body)
		if r.status != http.StatusOK {
			t.Fatalf("PATCH %s: %d %s", body, r.status, r.body)
		}
		var v httpapi.WebhookView
		r.decode(t, &v)
		if got := ts.webhookOf(t, c.WebhookID); got.Enabled != v.Enabled || got.DisabledReason != v.DisabledReason ||
			got.URL != v.URL || !slices.Equal(got.Events, v.Events) || got.Description != v.Description {
			t.Fatalf("PATCH answered %+v, the store has %+v", v, got)
		}
		return v
	}
	fannedTo := func() bool {
		t.Helper()
		on, err := ts.db.Webhooks.Endpoints(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(on, func(e hook.Endpoint) bool { return e.ID == c.WebhookID })
	}

	off := time.Now().Add(-time.Second)
	v := patch(`{"enabled":false}`)
	if v.Enabled || v.DisabledReason != hook.ByOperator || v.DisabledAt == nil || v.DisabledAt.Before(off) || fannedTo() {
		t.Fatalf("turned off: %+v (fanned to: %v)", v, fannedTo())
	}
	v = patch(`{"enabled":false}`) // again: no change
	if v.Enabled || v.DisabledReason != hook.ByOperator {
		t.Fatalf("turned off twice: %+v", v)
	}
	v = patch(`{"enabled":true}`)
	if !v.Enabled || v.DisabledReason != "" || v.DisabledAt != nil || v.FailingSince != nil || !fannedTo() {
		t.Fatalf("turned on: %+v (fanned to: %v)", v, fannedTo())
	}

	v = patch(`{"url":"https://93.184.215.14/new","events":["entry.won","*","entry.won"],"description":"new"}`)
	if v.URL != "https://93.184.215.14/new" || !slices.Equal(v.Events, []string{"entry.won", "*"}) || v.Description != "new" || !v.Enabled {
		t.Fatalf("changed: %+v", v)
	}
	v = patch(`{"description":""}`) // the rest stays
	if v.URL != "https://93.184.215.14/new" || !slices.Equal(v.Events, []string{"entry.won", "*"}) || v.Description != "" {
		t.Fatalf("description cleared: %+v", v)
	}
	for _, tc := range []struct{ body, says string }{
		{`{"url":"ftp://example.com/hook"}`, "absolute http or https URL"},
		{`{"url":"example.com/hook"}`, "absolute http or https URL"},
		{`{"url":""}`, "absolute http or https URL"},
		{`{"url":"https://user:pw@example.com/hook"}`, "user name or password"},
		{`{"events":["order.bogus"]}`, `"order.bogus" is not an event type`},
		{`{"events":["shipment.*"]}`, `"shipment.*" names no family`},
		{`{"events":[]}`, "at least one pattern"},
		{`{"events":null}`, "events must not be null"},
		{`{"url":null}`, "url must not be null"},
		{`{"enabled":null}`, "enabled must not be null"},
		{`{"enabled":"yes"}`, `"enabled"`},
		{`{"url":"https://93.184.215.14/other","events":["order.bogus"]}`, `"order.bogus"`}, // all or nothing
		{`{"secret":"whsec_x"}`, `unknown field "secret"`},
		{`{}`, "give at least one of url, events, description, enabled"},
	} {
		wantMessage(t, ts.admin(t, "PATCH", path, tc.body), http.StatusBadRequest, "INVALID_ARGUMENT", tc.says)
	}
	if got := ts.webhookOf(t, c.WebhookID); got.URL != v.URL || !slices.Equal(got.Events, v.Events) || !got.Enabled {
		t.Fatalf("refused changes changed the endpoint: %+v, was %+v", got, v)
	}
	wantError(t, ts.admin(t, "PATCH", "/admin/v1/webhooks/999999999", `{"enabled":false}`), http.StatusNotFound, "NOT_FOUND")
}

// DELETE answers 204 and takes the endpoint, its secrets and its
// deliveries; after it the endpoint is 404 everywhere.
func TestWebhookDelete(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	evs := ts.outboxEvents(t, 2)
	gone, kept := ts.register(t, hookURL, "*"), ts.register(t, hookURL, "*")
	for _, id := range []int64{gone.WebhookID, kept.WebhookID} {
		if err := ts.db.Webhooks.Requeue(ctx, id, evs); err != nil {
			t.Fatal(err)
		}
	}
	path := fmt.Sprintf("/admin/v1/webhooks/%d", gone.WebhookID)
	if r := ts.admin(t, "DELETE", path, ""); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete: %d %q", r.status, r.body)
	}
	for _, r := range []request{
		{method: "GET", path: path}, {method: "DELETE", path: path}, {method: "PATCH", path: path, body: `{"enabled":true}`},
		{method: "POST", path: path + "/rotate"}, {method: "GET", path: path + "/deliveries"},
		{method: "POST", path: path + "/replay", body: fmt.Sprintf(`{"since":%q}`, time.Now().Add(-time.Hour).Format(time.RFC3339))},
	} {
		r.token = adminToken(t)
		wantError(t, ts.do(t, ts.url, r), http.StatusNotFound, "NOT_FOUND")
	}
	if got := ts.liveSecrets(t, gone.WebhookID); len(got) != 0 {
		t.Fatalf("the deleted endpoint's secrets stay: %v", got)
	}
	var rows int64
	if err := ts.db.Gorm().Table("webhook_deliveries").Where("webhook_id = ?", gone.WebhookID).Count(&rows).Error; err != nil || rows != 0 {
		t.Fatalf("the deleted endpoint's deliveries: %d (%v), want 0", rows, err)
	}
	ds, err := ts.db.Webhooks.Deliveries(ctx, kept.WebhookID, "", 0, 10)
	if err != nil || len(ds) != 2 || ts.webhookOf(t, kept.WebhookID).WebhookID != kept.WebhookID {
		t.Fatalf("the other endpoint lost its deliveries: %d %v", len(ds), err)
	}
}

// Rotating answers a new secret and until when the old one signs (now and
// overlap_seconds, a day by default); during the overlap a delivery
// carries a signature of each, each verifying alone, and after an overlap
// of 0 only the new one signs.
func TestWebhookRotate(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	c := ts.register(t, hookURL, "*")
	path := fmt.Sprintf("/admin/v1/webhooks/%d/rotate", c.WebhookID)
	rotate := func(body string, overlap time.Duration) httpapi.RotatedView {
		t.Helper()
		before := time.Now()
		r := ts.admin(t, "POST", path, body)
		after := time.Now()
		if r.status != http.StatusOK {
			t.Fatalf("rotate %s: %d %s", body, r.status, r.body)
		}
		var v httpapi.RotatedView
		r.decode(t, &v)
		if v.WebhookID != c.WebhookID || !secretForm.MatchString(v.Secret) || v.OverlapSeconds != int64(overlap/time.Second) ||
			v.PreviousUntil.Before(before.Add(overlap).Truncate(time.Microsecond)) || v.PreviousUntil.After(after.Add(overlap)) {
			t.Fatalf("rotate %s between %v and %v: %+v, want the old secrets until now + %v", body, before, after, v, overlap)
		}
		return v
	}
	id, at, body := "msg_rotate", time.Now(), []byte(`{"type":"order.paid"}`)
	signatures := func(secrets []string) []string {
		t.Helper()
		sig, err := webhook.Sign(secrets, id, at, body)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(sig, " ")
	}
	verifies := func(secret string, sig string) bool {
		return webhook.Verify([]string{secret}, webhook.Headers(id, at, sig), body, at) == nil
	}

	first := rotate("", 24*time.Hour) // no body: the default overlap
	if first.Secret == c.Secret {
		t.Fatal("rotate answered the old secret")
	}
	live := ts.liveSecrets(t, c.WebhookID)
	if !slices.Equal(live, []string{first.Secret, c.Secret}) {
		t.Fatalf("live secrets %v, want the new then the old", live)
	}
	sigs := signatures(live)
	if len(sigs) != 2 || !verifies(first.Secret, sigs[0]) || !verifies(c.Secret, sigs[1]) || verifies(c.Secret, sigs[0]) {
		t.Fatalf("signatures during the overlap %v, want one by each secret", sigs)
	}

	second := rotate(`{"overlap_seconds":0}`, 0)
	waittest.Until(t, 5*time.Second, "the old secrets to stop signing", func() bool {
		return len(ts.liveSecrets(t, c.WebhookID)) == 1
	})
	live = ts.liveSecrets(t, c.WebhookID)
	sigs = signatures(live)
	if !slices.Equal(live, []string{second.Secret}) || len(sigs) != 1 || !verifies(second.Secret, sigs[0]) {
		t.Fatalf("after an overlap of 0: secrets %v, signatures %v, want the newest alone", live, sigs)
	}
	rotate(`{"overlap_seconds":604800}`, 7*24*time.Hour) // the longest
	if got := ts.liveSecrets(t, c.WebhookID); len(got) != 2 || got[1] != second.Secret {
		t.Fatalf("after a week's overlap: %v", got)
	}

	for _, tc := range []struct{ body, says string }{
		{`{"overlap_seconds":-1}`, "overlap_seconds is between 0 and 604800"},
		{`{"overlap_seconds":604801}`, "overlap_seconds is between 0 and 604800"},
		{`{"overlap_seconds":null}`, "overlap_seconds must not be null"},
		{`{"overlap_seconds":"1h"}`, `"overlap_seconds"`},
		{`{"overlap":60}`, `unknown field "overlap"`},
	} {
		wantMessage(t, ts.admin(t, "POST", path, tc.body), http.StatusBadRequest, "INVALID_ARGUMENT", tc.says)
	}
	if got := ts.liveSecrets(t, c.WebhookID); len(got) != 2 {
		t.Fatalf("refused rotations changed the secrets: %v", got)
	}
}

// outboxEvents writes n orders' order.created events to the outbox, as the
// consumer does, and returns them in the order they were written.
func (ts *testServer) outboxEvents(t *testing.T, n int) []outbox.Event {
	t.Helper()
	ctx := context.Background()
	_, act := ts.openSale(t, int64(n), 1)
	since := time.Now().Add(-time.Minute)
	before, _, err := ts.db.Webhooks.EventsSince(ctx, since, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	start := int(ts.topicEnd(t))
	for i := range n {
		ts.mustPlace(t, ts.url, buyerToken(t, int64(7000+i)), "hook-order", act)
	}
	evs := ts.events(t, start+n)
	reqs := make([]order.FulfilRequest, 0, n)
	for _, e := range evs[len(evs)-n:] {
		reqs = append(reqs, order.FulfilRequest{Event: e})
	}
	if _, err := mysqltest.Fulfil(ctx, ts.db.DB, reqs); err != nil {
		t.Fatal(err)
	}
	all, _, err := ts.db.Webhooks.EventsSince(ctx, since, 0, 1000)
	if err != nil || len(all) != len(before)+n {
		t.Fatalf("outbox: %d events (%v), want %d", len(all), err, len(before)+n)
	}
	return all[len(before):]
}

func eventIDs(evs []outbox.Event) []string {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	slices.Sort(ids)
	return ids
}

// Replay queues, for the endpoint, the events since the time of the types
// it wants, pending and due; events before the time stay out.
func TestWebhookReplay(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	early := ts.outboxEvents(t, 2)
	late := ts.outboxEvents(t, 3)
	since := early[len(early)-1].Time.Add(time.Microsecond)
	if !late[0].Time.After(since) && !late[0].Time.Equal(since) {
		t.Fatalf("the later events were written at %v, before %v", late[0].Time, since)
	}
	orders, refunds, all := ts.register(t, hookURL, "order.created"), ts.register(t, hookURL, "refund.*"), ts.register(t, hookURL, "*")
	replay := func(id int64, since time.Time) int { return ts.replayAll(t, id, since) }
	pending := func(id int64) []string {
		t.Helper()
		ds, err := ts.db.Webhooks.Deliveries(ctx, id, hook.Pending, 0, webhooks.MaxList)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(ds))
		for i, d := range ds {
			ids[i] = d.Event.ID
			if d.Attempts != 0 || d.NextAt.After(time.Now().Add(time.Second)) {
				t.Fatalf("replayed delivery %+v: not due now", d)
			}
		}
		slices.Sort(ids)
		return ids
	}

	if n := replay(orders.WebhookID, since); n != len(late) || !slices.Equal(pending(orders.WebhookID), eventIDs(late)) {
		t.Fatalf("replay since %v queued %d, pending %v; want the %d later events %v", since, n, pending(orders.WebhookID), len(late), eventIDs(late))
	}
	if n := replay(refunds.WebhookID, early[0].Time); n != 0 || len(pending(refunds.WebhookID)) != 0 {
		t.Fatalf("an endpoint of refunds got %d order events", n)
	}
	every := append(slices.Clone(early), late...)
	if n := replay(all.WebhookID, early[0].Time); n != len(every) || !slices.Equal(pending(all.WebhookID), eventIDs(every)) {
		t.Fatalf("replay of everything queued %d, pending %v; want %v", n, pending(all.WebhookID), eventIDs(every))
	}
	// Again: the same deliveries, not new ones.
	if n := replay(all.WebhookID, early[0].Time); n != len(every) || len(pending(all.WebhookID)) != len(every) {
		t.Fatalf("a second replay: %d queued, %d pending", n, len(pending(all.WebhookID)))
	}

	path := fmt.Sprintf("/admin/v1/webhooks/%d/replay", all.WebhookID)
	for _, tc := range []struct{ body, says string }{
		{`{}`, "since is required"},
		{`{"since":null}`, "since is required"},
		{fmt.Sprintf(`{"since":%q}`, time.Now().Add(time.Hour).Format(time.RFC3339)), "since is in the future"},
		{`{"since":"yesterday"}`, "not a valid JSON object"},
		{`{"since":"2026-01-01T00:00:00Z","until":"2026-01-02T00:00:00Z"}`, `unknown field "until"`},
		{``, "not a valid JSON object"},
	} {
		wantMessage(t, ts.admin(t, "POST", path, tc.body), http.StatusBadRequest, "INVALID_ARGUMENT", tc.says)
	}
}

// failingSender is an endpoint that never answers 2xx.
type failingSender struct{}

func (failingSender) Send(context.Context, string, string, time.Time, []byte, []string) (int, error) {
	return http.StatusInternalServerError, errors.New("the endpoint answered 500")
}

// A replay sends a delivery the dispatcher gave up on from the start of
// the retry schedule: it is tried again on failure, not given up after the
// one try (as it was when the replay left its count of attempts).
func TestWebhookReplayRestartsTheSchedule(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	evs := ts.outboxEvents(t, 1)
	c := ts.register(t, hookURL, "*")
	d := &webhooks.Dispatcher{Store: ts.db.Webhooks, Sender: failingSender{}, Batch: 10, Concurrency: 1,
		Schedule: hook.Schedule{time.Millisecond}, DisableAfter: time.Hour, Log: testLogger(t), Now: time.Now}
	state := func() hook.Delivery {
		t.Helper()
		ds, err := ts.db.Webhooks.Deliveries(ctx, c.WebhookID, "", 0, 10)
		if err != nil || len(ds) != 1 {
			t.Fatalf("deliveries: %v %v", ds, err)
		}
		return ds[0]
	}
	send := func() hook.Delivery {
		t.Helper()
		waittest.Until(t, 5*time.Second, "the delivery to be due", func() bool {
			n, err := d.Round(ctx, c.WebhookID)
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
		return state()
	}
	if n := ts.replayAll(t, c.WebhookID, evs[0].Time); n != 1 {
		t.Fatalf("queued %d", n)
	}
	if got := send(); got.State != hook.Pending || got.Attempts != 1 {
		t.Fatalf("after the first failure: %+v, want pending", got)
	}
	if got := send(); got.State != hook.GaveUp || got.Attempts != 2 || len(got.Tries) != 2 {
		t.Fatalf("after the schedule: %+v, want given up after 2 tries", got)
	}
	if n := ts.replayAll(t, c.WebhookID, evs[0].Time); n != 1 {
		t.Fatalf("queued %d", n)
	}
	if got := state(); got.State != hook.Pending || got.Attempts != 0 || got.DeliveredAt != nil || len(got.Tries) != 2 {
		t.Fatalf("replayed: %+v, want pending, no attempts since, its log kept", got)
	}
	if got := send(); got.State != hook.Pending || got.Attempts != 1 || len(got.Tries) != 3 {
		t.Fatalf("the replay's first failure: %+v, want pending for its next try", got)
	}
}

// replayAll replays endpoint id since a time through the api and returns
// how many events it queued.
func (ts *testServer) replayAll(t *testing.T, id int64, since time.Time) int {
	t.Helper()
	r := ts.admin(t, "POST", fmt.Sprintf("/admin/v1/webhooks/%d/replay", id), fmt.Sprintf(`{"since":%q}`, since.Format(time.RFC3339Nano)))
	var v struct {
		WebhookID int64     `json:"webhook_id"`
		Since     time.Time `json:"since"`
		Queued    int       `json:"queued"`
	}
	r.decode(t, &v)
	if r.status != http.StatusAccepted || v.WebhookID != id || !v.Since.Equal(since) {
		t.Fatalf("replay of %d since %v: %d %s", id, since, r.status, r.body)
	}
	return v.Queued
}

// The deliveries' page: newest first with their attempts, a state filter,
// pages by before; 404 for an unknown endpoint and 400 for a bad query.
func TestWebhookDeliveries(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	evs := ts.outboxEvents(t, 3)
	c := ts.register(t, hookURL, "order.*")
	path := fmt.Sprintf("/admin/v1/webhooks/%d/deliveries", c.WebhookID)
	page := func(query string) (ds []httpapi.DeliveryView, next *int64) {
		t.Helper()
		r := ts.admin(t, "GET", path+query, "")
		var v struct {
			Deliveries []httpapi.DeliveryView `json:"deliveries"`
			Next       *int64                 `json:"next_before"`
		}
		r.decode(t, &v)
		if r.status != http.StatusOK {
			t.Fatalf("deliveries%s: %d %s", query, r.status, r.body)
		}
		return v.Deliveries, v.Next
	}
	if ds, next := page(""); len(ds) != 0 || next != nil {
		t.Fatalf("before any: %v %v", ds, next)
	}
	ts.replayAll(t, c.WebhookID, evs[0].Time)

	ds, next := page("")
	if len(ds) != 3 || next != nil || !slices.IsSortedFunc(ds, func(a, b httpapi.DeliveryView) int { return int(b.DeliveryID - a.DeliveryID) }) {
		t.Fatalf("all: %+v %v", ds, next)
	}
	for _, d := range ds {
		if d.State != string(hook.Pending) || d.Type != string(outbox.OrderCreated) || d.NextAttemptAt == nil || d.Attempts != 0 ||
			d.Tries == nil || len(d.Tries) != 0 || d.Stream == "" || d.Seq < 1 || !slices.Contains(eventIDs(evs), d.EventID) {
			t.Fatalf("delivery %+v", d)
		}
	}
	first, next := page("?limit=2")
	if len(first) != 2 || next == nil || *next != first[1].DeliveryID || first[0].DeliveryID != ds[0].DeliveryID {
		t.Fatalf("first page: %+v next %v", first, next)
	}
	rest, next := page(fmt.Sprintf("?limit=2&before=%d", *next))
	if len(rest) != 1 || next != nil || rest[0].DeliveryID != ds[2].DeliveryID {
		t.Fatalf("second page: %+v next %v", rest, next)
	}
	if got, _ := page("?state=delivered"); len(got) != 0 {
		t.Fatalf("delivered: %+v", got)
	}
	if got, _ := page("?state=pending&limit=200"); len(got) != 3 {
		t.Fatalf("pending: %+v", got)
	}

	for _, tc := range []struct{ query, says string }{
		{"?state=bogus", "state is pending, delivered or failed"},
		{"?state=", "state is pending, delivered or failed"},
		{"?state=PENDING", "state is pending, delivered or failed"},
		{"?limit=0", "limit is between 1 and 200"},
		{"?limit=201", "limit is between 1 and 200"},
		{"?limit=ten", "limit is a number between 1 and 200"},
		{"?before=0", "before is a delivery_id"},
		{"?before=-3", "before is a delivery_id"},
		{"?before=x", "before is a delivery_id"},
	} {
		wantMessage(t, ts.admin(t, "GET", path+tc.query, ""), http.StatusBadRequest, "INVALID_ARGUMENT", tc.says)
	}
	wantError(t, ts.admin(t, "GET", "/admin/v1/webhooks/999999999/deliveries", ""), http.StatusNotFound, "NOT_FOUND")
}

// Every refused registration is a 400 that says what is wrong, and
// registers nothing.
func TestWebhookRegisterRefuses(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	long := "https://93.184.215.14/" + strings.Repeat("a", 2048)
	for _, tc := range []struct{ name, body, says string }{
		{"unknown event type", `{"url":"` + hookURL + `","events":["order.bogus"]}`, `"order.bogus" is not an event type`},
		{"unknown family", `{"url":"` + hookURL + `","events":["shipment.*"]}`, `"shipment.*" names no family`},
		{"a pattern in the middle", `{"url":"` + hookURL + `","events":["order.*.paid"]}`, `"order.*.paid" is not an event type`},
		{"empty events", `{"url":"` + hookURL + `","events":[]}`, "at least one pattern"},
		{"no events", `{"url":"` + hookURL + `"}`, "at least one pattern"},
		{"events not a list", `{"url":"` + hookURL + `","events":"order.*"}`, `"events"`},
		{"no url", `{"events":["*"]}`, "absolute http or https URL"},
		{"url without scheme", `{"url":"example.com/hook","events":["*"]}`, "absolute http or https URL"},
		{"ftp url", `{"url":"ftp://example.com/hook","events":["*"]}`, "absolute http or https URL"},
		{"url without host", `{"url":"https:///hook","events":["*"]}`, "absolute http or https URL"},
		{"url with a password", `{"url":"https://shop:pw@93.184.215.14/hook","events":["*"]}`, "user name or password"},
		{"url too long", `{"url":"` + long + `","events":["*"]}`, "longer than 2048 bytes"},
		{"description too long", `{"url":"` + hookURL + `","events":["*"],"description":"` + strings.Repeat("d", 256) + `"}`, "longer than 255 bytes"},
		{"a secret of one's own", `{"url":"` + hookURL + `","events":["*"],"secret":"whsec_x"}`, `unknown field "secret"`},
		{"not JSON", `{"url":`, "not a valid JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantMessage(t, ts.admin(t, "POST", "/admin/v1/webhooks", tc.body), http.StatusBadRequest, "INVALID_ARGUMENT", tc.says)
		})
	}
	if eps, err := ts.db.Webhooks.Endpoints(context.Background(), false); err != nil || len(eps) != 0 {
		t.Fatalf("refused registrations left %v (%v)", eps, err)
	}
}

// With private addresses refused (production's default), an endpoint on
// loopback, a private network or a name resolving to one is a 400 naming
// why, at registration and at a change of URL; a public address is taken.
func TestWebhookPrivateAddressesRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	log := testLogger(t)
	srv := httptest.NewServer(httpapi.New(ts.svc, wiring.Services(ts.svc, ts.db.DB, log, false, nil), auth.NewVerifier(testSecret), nil, log))
	t.Cleanup(srv.Close)
	admin := adminToken(t)
	do := func(method, path, body string) response {
		return ts.do(t, srv.URL, request{method: method, path: path, token: admin, body: body})
	}
	for url, says := range map[string]string{
		"http://127.0.0.1:8080/hook":   "loopback",
		"http://localhost:8080/hook":   "loopback",
		"http://[::1]/hook":            "loopback",
		"http://10.1.2.3/hook":         "private",
		"http://[::ffff:10.1.2.3]/":    "private",
		"http://169.254.169.254/meta/": "link-local",
	} {
		wantMessage(t, do("POST", "/admin/v1/webhooks", fmt.Sprintf(`{"url":%q,"events":["*"]}`, url)), http.StatusBadRequest, "INVALID_ARGUMENT", says)
	}
	r := do("POST", "/admin/v1/webhooks", `{"url":"https://93.184.215.14/hook","events":["*"]}`)
	if r.status != http.StatusCreated {
		t.Fatalf("a public address: %d %s", r.status, r.body)
	}
	var c httpapi.CreatedWebhookView
	r.decode(t, &c)
	path := fmt.Sprintf("/admin/v1/webhooks/%d", c.WebhookID)
	wantMessage(t, do("PATCH", path, `{"url":"http://127.0.0.1/hook"}`), http.StatusBadRequest, "INVALID_ARGUMENT", "loopback")
	if v := ts.webhookOf(t, c.WebhookID); v.URL != "https://93.184.215.14/hook" {
		t.Fatalf("a refused change of URL changed it: %+v", v)
	}
	eps, err := ts.db.Webhooks.Endpoints(context.Background(), false)
	if err != nil || len(eps) != 1 {
		t.Fatalf("endpoints %v (%v), want the public one alone", eps, err)
	}

	// The service alone, as the api's wiring builds it for production.
	svc := &webhooks.Service{Store: ts.db.Webhooks, NewSecret: webhook.NewSecret, Now: time.Now,
		CheckURL: func(ctx context.Context, raw string) error { return webhook.CheckURL(ctx, raw, false) }}
	_, _, err = svc.Register(context.Background(), webhooks.Registration{URL: "http://127.0.0.1:9/hook", Events: []string{"*"}})
	if !errors.Is(err, order.ErrInvalidArgument) || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("the service registered a loopback endpoint: %v", err)
	}
}
