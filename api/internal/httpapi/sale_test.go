package httpapi_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Prices: items and sales take an integer price of minor units with an
// ISO 4217 code, refuse anything else with a clear 400, and an order
// shows the unit price and amount it was written with; an order without
// a price (made before prices, or of an unpriced sale) still reads.
func TestPrices(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	admin := adminToken(t)
	post := func(path, body string) response {
		return ts.do(t, ts.url, request{method: "POST", path: path, token: admin, body: body})
	}

	r := post("/admin/v1/items", `{"name":"sneaker","stock":10,"price":2500,"currency":"EUR"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create priced item: %d %s", r.status, r.body)
	}
	var it httpapi.ItemView
	r.decode(t, &it)
	if it.Price.Price == nil || *it.Price.Price != 2500 || it.Currency != "EUR" || it.Stock != 10 {
		t.Fatalf("item %s", r.body)
	}
	plain := ts.newItem(t, 10)

	for _, c := range []struct{ name, body string }{
		{"price without currency", `{"name":"a","stock":1,"price":100}`},
		{"currency without price", `{"name":"a","stock":1,"currency":"EUR"}`},
		{"negative price", `{"name":"a","stock":1,"price":-1,"currency":"EUR"}`},
		{"fractional price", `{"name":"a","stock":1,"price":19.99,"currency":"EUR"}`},
		{"price as a string", `{"name":"a","stock":1,"price":"100","currency":"EUR"}`},
		{"null price", `{"name":"a","stock":1,"price":null,"currency":"EUR"}`},
		{"null currency", `{"name":"a","stock":1,"price":1,"currency":null}`},
		{"price too large", `{"name":"a","stock":1,"price":1000000000001,"currency":"EUR"}`},
		{"lower-case currency", `{"name":"a","stock":1,"price":100,"currency":"eur"}`},
		{"currency of four letters", `{"name":"a","stock":1,"price":100,"currency":"EURO"}`},
	} {
		t.Run("item "+c.name, func(t *testing.T) {
			wantError(t, post("/admin/v1/items", c.body), http.StatusBadRequest, "INVALID_ARGUMENT")
		})
	}

	// The message says what is wrong, by name.
	for body, want := range map[string]string{
		`{"name":"a","stock":1,"price":null,"currency":"EUR"}`: "price must not be null",
		`{"name":"a","stock":1,"price":100}`:                   "price needs a currency",
		`{"name":"a","stock":1,"price":100,"currency":"eur"}`:  "ISO 4217",
	} {
		var e errorBody
		post("/admin/v1/items", body).decode(t, &e)
		if !strings.Contains(e.Error.Message, want) {
			t.Errorf("%s: message %q, want it to say %q", body, e.Error.Message, want)
		}
	}

	now := time.Now().UTC()
	activity := func(item int64, extra string) response {
		return post("/admin/v1/activities", fmt.Sprintf(`{"item_id":%d,"starts_at":%q,"ends_at":%q,"per_user_limit":3%s}`,
			item, now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339), extra))
	}
	created := func(r response) httpapi.ActivityView {
		t.Helper()
		if r.status != http.StatusCreated {
			t.Fatalf("create activity: %d %s", r.status, r.body)
		}
		var a httpapi.ActivityView
		r.decode(t, &a)
		return a
	}
	// Each sale of an item of its own (one sale owns an item at a time),
	// priced like it or plain.
	likeIt := func() int64 {
		var other httpapi.ItemView
		post("/admin/v1/items", `{"name":"sneaker","stock":10,"price":2500,"currency":"EUR"}`).decode(t, &other)
		return other.ItemID
	}
	listPrice := created(activity(it.ItemID, ""))
	ownPrice := created(activity(likeIt(), `,"sale_price":1999`))
	ownPriceAndCurrency := created(activity(likeIt(), `,"sale_price":1500,"currency":"EUR"`))
	unpriced := created(activity(plain, ""))
	pricedOnUnpriced := created(activity(ts.newItem(t, 10), `,"sale_price":300,"currency":"USD"`))
	for _, c := range []struct {
		name     string
		got      httpapi.ActivityView
		price    int64
		currency string
	}{
		{"the item's price by default", listPrice, 2500, "EUR"},
		{"its own, in the item's currency", ownPrice, 1999, "EUR"},
		{"its own with the currency named", ownPriceAndCurrency, 1500, "EUR"},
		{"its own on an unpriced item", pricedOnUnpriced, 300, "USD"},
	} {
		if c.got.SalePrice == nil || *c.got.SalePrice != c.price || c.got.Currency != c.currency {
			t.Errorf("%s: sale price %v %q, want %d %s", c.name, c.got.SalePrice, c.got.Currency, c.price, c.currency)
		}
	}
	if unpriced.SalePrice != nil || unpriced.Currency != "" {
		t.Errorf("unpriced sale got a price: %+v", unpriced)
	}
	for _, c := range []struct{ name, body string }{
		{"another currency than the item's", `,"sale_price":100,"currency":"USD"`},
		{"negative sale price", `,"sale_price":-5`},
		{"null sale price", `,"sale_price":null`},
		{"currency alone", `,"currency":"EUR"`},
	} {
		t.Run("activity "+c.name, func(t *testing.T) {
			wantError(t, activity(it.ItemID, c.body), http.StatusBadRequest, "INVALID_ARGUMENT")
		})
	}
	wantError(t, activity(plain, `,"sale_price":100`), http.StatusBadRequest, "INVALID_ARGUMENT") // no currency to take
	wantError(t, activity(999999999, `,"sale_price":100`), http.StatusNotFound, "NOT_FOUND")

	// Orders: written as the consumer writes them, at the sale's price.
	ctx := context.Background()
	gen := order.NewNumberGenerator()
	write := func(user int64, act httpapi.ActivityView, qty int) string {
		t.Helper()
		a, err := ts.db.Activities.Activity(ctx, act.ActivityID)
		if err != nil {
			t.Fatal(err)
		}
		ev := order.Event{Version: order.EventVersion, OrderNo: gen.Next(a.ItemID), IdempotencyKey: fmt.Sprintf("k%d", user),
			UserID: strconv.FormatInt(user, 10), ItemID: a.ItemID, ActivityID: a.ID, Quantity: qty, ReservedAt: time.Now()}
		out, err := mysqltest.Fulfil(ctx, ts.db.DB, []order.FulfilRequest{{Event: ev, UnitPrice: a.SalePrice}})
		if err != nil || out[ev.OrderNo].Status != order.Created {
			t.Fatalf("fulfil: %+v %v", out, err)
		}
		return ev.OrderNo
	}
	view := func(user int64, no string) httpapi.OrderView {
		t.Helper()
		r := ts.do(t, ts.url, request{method: "GET", path: "/api/v1/orders/" + no, token: buyerToken(t, user)})
		if r.status != http.StatusOK {
			t.Fatalf("get order: %d %s", r.status, r.body)
		}
		var v httpapi.OrderView
		r.decode(t, &v)
		return v
	}
	v := view(5, write(5, ownPrice, 3))
	if v.UnitPrice == nil || *v.UnitPrice != 1999 || v.Amount == nil || *v.Amount != 3*1999 || v.Currency != "EUR" {
		t.Errorf("priced order: %+v", v)
	}
	v = view(6, write(6, unpriced, 2))
	if v.UnitPrice != nil || v.Amount != nil || v.Currency != "" || v.Status != order.Created {
		t.Errorf("unpriced order: %+v", v)
	}
	// A row from before prices (no price columns written) reads as before.
	legacy := gen.Next(plain)
	if err := ts.db.Gorm().Exec(`INSERT INTO orders (order_no, user_id, item_id, activity_id, quantity, status, idempotency_key, reserved_at)
		VALUES (?, 7, ?, ?, 1, 'PAID', 'old', ?)`, legacy, plain, unpriced.ActivityID, time.Now().UTC()).Error; err != nil {
		t.Fatal(err)
	}
	if v := view(7, legacy); v.Status != order.Paid || v.UnitPrice != nil || v.Amount != nil {
		t.Errorf("legacy order: %+v", v)
	}
}

// salePage fetches the sale page without a token.
func (ts *testServer) salePage(t *testing.T, activity int64, header map[string]string) (response, httpapi.ActivityPage) {
	t.Helper()
	r := ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/api/v1/activities/%d", activity), header: header})
	var p httpapi.ActivityPage
	if r.status == http.StatusOK {
		r.decode(t, &p)
	}
	return r, p
}

// The sale page needs no token, tells the times, the limit, the price, the
// state and the units left; it is cacheable for a second with an ETag that
// a conditional request gets 304 for; the state moves from LIVE to
// SOLD_OUT once the stock is gone.
func TestSalePage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	admin := adminToken(t)
	r := ts.do(t, ts.url, request{method: "POST", path: "/admin/v1/items", token: admin,
		body: `{"name":"ticket","stock":2,"price":4200,"currency":"GBP"}`})
	var it httpapi.ItemView
	r.decode(t, &it)
	now := time.Now()
	live := ts.newActivity(t, it.ItemID, now.Add(-time.Minute), now.Add(time.Hour), 1)
	upcoming := ts.newActivity(t, it.ItemID, now.Add(time.Hour), now.Add(2*time.Hour), 2)
	ended := ts.newActivity(t, it.ItemID, now.Add(-2*time.Hour), now.Add(-time.Hour), 1)

	// Before the warm-up the units left are MySQL's.
	r, p := ts.salePage(t, upcoming, nil)
	if r.status != http.StatusOK || p.State != httpapi.ActivityUpcoming || p.UnitsLeft != 2 || p.PerUserLimit != 2 ||
		p.SalePrice == nil || *p.SalePrice != 4200 || p.Currency != "GBP" || p.ItemID != it.ItemID ||
		!p.StartsAt.Equal(now.Add(time.Hour).Truncate(time.Millisecond)) && p.StartsAt.Sub(now.Add(time.Hour)).Abs() > time.Millisecond {
		t.Fatalf("upcoming page: %d %s", r.status, r.body)
	}
	if cc := r.header.Get("Cache-Control"); cc != "public, max-age=1" {
		t.Errorf("Cache-Control %q", cc)
	}
	etag := r.header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || len(etag) < 10 {
		t.Fatalf("ETag %q", etag)
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		if r, _ := ts.salePage(t, upcoming, map[string]string{"If-None-Match": inm}); r.status != http.StatusNotModified ||
			len(r.body) != 0 || r.header.Get("ETag") != etag || r.header.Get("Cache-Control") == "" {
			t.Errorf("If-None-Match %s: %d %q %v", inm, r.status, r.body, r.header)
		}
	}
	if r, _ := ts.salePage(t, upcoming, map[string]string{"If-None-Match": `"stale"`}); r.status != http.StatusOK {
		t.Errorf("a stale ETag: %d", r.status)
	}
	if _, p := ts.salePage(t, ended, nil); p.State != httpapi.ActivityEnded {
		t.Errorf("ended sale: %+v", p)
	}
	wantError(t, ts.do(t, ts.url, request{method: "GET", path: "/api/v1/activities/999999999"}), http.StatusNotFound, "NOT_FOUND")
	wantError(t, ts.do(t, ts.url, request{method: "GET", path: "/api/v1/activities/x"}), http.StatusNotFound, "NOT_FOUND")

	// LIVE, then SOLD_OUT within a second of the last unit's reservation.
	ts.warm(t, live)
	if _, p := ts.salePage(t, live, nil); p.State != httpapi.ActivityLive || p.UnitsLeft != 2 {
		t.Fatalf("live page: %+v", p)
	}
	ts.mustPlace(t, ts.url, buyerToken(t, 1), "a", live)
	ts.mustPlace(t, ts.url, buyerToken(t, 2), "b", live)
	sold := time.Now()
	var last httpapi.ActivityPage
	waittest.UntilEvery(t, 5*time.Second, 50*time.Millisecond, "the page to say SOLD_OUT", func() bool {
		_, last = ts.salePage(t, live, nil)
		return last.State == httpapi.ActivitySoldOut
	})
	if took := time.Since(sold); took > 2*httpapi.ActivityPageTTL {
		t.Errorf("SOLD_OUT shown %v after the stock ran out; the page may be %v stale at most", took, httpapi.ActivityPageTTL)
	}
	if last.UnitsLeft != 0 {
		t.Errorf("sold-out page: %+v", last)
	}
	if r, _ := ts.salePage(t, live, map[string]string{"If-None-Match": etag}); r.status != http.StatusOK {
		t.Errorf("another page's ETag: %d", r.status)
	}
}

// A refresh storm: 1,000 concurrent requests for one sale page cost one
// backing read a second on this instance (counted at the Redis client and
// at MySQL's GORM handle), however many requests arrive.
func TestSalePageRefreshStorm(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	_, act := ts.openSale(t, 100, 1)
	refreshStorm(t, ts, act)
}

// The page of a sale of twelve sizes costs what a one-item sale's does: one
// MGET reads every size (they share the sale's hash tag).
func TestSizedSalePageRefreshStorm(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	_, act := ts.openSizedSale(t, 12, 10)
	refreshStorm(t, ts, act)
}

func refreshStorm(t *testing.T, ts *testServer, act int64) {

	var redisCmds, mysqlQueries atomic.Int64
	ts.rdb.AddHook(countHook{n: &redisCmds})
	if err := ts.db.Gorm().Callback().Query().Before("gorm:query").Register("count_storm", func(*gorm.DB) {
		mysqlQueries.Add(1)
	}); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}}
	var (
		wg     sync.WaitGroup
		bad    atomic.Int64
		start  = make(chan struct{})
		url    = fmt.Sprintf("%s/api/v1/activities/%d", ts.url, act)
		before = time.Now()
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := client.Get(url)
			if err != nil || resp.StatusCode != http.StatusOK {
				bad.Add(1)
			}
			if resp != nil {
				resp.Body.Close()
			}
		}()
	}
	close(start)
	wg.Wait()
	took := time.Since(before)
	if bad.Load() != 0 {
		t.Fatalf("%d of %d requests failed", bad.Load(), n)
	}
	// One load (one MGET, and two reads from MySQL: the activity, which an
	// operator may have ended, and its items) per TTL window the storm
	// touched.
	limit := int64(took/httpapi.ActivityPageTTL) + 1
	t.Logf("%d requests in %v: %d Redis commands, %d MySQL queries", n, took, redisCmds.Load(), mysqlQueries.Load())
	if redisCmds.Load() < 1 || redisCmds.Load() > limit || mysqlQueries.Load() > 2*limit {
		t.Fatalf("%d requests in %v made %d Redis commands and %d MySQL queries; want 1 to %d Redis commands and at most %d queries",
			n, took, redisCmds.Load(), mysqlQueries.Load(), limit, 2*limit)
	}
}

// countHook counts the commands a Redis client sends.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
