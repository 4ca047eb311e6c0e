package httpapi_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/placing"
	"github.com/seckill/seckill/pkg/service/webhooks"
)

// unknownOrderNo has the form of an order number but was never issued.
const unknownOrderNo = "01ARZ3NDEKTSV4RRFFQ69G5FAV-1"

// noWrites runs f and fails if it changed anything in Redis (any key under
// the test's prefix, so stock, in-flight, quotas, idempotency records and
// reservations) or published anything to the topic.
func (ts *testServer) noWrites(t *testing.T, items []int64, f func()) {
	t.Helper()
	ts.noWritesIf(t, items, func() bool { f(); return true })
}

// noWritesIf is noWrites for an f that may find the case did not arise
// (false): nothing is checked then.
func (ts *testServer) noWritesIf(t *testing.T, items []int64, f func() bool) {
	t.Helper()
	dump, end := ts.redisDump(t), ts.topicEnd(t)
	snaps := make([]reservation.Snapshot, len(items))
	for i, it := range items {
		snaps[i] = ts.stock(t, it)
	}
	if !f() {
		return
	}
	for i, it := range items {
		if got := ts.stock(t, it); got != snaps[i] {
			t.Errorf("item %d stock changed: %+v -> %+v", it, snaps[i], got)
		}
	}
	if got := ts.redisDump(t); got != dump {
		t.Errorf("Redis changed:\nbefore:\n%s\nafter:\n%s", dump, got)
	}
	if got := ts.topicEnd(t); got != end {
		t.Errorf("topic end offset %d -> %d: a rejected request published", end, got)
	}
}

