package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/order"
)

// listFixture writes orders straight into MySQL the way the consumer and
// the API do (Fulfil for CREATED, Abandon for FAILED, CloseOrder for
// CLOSED, Pay for PAID), in activities of an item each (one sale owns an
// item at a time).
type listFixture struct {
	t     *testing.T
	ts    *testServer
	stock int64
	gen   *order.NumberGenerator
	keys  atomic.Int64
	mu    sync.Mutex
	items map[int64]int64 // by activity
}

func newListFixture(t *testing.T, ts *testServer, stock int64) *listFixture {
	return &listFixture{t: t, ts: ts, stock: stock, gen: order.NewNumberGenerator(), items: map[int64]int64{}}
}

// activity opens a running sale of a new item.
func (f *listFixture) activity() int64 {
	f.t.Helper()
	r := f.ts.do(f.t, f.ts.url, request{method: "POST", path: "/admin/v1/items", token: adminToken(f.t),
		body: fmt.Sprintf(`{"name":"cap","stock":%d,"price":1250,"currency":"EUR"}`, f.stock)})
	var it httpapi.ItemView
	r.decode(f.t, &it)
	id := f.ts.newActivity(f.t, it.ItemID, time.Now().Add(-time.Minute), time.Now().Add(time.Hour), 2)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items[id] = it.ItemID
	return id
}

// itemOf is the item activity sells.
func (f *listFixture) itemOf(activity int64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.items[activity]
}

func (f *listFixture) event(user, activity int64, qty int) order.Event {
	item := f.itemOf(activity)
	return order.Event{Version: order.EventVersion, OrderNo: f.gen.Next(item), IdempotencyKey: fmt.Sprintf("k%d", f.keys.Add(1)),
		UserID: strconv.FormatInt(user, 10), ItemID: item, ActivityID: activity, Quantity: qty, ReservedAt: time.Now()}
}

// created writes a CREATED order at the sale's price.
func (f *listFixture) created(user, activity int64, qty int) string {
	f.t.Helper()
	ctx := context.Background()
	a, err := f.ts.db.Activities.Activity(ctx, activity)
	if err != nil {
		f.t.Fatal(err)
	}
	ev := f.event(user, activity, qty)
	out, err := mysqltest.Fulfil(ctx, f.ts.db.DB, []order.FulfilRequest{{Event: ev, UnitPrice: a.SalePrice}})
	if err != nil || out[ev.OrderNo].Status != order.Created {
		f.t.Fatalf("fulfil: %+v %v", out, err)
	}
	return ev.OrderNo
}

// failed writes a FAILED order (any number per user and activity).
func (f *listFixture) failed(user, activity int64) (string, error) {
	ev := f.event(user, activity, 1)
	_, _, err := f.ts.db.Orders.Abandon(context.Background(), ev, order.ReasonPublishFailed)
	return ev.OrderNo, err
}

// page lists one page for user with the query q.
func (f *listFixture) page(user int64, q url.Values) (response, httpapi.OrderList) {
	f.t.Helper()
	r := f.ts.do(f.t, f.ts.url, request{method: "GET", path: "/api/v1/orders?" + q.Encode(), token: buyerToken(f.t, user)})
	var l httpapi.OrderList
	if r.status == http.StatusOK {
		r.decode(f.t, &l)
	}
	return r, l
}

// all pages through user's list with q, limit per page, and returns the
// order numbers in the order given.
func (f *listFixture) all(user int64, q url.Values, limit int) []string {
	f.t.Helper()
	var nos []string
	q.Set("limit", fmt.Sprint(limit))
	for pages := 0; ; pages++ {
		if pages > 1000 {
			f.t.Fatal("the list does not end")
		}
		r, l := f.page(user, q)
		if r.status != http.StatusOK {
			f.t.Fatalf("list: %d %s", r.status, r.body)
		}
		if len(l.Orders) > limit || (l.NextCursor != nil && len(l.Orders) != limit) {
			f.t.Fatalf("page of %d with limit %d, next %v", len(l.Orders), limit, l.NextCursor)
		}
		for _, o := range l.Orders {
			nos = append(nos, o.OrderNo)
		}
		if l.NextCursor == nil {
			return nos
		}
		q.Set("cursor", *l.NextCursor)
	}
}