// Every error code of the contract, produced through HTTP against the real
// services, with nothing written for any of them.
func TestErrorContract(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	now := time.Now()
	openItem, open := ts.openSale(t, 10, 2)
	soldOutItem, soldOut := ts.openSale(t, 0, 1)
	future := ts.newActivity(t, openItem, now.Add(2*time.Hour), now.Add(3*time.Hour), 1) // after open's end
	past := ts.newActivity(t, openItem, now.Add(-2*time.Hour), now.Add(-time.Hour), 1)
	coldItem := ts.newItem(t, 5)
	cold := ts.newActivity(t, coldItem, now.Add(-time.Minute), now.Add(time.Hour), 1)
	const holder = 500
	held := ts.mustPlace(t, ts.url, buyerToken(t, holder), "first", open)

	// The same API over a Redis nobody listens at.
	downRDB := redis.NewClient(&redis.Options{Addr: unusedAddr, MaxRetries: -1})
	t.Cleanup(func() { downRDB.Close() })
	down := ts.service(t, ts.svc.Publisher)
	useStore(down, stockredis.New(downRDB, ts.prefix))
	downURL := ts.serve(t, down, nil)

	buyer, admin := buyerToken(t, 100), adminToken(t)
	orderReq := func(body string) request {
		return request{method: "POST", path: "/api/v1/orders", token: buyer,
			header: map[string]string{"Idempotency-Key": "key-1"}, body: body}
	}
	withKey := func(key string) request {
		r := orderReq(fmt.Sprintf(`{"activity_id":%d}`, open))
		r.header = map[string]string{"Idempotency-Key": key}
		return r
	}
	adminReq := func(method, path, body string) request {
		return request{method: method, path: path, token: admin, body: body}
	}
	oa := func(format string) string { return fmt.Sprintf(format, open) }
	// exactly4K is a body of MaxBody bytes: the limit itself is allowed.
	exactly4K := fmt.Sprintf(`{"activity_id":%d}`, future)
	exactly4K += strings.Repeat(" ", httpapi.MaxBody-len(exactly4K))
	tooBig := oa(`{"activity_id":%d}`) + strings.Repeat(" ", httpapi.MaxBody)

	cases := []struct {
		name   string
		base   string // "" is the healthy server
		req    request
		status int
		code   string
	}{
		// 400: the body.
		{name: "malformed JSON", req: orderReq(oa(`{"activity_id":%d`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "empty body", req: orderReq(""), status: 400, code: "INVALID_ARGUMENT"},
		{name: "array instead of object", req: orderReq(oa(`[%d]`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "JSON null", req: orderReq("null"), status: 400, code: "INVALID_ARGUMENT"},
		{name: "unknown field", req: orderReq(oa(`{"activity_id":%d,"colour":"red"}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "field name in another case", req: orderReq(oa(`{"ACTIVITY_ID":%d}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "field given twice", req: orderReq(oa(`{"activity_id":%d,"activity_id":1}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "long non-ASCII unknown field", req: orderReq(oa(`{"activity_id":%d,"` + strings.Repeat("é", 100) + `":1}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "user_id in the body", req: orderReq(oa(`{"activity_id":%d,"user_id":500}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "activity_id missing", req: orderReq(`{"quantity":1}`), status: 400, code: "INVALID_ARGUMENT"},
		{name: "activity_id zero", req: orderReq(`{"activity_id":0}`), status: 400, code: "INVALID_ARGUMENT"},
		{name: "activity_id negative", req: orderReq(`{"activity_id":-7}`), status: 400, code: "INVALID_ARGUMENT"},
		{name: "activity_id as string", req: orderReq(oa(`{"activity_id":"%d"}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "activity_id fractional", req: orderReq(oa(`{"activity_id":%d.5}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "activity_id overflows int64", req: orderReq(`{"activity_id":9223372036854775808}`), status: 400, code: "INVALID_ARGUMENT"},
		{name: "quantity zero", req: orderReq(oa(`{"activity_id":%d,"quantity":0}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "quantity negative", req: orderReq(oa(`{"activity_id":%d,"quantity":-1}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "quantity above per_user_limit", req: orderReq(oa(`{"activity_id":%d,"quantity":3}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "quantity above the global maximum", req: orderReq(oa(`{"activity_id":%d,"quantity":1001}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "quantity overflows int", req: orderReq(oa(`{"activity_id":%d,"quantity":99999999999999999999}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "quantity as string", req: orderReq(oa(`{"activity_id":%d,"quantity":"1"}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "quantity as boolean", req: orderReq(oa(`{"activity_id":%d,"quantity":true}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "quantity in exponent form", req: orderReq(oa(`{"activity_id":%d,"quantity":1e0}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "second object after the first", req: orderReq(oa(`{"activity_id":%[1]d} {"activity_id":%[1]d}`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "trailing garbage", req: orderReq(oa(`{"activity_id":%d}x`)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "trailing bracket", req: orderReq(oa(`{"activity_id":%d}]`)), status: 400, code: "INVALID_ARGUMENT"},
		// 400: the Idempotency-Key header.
		{name: "no Idempotency-Key", req: request{method: "POST", path: "/api/v1/orders", token: buyer, body: oa(`{"activity_id":%d}`)}, status: 400, code: "INVALID_ARGUMENT"},
		{name: "Idempotency-Key of 65 characters", req: withKey(strings.Repeat("k", 65)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "Idempotency-Key with a space", req: withKey("a b"), status: 400, code: "INVALID_ARGUMENT"},
		{name: "Idempotency-Key with a dot", req: withKey("a.b"), status: 400, code: "INVALID_ARGUMENT"},
		{name: "Idempotency-Key not ASCII", req: withKey("schlüssel"), status: 400, code: "INVALID_ARGUMENT"},
		// 413.
		{name: "order body over 4 KiB", req: orderReq(tooBig), status: 413, code: "PAYLOAD_TOO_LARGE"},
		{name: "admin body over 4 KiB", req: adminReq("POST", "/admin/v1/items", `{"name":"x","stock":1}`+strings.Repeat(" ", httpapi.MaxBody)), status: 413, code: "PAYLOAD_TOO_LARGE"},
		{name: "body of exactly 4 KiB is read", req: orderReq(exactly4K), status: 409, code: "ACTIVITY_NOT_ACTIVE"},
		// 404, 409: the sale.
		{name: "no such activity", req: orderReq(`{"activity_id":999999999}`), status: 404, code: "NOT_FOUND"},
		{name: "sold out", req: orderReq(fmt.Sprintf(`{"activity_id":%d}`, soldOut)), status: 409, code: "SOLD_OUT"},
		{name: "already purchased", req: request{method: "POST", path: "/api/v1/orders", token: buyerToken(t, holder),
			header: map[string]string{"Idempotency-Key": "second"}, body: oa(`{"activity_id":%d}`)}, status: 409, code: "ALREADY_PURCHASED"},
		{name: "before starts_at", req: orderReq(fmt.Sprintf(`{"activity_id":%d}`, future)), status: 409, code: "ACTIVITY_NOT_ACTIVE"},
		{name: "after ends_at", req: orderReq(fmt.Sprintf(`{"activity_id":%d}`, past)), status: 409, code: "ACTIVITY_NOT_ACTIVE"},
		{name: "stock not warmed", req: orderReq(fmt.Sprintf(`{"activity_id":%d}`, cold)), status: 409, code: "NOT_WARMED"},
		// 503.
		{name: "Redis unreachable", base: downURL, req: orderReq(oa(`{"activity_id":%d}`)), status: 503, code: "UNAVAILABLE"},
		// 401, 403 (every forgery is in TestTokenForgery).
		{name: "no token", req: request{method: "POST", path: "/api/v1/orders", header: map[string]string{"Idempotency-Key": "k"},
			body: oa(`{"activity_id":%d}`)}, status: 401, code: "UNAUTHENTICATED"},
		{name: "buyer on an admin route", req: request{method: "POST", path: "/admin/v1/items", token: buyer,
			body: `{"name":"x","stock":1}`}, status: 403, code: "FORBIDDEN"},
		// Routes and methods.
		{name: "unknown route", req: request{method: "GET", path: "/api/v1/nothing", token: buyer}, status: 404, code: "NOT_FOUND"},
		{name: "DELETE /healthz", req: request{method: "DELETE", path: "/healthz"}, status: 405, code: "METHOD_NOT_ALLOWED"},
		{name: "DELETE /api/v1/orders", req: request{method: "DELETE", path: "/api/v1/orders", token: buyer}, status: 405, code: "METHOD_NOT_ALLOWED"},
		{name: "POST a sale page", req: request{method: "POST", path: "/api/v1/activities/1", body: "{}"}, status: 405, code: "METHOD_NOT_ALLOWED"},
		{name: "PUT an order", req: request{method: "PUT", path: "/api/v1/orders/" + held, token: buyer, body: "{}"}, status: 405, code: "METHOD_NOT_ALLOWED"},
		// Order status.
		{name: "malformed order number", req: request{method: "GET", path: "/api/v1/orders/not-an-order", token: buyer}, status: 404, code: "NOT_FOUND"},
		{name: "unknown order number", req: request{method: "GET", path: "/api/v1/orders/" + unknownOrderNo, token: buyer}, status: 404, code: "NOT_FOUND"},
		{name: "another user's order", req: request{method: "GET", path: "/api/v1/orders/" + held, token: buyer}, status: 404, code: "NOT_FOUND"},
		// Admin.
		{name: "item with negative stock", req: adminReq("POST", "/admin/v1/items", `{"name":"x","stock":-1}`), status: 400, code: "INVALID_ARGUMENT"},
		{name: "item without stock", req: adminReq("POST", "/admin/v1/items", `{"name":"x"}`), status: 400, code: "INVALID_ARGUMENT"},
		{name: "item with blank name", req: adminReq("POST", "/admin/v1/items", `{"name":"  ","stock":1}`), status: 400, code: "INVALID_ARGUMENT"},
		{name: "item with unknown field", req: adminReq("POST", "/admin/v1/items", `{"name":"x","stock":1,"price":3}`), status: 400, code: "INVALID_ARGUMENT"},
		{name: "activity ending before it starts", req: adminReq("POST", "/admin/v1/activities", fmt.Sprintf(
			`{"item_id":%d,"starts_at":"2030-01-02T00:00:00Z","ends_at":"2030-01-01T00:00:00Z"}`, openItem)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "activity with per_user_limit 0", req: adminReq("POST", "/admin/v1/activities", fmt.Sprintf(
			`{"item_id":%d,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z","per_user_limit":0}`, openItem)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "activity with a bad time", req: adminReq("POST", "/admin/v1/activities", fmt.Sprintf(
			`{"item_id":%d,"starts_at":"tomorrow","ends_at":"2030-01-02T00:00:00Z"}`, openItem)), status: 400, code: "INVALID_ARGUMENT"},
		{name: "activity of no such item", req: adminReq("POST", "/admin/v1/activities",
			`{"item_id":999999999,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z"}`), status: 404, code: "NOT_FOUND"},
		{name: "warmup of no such activity", req: adminReq("POST", "/admin/v1/activities/999999999/warmup", ""), status: 404, code: "NOT_FOUND"},
		{name: "warmup of a malformed id", req: adminReq("POST", "/admin/v1/activities/abc/warmup", ""), status: 404, code: "NOT_FOUND"},
		{name: "stock of no such item", req: adminReq("GET", "/admin/v1/items/999999999/stock", ""), status: 404, code: "NOT_FOUND"},
		{name: "stock of item 0", req: adminReq("GET", "/admin/v1/items/0/stock", ""), status: 404, code: "NOT_FOUND"},
	}
	items := []int64{openItem, soldOutItem, coldItem}
	t.Run("cases", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				base := tc.base
				if base == "" {
					base = ts.url
				}
				ts.noWrites(t, items, func() {
					wantError(t, ts.do(t, base, tc.req), tc.status, tc.code)
				})
			})
		}
	})

	// The refusals above were not for want of an orderable sale, and a
	// quantity of exactly per_user_limit is taken.
	before := ts.stock(t, openItem)
	accepted(t, ts.do(t, ts.url, orderReq(oa(`{"activity_id":%d,"quantity":2}`))))
	if got := ts.stock(t, openItem); got.Stock != before.Stock-2 || got.Inflight != before.Inflight+2 {
		t.Fatalf("stock %+v -> %+v, want two units reserved", before, got)
	}
}

// hs256 signs header.claims by hand, so the header can say anything.
func hs256(header, claims string, key []byte) string {
	enc := base64.RawURLEncoding
	in := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(in))
	return in + "." + enc.EncodeToString(mac.Sum(nil))
}

func signWith(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Every forged, broken or unacceptable token is 401 UNAUTHENTICATED and
// places nothing; a non-admin on an admin route is 403 FORBIDDEN.
func TestTokenForgery(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	item, act := ts.openSale(t, 5, 1)
	coldItem := ts.newItem(t, 5)
	cold := ts.newActivity(t, coldItem, time.Now().Add(-time.Minute), time.Now().Add(time.Hour), 1)

	exp := time.Now().Add(time.Hour).Unix()
	claims := func(kv ...any) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "42", "exp": exp}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(c, kv[i].(string))
			} else {
				c[kv[i].(string)] = kv[i+1]
			}
		}
		return c
	}
	hs := func(kv ...any) string { return signWith(t, jwt.SigningMethodHS256, testSecret, claims(kv...)) }
	valid := hs()
	parts := strings.Split(valid, ".")
	otherPayload := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"sub":"43","exp":%d}`, exp)))
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	payload := fmt.Sprintf(`{"sub":"42","exp":%d}`, exp)

	cases := []struct {
		name string
		auth string // the whole Authorization header; "" sends none
	}{
		{name: "no Authorization header"},
		{name: "Bearer and nothing", auth: "Bearer "},
		{name: "Bearer without a space", auth: "Bearer" + valid},
		{name: "token without the Bearer scheme", auth: valid},
		{name: "Basic scheme", auth: "Basic dXNlcjpwYXNz"},
		{name: "not a JWT", auth: "Bearer not-a-jwt"},
		{name: "two segments", auth: "Bearer " + parts[0] + "." + parts[1]},
		{name: "signature stripped", auth: "Bearer " + parts[0] + "." + parts[1] + "."},
		{name: "payload swapped under the original signature", auth: "Bearer " + parts[0] + "." + otherPayload + "." + parts[2]},
		{name: "expired", auth: "Bearer " + hs("exp", time.Now().Add(-time.Minute).Unix())},
		{name: "not valid yet", auth: "Bearer " + hs("nbf", time.Now().Add(time.Hour).Unix())},
		{name: "missing exp", auth: "Bearer " + hs("exp", nil)},
		{name: "exp as a string", auth: "Bearer " + hs("exp", "tomorrow")},
		{name: "wrong secret", auth: "Bearer " + signWith(t, jwt.SigningMethodHS256, []byte("another-secret-0123456789abcdefghij"), claims())},
		{name: "alg none", auth: "Bearer " + none},
		{name: "alg none with an HMAC signature", auth: "Bearer " + hs256(`{"alg":"none","typ":"JWT"}`, payload, testSecret)},
		{name: "HS512 with the right secret", auth: "Bearer " + signWith(t, jwt.SigningMethodHS512, testSecret, claims())},
		{name: "HS384 with the right secret", auth: "Bearer " + signWith(t, jwt.SigningMethodHS384, testSecret, claims())},
		{name: "RS256 header, HMAC-signed with the secret", auth: "Bearer " + hs256(`{"alg":"RS256","typ":"JWT"}`, payload, testSecret)},
		{name: "RS256 signed with some RSA key", auth: "Bearer " + signWith(t, jwt.SigningMethodRS256, rsaKey, claims())},
		{name: "sub empty", auth: "Bearer " + hs("sub", "")},
		{name: "sub missing", auth: "Bearer " + hs("sub", nil)},
		{name: "sub of 129 characters", auth: "Bearer " + hs("sub", strings.Repeat("é", 129))},
		{name: "sub as a fraction", auth: "Bearer " + hs("sub", 4.2)},
		{name: "sub as an array", auth: "Bearer " + hs("sub", []string{"42"})},
		{name: "sub as an object", auth: "Bearer " + hs("sub", map[string]any{"id": "42"})},
	}
	items := []int64{item, coldItem}
	t.Run("unauthenticated", func(t *testing.T) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				ts.noWrites(t, items, func() {
					r := ts.do(t, ts.url, request{method: "POST", path: "/api/v1/orders", rawAuth: tc.auth,
						header: map[string]string{"Idempotency-Key": fmt.Sprintf("forged-%d", i)},
						body:   fmt.Sprintf(`{"activity_id":%d}`, act)})
					wantError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
					r = ts.do(t, ts.url, request{method: "GET", path: "/api/v1/orders/" + unknownOrderNo, rawAuth: tc.auth})
					wantError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
					r = ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/admin/v1/items/%d/stock", item), rawAuth: tc.auth})
					wantError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
				})
			})
		}
	})

	adminRoutes := []request{
		{method: "POST", path: "/admin/v1/items", body: `{"name":"x","stock":1}`},
		{method: "POST", path: "/admin/v1/activities", body: fmt.Sprintf(
			`{"item_id":%d,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z"}`, item)},
		{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/warmup", cold)},
		{method: "GET", path: fmt.Sprintf("/admin/v1/items/%d/stock", item)},
	}
	roles := []struct {
		name   string
		token  string
		status int
		code   string
	}{
		{name: "buyer", token: valid, status: 403, code: "FORBIDDEN"},
		{name: "role Admin", token: hs("role", "Admin"), status: 403, code: "FORBIDDEN"},
		{name: "role administrator", token: hs("role", "administrator"), status: 403, code: "FORBIDDEN"},
		{name: "role admin, wrong secret", token: signWith(t, jwt.SigningMethodHS256, []byte("another-secret-0123456789abcdefghij"),
			claims("role", "admin")), status: 401, code: "UNAUTHENTICATED"},
		{name: "role admin, alg none", token: hs256(`{"alg":"none"}`, fmt.Sprintf(`{"sub":"1","role":"admin","exp":%d}`, exp), nil), status: 401, code: "UNAUTHENTICATED"},
	}
	t.Run("admin routes", func(t *testing.T) {
		for _, role := range roles {
			t.Run(role.name, func(t *testing.T) {
				t.Parallel()
				ts.noWrites(t, items, func() {
					for _, r := range adminRoutes {
						r.token = role.token
						wantError(t, ts.do(t, ts.url, r), role.status, role.code)
					}
				})
				if ts.stock(t, coldItem).Warmed {
					t.Fatal("a refused warmup loaded the stock")
				}
			})
		}
	})

	// Controls: the same routes take good tokens, and the hand-made
	// signature is right, so the forgeries failed for what they forged.
	if r := ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/admin/v1/items/%d/stock", item), token: adminToken(t)}); r.status != 200 {
		t.Fatalf("admin control: %d %s", r.status, r.body)
	}
	ts.mustPlace(t, ts.url, hs256(`{"alg":"HS256","typ":"JWT"}`, payload, testSecret), "control-1", act)
	ts.mustPlace(t, ts.url, hs("sub", "9223372036854775807"), "control-2", act)
	// Subjects are strings: what an identity provider writes buys too, up
	// to 128 characters of any kind.
	ts.mustPlace(t, ts.url, hs("sub", "auth0|65ab{i1}:q:1:"+strings.Repeat("é", 109)), "control-3", act)
	if snap := ts.stock(t, item); snap.Stock != 2 || snap.Inflight != 3 {
		t.Fatalf("after the three controls: %+v, want stock 2, in flight 3", snap)
	}
}

// The same user and key twice is one order and one reservation; two users
// with the same key are two orders; a burst of the same request is one.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	item, act := ts.openSale(t, 10, 1)
	alice, bob, carol := buyerToken(t, 1), buyerToken(t, 2), buyerToken(t, 3)

	first := ts.mustPlace(t, ts.url, alice, "same-key", act)
	again := ts.mustPlace(t, ts.url, alice, "same-key", act)
	if again != first {
		t.Fatalf("replay gave %s, want %s", again, first)
	}
	if snap := ts.stock(t, item); snap.Stock != 9 || snap.Inflight != 1 {
		t.Fatalf("after a replay: %+v, want stock 9, in flight 1", snap)
	}
	if end := ts.topicEnd(t); end != 1 {
		t.Fatalf("%d events published, want 1", end)
	}

	other := ts.mustPlace(t, ts.url, bob, "same-key", act)
	if other == first {
		t.Fatalf("two users with one key share order %s", first)
	}

	const burst = 16
	nos := make([]string, burst)
	codes := make([]int, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := ts.tryDo(ts.url, request{method: "POST", path: "/api/v1/orders", token: carol,
				header: map[string]string{"Idempotency-Key": "burst-key"}, body: fmt.Sprintf(`{"activity_id":%d}`, act)})
			if err != nil {
				return // codes[i] stays 0
			}
			codes[i] = r.status
			var p placed
			_ = json.Unmarshal(r.body, &p)
			nos[i] = p.OrderNo
		}()
	}
	wg.Wait()
	for i := range burst {
		if codes[i] != http.StatusAccepted || nos[i] != nos[0] {
			t.Fatalf("burst request %d: status %d order %q, want 202 %q", i, codes[i], nos[i], nos[0])
		}
	}

	if snap := ts.stock(t, item); snap.Stock != 7 || snap.Inflight != 3 {
		t.Fatalf("end: %+v, want stock 7, in flight 3", snap)
	}
	if got := ts.reservations(t, item); len(got) != 3 {
		t.Fatalf("reservations %v, want 3", got)
	}
	events := ts.events(t, 3)
	if end := ts.topicEnd(t); end != 3 {
		t.Fatalf("%d events published, want 3", end)
	}
	users := map[string]string{}
	for _, e := range events {
		users[e.UserID] = e.OrderNo
	}
	want := map[string]string{"1": first, "2": other, "3": nos[0]}
	for u, no := range want {
		if users[u] != no {
			t.Fatalf("events by user %v, want %v", users, want)
		}
	}
}

// A publish that fails answers 503 with Retry-After and gives everything
// back: stock, in-flight, the quota and the idempotency key.
func TestPublishFailure(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	item, act := ts.openSale(t, 5, 1)
	dead := newDeadPublisher(t, ts.topic)
	brokenURL := ts.serve(t, ts.service(t, dead), nil)
	const user = 9
	tok := buyerToken(t, user)
	keys := ts.store.Keys(reservation.One(item))

	before, end := ts.stock(t, item), ts.topicEnd(t)
	wantError(t, ts.place(t, brokenURL, tok, "retry-me", act), http.StatusServiceUnavailable, "UNAVAILABLE")
	if got := ts.stock(t, item); got != before {
		t.Fatalf("stock after the failed publish: %+v, want %+v", got, before)
	}
	if ts.exists(t, keys.Quota(act, strconv.Itoa(user))) {
		t.Fatal("the failed order still holds the user's quota")
	}
	if ts.exists(t, keys.Idem(strconv.Itoa(user), "retry-me")) {
		t.Fatal("the failed order still holds the idempotency key")
	}
	if got := ts.topicEnd(t); got != end {
		t.Fatalf("topic end %d -> %d", end, got)
	}
	failed := ts.reservations(t, item)
	if len(failed) != 1 {
		t.Fatalf("reservations %v, want the one released", failed)
	}
	info, err := ts.store.Reservations.Reservation(context.Background(), failed[0])
	if err != nil {
		t.Fatal(err)
	}
	if info.State != reservation.StateReleased || info.Reason != order.ReasonPublishFailed {
		t.Fatalf("failed reservation %+v, want RELEASED for %s", info, order.ReasonPublishFailed)
	}

	// The same user, the same key, a healthy API over the same store: a new order.
	no := ts.mustPlace(t, ts.url, tok, "retry-me", act)
	if no == failed[0] {
		t.Fatalf("the retry replayed the failed order %s", no)
	}
	if got := ts.stock(t, item); got.Stock != before.Stock-1 || got.Inflight != before.Inflight+1 {
		t.Fatalf("after the retry: %+v, want one unit taken from %+v", got, before)
	}
	if got := ts.topicEnd(t); got != end+1 {
		t.Fatalf("topic end %d -> %d, want one event", end, got)
	}
}

func newDeadPublisher(t *testing.T, topic string) placing.Publisher {
	t.Helper()
	p := orderevents.NewPublisher(orderevents.Config{Brokers: []string{unusedAddr}, Topic: topic, WriteTimeout: time.Second})
	t.Cleanup(func() { p.Close() })
	return p
}

// After SOLD_OUT, released stock sells again within about two seconds, and
// while the item is flagged sold out a replayed key still gets its order
// and a buyer holding an order hears ALREADY_PURCHASED.
func TestSoldOutFastPath(t *testing.T) {
	t.Parallel()
	clock := &frozenClock{}
	ts := newTestServer(t, withClock(clock.Now))
	item, act := ts.openSale(t, 1, 1)
	alice, bob := buyerToken(t, 1), buyerToken(t, 2)

	held := ts.mustPlace(t, ts.url, alice, "alice-key", act)
	// With the clock stopped the sold-out flag cannot expire, so every
	// request below meets it.
	clock.freeze()
	wantError(t, ts.place(t, ts.url, bob, "bob-key", act), http.StatusConflict, "SOLD_OUT")
	// The flag keeps the reserve script's precedence: a buyer holding an
	// order hears so, whatever key she sends.
	wantError(t, ts.place(t, ts.url, alice, "alice-new-key", act), http.StatusConflict, "ALREADY_PURCHASED")
	if got := ts.mustPlace(t, ts.url, alice, "alice-key", act); got != held {
		t.Fatalf("replay while sold out gave %s, want %s", got, held)
	}

	rel, err := ts.store.Reservations.Release(context.Background(), reservation.Ref{OrderNo: held, UserID: "1", ItemID: item, ActivityID: act, IdempotencyKey: "alice-key"}, reservation.ReleaseOptions{Reason: order.ReasonCancelled, From: []reservation.State{reservation.StateReserved}})
	if err != nil || !rel.Released {
		t.Fatalf("release: %v %v (state %s)", rel.Released, err, rel.State)
	}
	clock.unfreeze()
	waittest.Until(t, 2500*time.Millisecond, "released stock sold again", func() bool {
		r := ts.place(t, ts.url, bob, "bob-key", act)
		if r.status == http.StatusAccepted {
			accepted(t, r)
			return true
		}
		wantError(t, r, http.StatusConflict, "SOLD_OUT")
		return false
	})
	if snap := ts.stock(t, item); snap.Stock != 0 || snap.Inflight != 1 {
		t.Fatalf("end: %+v, want stock 0, in flight 1", snap)
	}
}

// A request for more units than remain is refused SOLD_OUT, but the item is
// not flagged sold out: a buyer of the last unit still gets it.
func TestSoldOutForAQuantityLeavesTheRestOnSale(t *testing.T) {
	t.Parallel()
	clock := &frozenClock{}
	ts := newTestServer(t, withClock(clock.Now))
	item, act := ts.openSale(t, 1, 2)
	clock.freeze() // a flag set now could not expire during the test
	r := ts.do(t, ts.url, request{method: "POST", path: "/api/v1/orders", token: buyerToken(t, 1),
		header: map[string]string{"Idempotency-Key": "two"}, body: fmt.Sprintf(`{"activity_id":%d,"quantity":2}`, act)})
	wantError(t, r, http.StatusConflict, "SOLD_OUT")
	ts.mustPlace(t, ts.url, buyerToken(t, 2), "one", act)
	if snap := ts.stock(t, item); snap.Stock != 0 || snap.Inflight != 1 {
		t.Fatalf("end: %+v, want stock 0, in flight 1", snap)
	}
	// Now it is gone for everyone, and the flag may say so.
	wantError(t, ts.place(t, ts.url, buyerToken(t, 3), "late", act), http.StatusConflict, "SOLD_OUT")
}

// Warmup keeps the stock past the activity's end, and an order's quota,
// idempotency record and reservation outlive the sale too (a replay after
// it still finds the order; a close after the payment window still finds
// the reservation).
func TestKeysOutliveTheSale(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	item, act := ts.openSale(t, 5, 1) // ends in an hour
	no := ts.mustPlace(t, ts.url, buyerToken(t, 1), "ttl-key", act)
	k := ts.store.Keys(reservation.One(item))
	ctx := context.Background()
	endsIn := time.Hour - time.Minute // a minute's slack for the test's own time
	for name, key := range map[string]string{
		"stock": k.Stock(), "quota": k.Quota(act, "1"), "idempotency record": k.Idem("1", "ttl-key"), "reservation": k.Reservation(no),
	} {
		ttl, err := ts.rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= endsIn || ttl > 3*24*time.Hour {
			t.Errorf("%s %s expires in %v, want past the activity's end (in about 1h) and within days", name, key, ttl)
		}
	}
}

// After the sale ends a buyer retrying an accepted request with its key
// still gets the order back; a new key hears ACTIVITY_NOT_ACTIVE.
func TestReplayAfterTheSaleEnded(t *testing.T) {
	t.Parallel()
	clock := &frozenClock{}
	ts := newTestServer(t, withClock(clock.Now))
	_, act := ts.openSale(t, 5, 1)
	alice := buyerToken(t, 1)
	held := ts.mustPlace(t, ts.url, alice, "alice-key", act)

	clock.set(time.Now().Add(2 * time.Hour)) // the sale ended an hour ago
	if got := ts.mustPlace(t, ts.url, alice, "alice-key", act); got != held {
		t.Fatalf("replay after the sale gave %s, want %s", got, held)
	}
	wantError(t, ts.place(t, ts.url, alice, "alice-new-key", act), http.StatusConflict, "ACTIVITY_NOT_ACTIVE")
	wantError(t, ts.place(t, ts.url, buyerToken(t, 2), "alice-key", act), http.StatusConflict, "ACTIVITY_NOT_ACTIVE")
}

// Status: PENDING from Redis while MySQL has no row, the MySQL row once the
// consumer wrote it, FAILED with its reason once released, and 404 for
// anyone else and for malformed numbers.
func TestOrderStatus(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	item, act := ts.openSale(t, 5, 2)
	alice, bob := buyerToken(t, 1), buyerToken(t, 2)
	get := func(tok, no string) response {
		return ts.do(t, ts.url, request{method: "GET", path: "/api/v1/orders/" + no, token: tok})
	}
	view := func(r response) httpapi.OrderView {
		t.Helper()
		if r.status != http.StatusOK {
			t.Fatalf("status = %d, want 200; body %s", r.status, r.body)
		}
		var v httpapi.OrderView
		r.decode(t, &v)
		return v
	}

	start := time.Now()
	no := ts.mustPlace(t, ts.url, alice, "k1", act)
	if _, err := ts.db.Orders.Order(context.Background(), no); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("MySQL already has the order: %v", err)
	}
	v := view(get(alice, no))
	if v.OrderNo != no || v.Status != order.Pending || v.ActivityID != act || v.ItemID != item ||
		v.Quantity != 1 || v.FailureReason != "" || v.CreatedAt.Before(start.Add(-time.Second)) || v.UpdatedAt.IsZero() {
		t.Fatalf("pending view %+v", v)
	}
	for _, bad := range []string{"not-an-order", strings.ToLower(no), no + "0", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "01ARZ3NDEKTSV4RRFFQ69G5FAV-0", "%2e%2e"} {
		wantError(t, get(alice, bad), http.StatusNotFound, "NOT_FOUND")
	}
	wantError(t, get(bob, no), http.StatusNotFound, "NOT_FOUND")
	wantError(t, get(alice, unknownOrderNo), http.StatusNotFound, "NOT_FOUND")

	// The consumer's part: the event, as published, into MySQL.
	events := ts.events(t, 1)
	if events[0].OrderNo != no || events[0].UserID != "1" || events[0].Quantity != 1 {
		t.Fatalf("event %+v", events[0])
	}
	out, err := mysqltest.Fulfil(context.Background(), ts.db.DB, []order.FulfilRequest{{Event: events[0]}})
	if err != nil || out[no].Status != order.Created {
		t.Fatalf("fulfil: %+v %v", out, err)
	}
	v = view(get(alice, no))
	if v.Status != order.Created || v.ActivityID != act || v.ItemID != item || v.Quantity != 1 || v.CreatedAt.IsZero() {
		t.Fatalf("created view %+v", v)
	}
	wantError(t, get(bob, no), http.StatusNotFound, "NOT_FOUND")

	// A reservation released before it reached MySQL reads as FAILED.
	lost := ts.mustPlace(t, ts.url, bob, "k2", act)
	rel, err := ts.store.Reservations.Release(context.Background(), reservation.Ref{OrderNo: lost, UserID: "2", ItemID: item, ActivityID: act, IdempotencyKey: "k2"}, reservation.ReleaseOptions{Reason: order.ReasonPublishFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true})
	if err != nil || !rel.Released {
		t.Fatalf("release: %v %v", rel.Released, err)
	}
	v = view(get(bob, lost))
	if v.Status != order.Failed || v.FailureReason != order.ReasonPublishFailed {
		t.Fatalf("failed view %+v", v)
	}
	wantError(t, get(alice, lost), http.StatusNotFound, "NOT_FOUND")
}

// /healthz always answers; /readyz answers 200 only when Redis, MySQL and
// Kafka answer, and names what does not.
func TestReadiness(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	brokenURL := ts.serve(t, ts.svc, ts.checkers([]string{unusedAddr}))

	type readiness struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	for _, base := range []string{ts.url, brokenURL} {
		if r := ts.do(t, base, request{method: "GET", path: "/healthz"}); r.status != http.StatusOK {
			t.Fatalf("healthz: %d %s", r.status, r.body)
		}
	}

	r := ts.do(t, ts.url, request{method: "GET", path: "/readyz"})
	var ok readiness
	r.decode(t, &ok)
	if r.status != http.StatusOK || ok.Status != "ok" || ok.Error != nil ||
		ok.Checks["redis"] != "ok" || ok.Checks["mysql"] != "ok" || ok.Checks["kafka"] != "ok" {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}

	r = ts.do(t, brokenURL, request{method: "GET", path: "/readyz"})
	var bad readiness
	r.decode(t, &bad)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("readyz with Kafka down: %d %v %s", r.status, r.header, r.body)
	}
	if bad.Error == nil || bad.Error.Code != "UNAVAILABLE" || !strings.Contains(bad.Error.Message, "kafka") ||
		strings.Contains(bad.Error.Message, "redis") || strings.Contains(bad.Error.Message, "mysql") {
		t.Fatalf("readyz error %s, want UNAVAILABLE naming only kafka", r.body)
	}
	if bad.Checks["kafka"] != "unreachable" || bad.Checks["redis"] != "ok" || bad.Checks["mysql"] != "ok" {
		t.Fatalf("readyz checks %v", bad.Checks)
	}

	// Redis, then MySQL, out of reach: each is named alone.
	downRDB := redis.NewClient(&redis.Options{Addr: unusedAddr, MaxRetries: -1})
	t.Cleanup(func() { downRDB.Close() })
	downSQL, err := sql.Open("mysql", "seckill:seckill@tcp("+unusedAddr+")/seckill?timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { downSQL.Close() })
	for name, check := range map[string]func(context.Context) error{
		"redis": stockredis.New(downRDB, ts.prefix).Ping,
		"mysql": downSQL.PingContext,
	} {
		checkers := ts.checkers(kafkatest.Brokers())
		for i := range checkers {
			if checkers[i].Name == name {
				checkers[i].Check = check
			}
		}
		r := ts.do(t, ts.serve(t, ts.svc, checkers), request{method: "GET", path: "/readyz"})
		var got readiness
		r.decode(t, &got)
		if r.status != http.StatusServiceUnavailable || got.Error == nil || !strings.Contains(got.Error.Message, name) ||
			got.Checks[name] != "unreachable" || len(got.Checks) != 3 {
			t.Fatalf("readyz with %s down: %d %s", name, r.status, r.body)
		}
		for other, v := range got.Checks {
			if other != name && (v != "ok" || strings.Contains(got.Error.Message, other)) {
				t.Fatalf("readyz with %s down also blames %s: %s", name, other, r.body)
			}
		}
	}
}

// The admin routes' success bodies.
func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	admin := adminToken(t)

	r := ts.do(t, ts.url, request{method: "POST", path: "/admin/v1/items", token: admin, body: `{"name":" sneaker ","stock":5}`})
	var it struct {
		ItemID int64  `json:"item_id"`
		Name   string `json:"name"`
		Stock  int64  `json:"stock"`
	}
	r.decode(t, &it)
	if r.status != http.StatusCreated || it.ItemID <= 0 || it.Name != "sneaker" || it.Stock != 5 {
		t.Fatalf("create item: %d %s", r.status, r.body)
	}

	starts, ends := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond), time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	r = ts.do(t, ts.url, request{method: "POST", path: "/admin/v1/activities", token: admin, body: fmt.Sprintf(
		`{"item_id":%d,"starts_at":%q,"ends_at":%q}`, it.ItemID, starts.Format(time.RFC3339Nano), ends.Format(time.RFC3339Nano))})
	var a httpapi.ActivityView
	r.decode(t, &a)
	if r.status != http.StatusCreated || a.ActivityID <= 0 || a.ItemID != it.ItemID || !a.StartsAt.Equal(starts) ||
		!a.EndsAt.Equal(ends) || a.PerUserLimit != 1 {
		t.Fatalf("create activity: %d %s", r.status, r.body)
	}

	type warmed struct {
		ActivityID int64 `json:"activity_id"`
		ItemID     int64 `json:"item_id"`
		RedisStock int64 `json:"redis_stock"`
	}
	type stock struct {
		ItemID     int64  `json:"item_id"`
		DBStock    int64  `json:"db_stock"`
		RedisStock *int64 `json:"redis_stock"`
		InFlight   int64  `json:"in_flight"`
	}
	stockOf := func() stock {
		t.Helper()
		r := ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/admin/v1/items/%d/stock", it.ItemID), token: admin})
		var s stock
		r.decode(t, &s)
		if r.status != http.StatusOK || s.ItemID != it.ItemID {
			t.Fatalf("item stock: %d %s", r.status, r.body)
		}
		return s
	}
	if s := stockOf(); s.DBStock != 5 || s.RedisStock != nil || s.InFlight != 0 {
		t.Fatalf("before warmup: %+v", s)
	}
	for range 2 { // warmup is idempotent
		r = ts.do(t, ts.url, request{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/warmup", a.ActivityID), token: admin})
		var w warmed
		r.decode(t, &w)
		if r.status != http.StatusOK || w != (warmed{ActivityID: a.ActivityID, ItemID: it.ItemID, RedisStock: 5}) {
			t.Fatalf("warmup: %d %s", r.status, r.body)
		}
	}
	ts.mustPlace(t, ts.url, buyerToken(t, 7), "k", a.ActivityID)
	if s := stockOf(); s.DBStock != 5 || s.RedisStock == nil || *s.RedisStock != 4 || s.InFlight != 1 {
		t.Fatalf("after one order: %+v", s)
	}
}

// Every answer the webhook routes give a healthy server, of every status
// the spec declares for them (but 429, 500 and 503), validated against
// docs/openapi.yaml: the endpoint on and off, failing, with deliveries
// pending, given up and paged, its secret rotated, replayed and deleted.
func TestWebhookRoutesMatchTheSpec(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	sc := newSpecCheck(t, ts)
	admin, buyer := adminToken(t), buyerToken(t, 1)
	call := func(method, path, body string) request {
		return request{method: method, path: path, token: admin, body: body}
	}
	big := `{"url":"` + hookURL + `","events":["*"],"description":"` + strings.Repeat("d", httpapi.MaxBody) + `"}`
	evs := ts.outboxEvents(t, 2)

	var c httpapi.CreatedWebhookView
	sc.do(t, call("POST", "/admin/v1/webhooks", `{"url":"`+hookURL+`","events":["order.*"],"description":"erp"}`), 201).decode(t, &c)
	sc.do(t, call("POST", "/admin/v1/webhooks", `{"url":"`+hookURL+`","events":["order.bogus"]}`), 400)
	sc.do(t, call("POST", "/admin/v1/webhooks", big), 413)
	sc.do(t, request{method: "POST", path: "/admin/v1/webhooks", token: buyer, body: `{"url":"` + hookURL + `","events":["*"]}`}, 403)
	sc.do(t, request{method: "POST", path: "/admin/v1/webhooks", body: `{"url":"` + hookURL + `","events":["*"]}`}, 401)

	hooks := "/admin/v1/webhooks"
	one := fmt.Sprintf("/admin/v1/webhooks/%d", c.WebhookID)
	for _, base := range []string{hooks, one, one + "/deliveries"} {
		sc.do(t, request{method: "GET", path: base, token: buyer}, 403)
		sc.do(t, request{method: "GET", path: base}, 401)
	}
	for _, p := range []string{one, one + "/deliveries"} {
		sc.do(t, call("GET", "/admin/v1/webhooks/999999999"+p[len(one):], ""), 404)
	}

	// Failing: the dispatcher tried and recorded the failure.
	sc.do(t, call("POST", one+"/replay", fmt.Sprintf(`{"since":%q}`, evs[0].Time.Format(time.RFC3339Nano))), 202)
	d := &webhooks.Dispatcher{Store: ts.db.Webhooks, Sender: failingSender{}, Batch: 10, Concurrency: 1,
		Schedule: hook.Schedule{time.Hour}, DisableAfter: time.Hour, Log: testLogger(t), Now: time.Now}
	if n, err := d.Round(context.Background(), c.WebhookID); n != 2 || err != nil {
		t.Fatalf("dispatcher round: %d %v", n, err)
	}
	var failing httpapi.WebhookView
	sc.do(t, call("GET", one, ""), 200).decode(t, &failing)
	if failing.FailingSince == nil {
		t.Fatalf("after a failed round: %+v, want failing_since", failing)
	}
	sc.do(t, call("GET", one+"/deliveries?limit=1", ""), 200) // next_before, an attempt
	sc.do(t, call("GET", one+"/deliveries?state=failed", ""), 200)
	sc.do(t, call("GET", one+"/deliveries?state=later", ""), 400)

	sc.do(t, call("PATCH", one, `{"enabled":false}`), 200) // disabled_reason, disabled_at
	sc.do(t, call("GET", hooks, ""), 200)
	sc.do(t, call("PATCH", one, `{"enabled":true,"events":["*"]}`), 200)
	sc.do(t, call("PATCH", one, `{"url":"ftp://example.com/"}`), 400)
	sc.do(t, call("PATCH", one, big), 413)
	sc.do(t, call("PATCH", "/admin/v1/webhooks/999999999", `{"enabled":true}`), 404)
	sc.do(t, request{method: "PATCH", path: one, token: buyer, body: `{"enabled":true}`}, 403)
	sc.do(t, request{method: "PATCH", path: one, body: `{"enabled":true}`}, 401)

	sc.do(t, call("POST", one+"/rotate", ""), 200)
	sc.do(t, call("POST", one+"/rotate", `{"overlap_seconds":0}`), 200)
	sc.do(t, call("POST", one+"/rotate", `{"overlap_seconds":-1}`), 400)
	sc.do(t, call("POST", one+"/rotate", `{"overlap_seconds":1,"x":"`+strings.Repeat("x", httpapi.MaxBody)+`"}`), 413)
	sc.do(t, call("POST", "/admin/v1/webhooks/999999999/rotate", ""), 404)
	sc.do(t, request{method: "POST", path: one + "/rotate", token: buyer}, 403)
	sc.do(t, request{method: "POST", path: one + "/rotate"}, 401)

	since := fmt.Sprintf(`{"since":%q}`, time.Now().Add(-time.Hour).Format(time.RFC3339))
	sc.do(t, call("POST", one+"/replay", since), 202)
	sc.do(t, call("POST", one+"/replay", `{}`), 400)
	sc.do(t, call("POST", one+"/replay", `{"since":"2026-01-01T00:00:00Z","x":"`+strings.Repeat("x", httpapi.MaxBody)+`"}`), 413)
	sc.do(t, call("POST", "/admin/v1/webhooks/999999999/replay", since), 404)
	sc.do(t, request{method: "POST", path: one + "/replay", token: buyer, body: since}, 403)
	sc.do(t, request{method: "POST", path: one + "/replay", body: since}, 401)

	sc.do(t, request{method: "DELETE", path: one, token: buyer}, 403)
	sc.do(t, request{method: "DELETE", path: one}, 401)
	sc.do(t, call("DELETE", one, ""), 204)
	sc.do(t, call("DELETE", one, ""), 404)
	sc.do(t, call("GET", one, ""), 404)

	if left := sc.unseen("/admin/v1/webhooks"); len(left) > 0 {
		t.Errorf("declared but never produced: %s", strings.Join(left, ", "))
	}
}