// GET /api/v1/orders: the caller's own orders, newest first, a page at a
// time; filters by activity and status; a bad parameter is a 400.
func TestOrderList(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	f := newListFixture(t, ts, 100)
	const alice, bob = 1, 2
	ctx := context.Background()
	a1, a2 := f.activity(), f.activity()

	// Oldest first: alice's orders in both sales, bob's among them.
	var aliceAll []string // in the order written
	add := func(no string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		aliceAll = append(aliceAll, no)
	}
	for i := range 5 {
		add(f.failed(alice, a1))
		if _, err := f.failed(bob, a1); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			paid := f.created(alice, a1, 2)
			if _, err := ts.db.Orders.Pay(ctx, strconv.Itoa(alice), paid); err != nil {
				t.Fatal(err)
			}
			aliceAll = append(aliceAll, paid)
		}
	}
	closed := f.created(alice, a2, 1)
	if _, err := ts.db.Orders.CloseOrder(ctx, strconv.Itoa(alice), closed, order.ReasonCancelled); err != nil {
		t.Fatal(err)
	}
	aliceAll = append(aliceAll, closed)
	add(f.failed(alice, a2))
	live := f.created(alice, a2, 1)
	aliceAll = append(aliceAll, live)
	newest := reversed(aliceAll)

	for _, limit := range []int{1, 3, 9, 100} {
		if got := f.all(alice, url.Values{}, limit); !slices.Equal(got, newest) {
			t.Fatalf("limit %d: %v, want %v", limit, got, newest)
		}
	}
	// The default page is 20; each order reads as its status answer does.
	_, l := f.page(alice, url.Values{})
	if len(l.Orders) != len(newest) || l.NextCursor != nil {
		t.Fatalf("default page: %d orders, next %v", len(l.Orders), l.NextCursor)
	}
	first := l.Orders[0]
	if first.OrderNo != live || first.Status != order.Created || first.ActivityID != a2 || first.ItemID != f.itemOf(a2) ||
		first.UnitPrice == nil || *first.UnitPrice != 1250 || *first.Amount != 1250 || first.Currency != "EUR" {
		t.Errorf("newest order: %+v", first)
	}

	// Filters.
	only := func(activity int64, status order.Status) []string {
		var out []string
		for _, no := range newest {
			o, err := ts.db.Orders.Order(ctx, no)
			if err != nil {
				t.Fatal(err)
			}
			if (activity == 0 || o.ActivityID == activity) && (status == "" || o.Status == status) {
				out = append(out, no)
			}
		}
		return out
	}
	for _, c := range []struct {
		activity int64
		status   order.Status
	}{{a1, ""}, {a2, ""}, {0, order.Failed}, {0, order.Paid}, {a2, order.Closed}, {a2, order.Paid}, {0, order.Created}} {
		q := url.Values{}
		if c.activity != 0 {
			q.Set("activity_id", fmt.Sprint(c.activity))
		}
		if c.status != "" {
			q.Set("status", string(c.status))
		}
		if got, want := f.all(alice, q, 2), only(c.activity, c.status); !slices.Equal(got, want) {
			t.Errorf("activity %d status %q: %v, want %v", c.activity, c.status, got, want)
		}
	}

	// Nobody sees another user's orders; a user without orders gets none.
	if got := f.all(bob, url.Values{}, 100); len(got) != 5 {
		t.Errorf("bob sees %d orders, want his 5", len(got))
	}
	if _, l := f.page(3, url.Values{}); len(l.Orders) != 0 || l.NextCursor != nil {
		t.Errorf("a user without orders: %+v", l)
	}

	// Bad parameters.
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "limit=", "cursor=", "cursor=%25%25", "cursor=bzE6MA",
		"cursor=bzE6LTE", "cursor=eDox", "activity_id=0", "activity_id=-1", "activity_id=a", "status=PENDING", "status=paid", "status="} {
		r := ts.do(t, ts.url, request{method: "GET", path: "/api/v1/orders?" + q, token: buyerToken(t, alice)})
		wantError(t, r, http.StatusBadRequest, "INVALID_ARGUMENT")
	}
	wantError(t, ts.do(t, ts.url, request{method: "GET", path: "/api/v1/orders"}), http.StatusUnauthorized, "UNAUTHENTICATED")
}

// Paging while orders are written (the user's own, newer than the first
// page, and other users' interleaved) neither skips nor repeats an order
// that existed when the paging began.
func TestOrderListPagesWhileOrdersArrive(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	f := newListFixture(t, ts, 10)
	const user = 1
	act := f.activity()
	var before []string
	for range 60 {
		no, err := f.failed(user, act)
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, no)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written atomic.Int64
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				owner := int64(user)
				if w > 0 {
					owner = int64(10 + w)
				}
				if _, err := f.failed(owner, act); err != nil {
					t.Error(err)
					return
				}
				written.Add(1)
			}
		}()
	}
	got := f.all(user, url.Values{}, 7)
	close(stop)
	wg.Wait()

	seen := map[string]int{}
	for _, no := range got {
		seen[no]++
	}
	for no, n := range seen {
		if n > 1 {
			t.Errorf("%s listed %d times", no, n)
		}
	}
	// Every order that existed before the paging is listed, in order: what
	// was listed before the first of them is what arrived meanwhile.
	i := 0
	for i < len(got) && got[i] != before[len(before)-1] {
		i++
	}
	if rest := got[i:]; !slices.Equal(rest, reversed(before)) {
		t.Fatalf("the orders that existed: listed %d of %d, or out of order", len(rest), len(before))
	}
	if written.Load() == 0 {
		t.Fatal("no order was written while paging")
	}
	t.Logf("%d orders listed; %d written while paging", len(got), written.Load())
}

// The operator's summary of a sale: orders by status, units sold and paid,
// in flight, stock in Redis and MySQL, revenue of the PAID orders.
func TestActivitySummary(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	f := newListFixture(t, ts, 20)
	ctx := context.Background()
	act := f.activity()
	other := f.activity() // its orders do not count
	ts.warm(t, act)
	summary := func(id int64) (response, httpapi.ActivitySummary) {
		r := ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/admin/v1/activities/%d/summary", id), token: adminToken(t)})
		var s httpapi.ActivitySummary
		if r.status == http.StatusOK {
			r.decode(t, &s)
		}
		return r, s
	}
	r, s := summary(act)
	if r.status != http.StatusOK || s.UnitsSold != 0 || s.RevenuePaid == nil || *s.RevenuePaid != 0 || s.Currency != "EUR" ||
		s.RedisStock == nil || *s.RedisStock != 20 || s.DBStock != 20 || len(s.Orders) != 4 {
		t.Fatalf("empty sale: %d %s", r.status, r.body)
	}

	// Two paid (2 + 1 units), one unpaid (2), one cancelled, one failed,
	// and one reserved in Redis, not yet in MySQL.
	for user, qty := range map[int64]int{1: 2, 2: 1} {
		no := f.created(user, act, qty)
		if _, err := ts.db.Orders.Pay(ctx, strconv.FormatInt(user, 10), no); err != nil {
			t.Fatal(err)
		}
	}
	f.created(3, act, 2)
	cancelled := f.created(4, act, 1)
	if _, err := ts.db.Orders.CloseOrder(ctx, "4", cancelled, order.ReasonCancelled); err != nil {
		t.Fatal(err)
	}
	if _, err := f.failed(5, act); err != nil {
		t.Fatal(err)
	}
	f.created(1, other, 2)
	ts.mustPlace(t, ts.url, buyerToken(t, 6), "pending", act)

	_, s = summary(act)
	want := map[order.Status]int64{order.Created: 1, order.Paid: 2, order.Closed: 1, order.Failed: 1}
	for st, n := range want {
		if s.Orders[st] != n {
			t.Errorf("%s: %d orders, want %d", st, s.Orders[st], n)
		}
	}
	// MySQL: 20 - 2 - 1 - 2 (live here) = 15 (the other sale sells
	// another item); the closed one's unit came back. Redis: 20 warmed,
	// less the pending one.
	if s.UnitsSold != 5 || s.UnitsPaid != 3 || *s.RevenuePaid != 3*1250 || s.InFlight != 1 || *s.RedisStock != 19 || s.DBStock != 15 {
		t.Errorf("summary %+v (redis %d, revenue %d)", s, *s.RedisStock, *s.RevenuePaid)
	}

	wantError(t, ts.do(t, ts.url, request{method: "GET", path: "/admin/v1/activities/999999999/summary", token: adminToken(t)}),
		http.StatusNotFound, "NOT_FOUND")
	wantError(t, ts.do(t, ts.url, request{method: "GET", path: fmt.Sprintf("/admin/v1/activities/%d/summary", act), token: buyerToken(t, 1)}),
		http.StatusForbidden, "FORBIDDEN")
}

// reversed is a reversed copy of s.
func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
