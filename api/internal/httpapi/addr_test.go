package httpapi_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/pkg/adapter/auth"
)

// addrSales are one sale of each kind the address checks guard: a
// first-come sale, a room sale and a draw, each of its own item.
type addrSales struct {
	item, sale         int64
	roomItem, room     int64
	drawItem, draw     int64
	handler            http.Handler
	ts                 *testServer
	orders, joins, ent int // how many of each the test expects accepted
}

// newAddrSales opens the three sales and serves them with a.
func newAddrSales(t *testing.T, a httpapi.Addresses) *addrSales {
	t.Helper()
	ts := newTestServer(t)
	s := &addrSales{ts: ts}
	s.item, s.sale = ts.openSale(t, 100, 1)
	now := time.Now()
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339Nano) }

	s.roomItem = ts.newItem(t, 100)
	r := ts.do(t, ts.url, request{method: "POST", path: "/admin/v1/activities", token: adminToken(t), body: fmt.Sprintf(
		`{"item_id":%d,"starts_at":%q,"ends_at":%q,"waiting_room":{"admit_per_second":1000}}`, s.roomItem, at(-time.Minute), at(time.Hour))})
	s.room = activityID(t, r)
	ts.warm(t, s.room)

	s.drawItem = ts.newItem(t, 100)
	r = ts.do(t, ts.url, request{method: "POST", path: "/admin/v1/activities", token: adminToken(t), body: fmt.Sprintf(
		`{"item_id":%d,"mode":"draw","starts_at":%q,"entries_close_at":%q,"ends_at":%q}`, s.drawItem, at(-time.Minute), at(30*time.Minute), at(time.Hour))})
	s.draw = activityID(t, r)
	ts.warm(t, s.draw)

	s.handler = httpapi.New(ts.svc, ts.services(ts.svc, testLogger(t)), auth.NewVerifier(testSecret), ts.checkers(kafkatest.Brokers()), testLogger(t),
		httpapi.WithAddresses(a))
	return s
}

// spec checks answers to requests from peer against docs/openapi.yaml.
func (s *addrSales) spec(t *testing.T, peer string) *specCheck {
	t.Helper()
	c := *s.ts
	c.url = "http://api"
	c.client = &http.Client{Transport: fromAddr{h: s.handler, remote: netip.AddrPortFrom(netip.MustParseAddr(peer), 40000).String()}}
	return newSpecCheck(t, &c)
}

// from is a request as if from peer (an address, the port added) with the
// headers.
func (s *addrSales) from(t *testing.T, peer string, header map[string]string, r request) response {
	t.Helper()
	c := *s.ts
	c.client = &http.Client{Transport: fromAddr{h: s.handler, remote: netip.AddrPortFrom(netip.MustParseAddr(peer), 40000).String()}}
	r.header = mergeHeaders(r.header, header)
	return c.do(t, "http://api", r)
}

func mergeHeaders(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// order places user's order in the first-come sale.
func (s *addrSales) order(t *testing.T, peer string, header map[string]string, user int64) response {
	t.Helper()
	return s.from(t, peer, header, request{method: "POST", path: "/api/v1/orders", token: buyerToken(t, user),
		header: map[string]string{"Idempotency-Key": "addr-" + strconv.FormatInt(user, 10)}, body: fmt.Sprintf(`{"activity_id":%d}`, s.sale)})
}

// join joins user to the room sale's queue.
func (s *addrSales) join(t *testing.T, peer string, header map[string]string, user int64) response {
	t.Helper()
	return s.from(t, peer, header, request{method: "POST", path: fmt.Sprintf("/api/v1/activities/%d/queue", s.room), token: buyerToken(t, user)})
}

// enter enters user in the draw.
func (s *addrSales) enter(t *testing.T, peer string, header map[string]string, user int64) response {
	t.Helper()
	return s.from(t, peer, header, request{method: "POST", path: fmt.Sprintf("/api/v1/activities/%d/entries", s.draw), token: buyerToken(t, user),
		body: fmt.Sprintf(`{"item_id":%d,"quantity":1}`, s.drawItem)})
}

// take is one of the three guarded calls, counted when accepted.
type take struct {
	name string
	do   func(t *testing.T, peer string, header map[string]string, user int64) response
	ok   func(t *testing.T, r response)
}

func (s *addrSales) takes() []take {
	return []take{
		{"order", s.order, func(t *testing.T, r response) { t.Helper(); accepted(t, r); s.orders++ }},
		{"join", s.join, func(t *testing.T, r response) {
			t.Helper()
			if r.status != http.StatusOK {
				t.Fatalf("join: %d %s, want 200", r.status, r.body)
			}
			s.joins++
		}},
		{"entry", s.enter, func(t *testing.T, r response) {
			t.Helper()
			if r.status != http.StatusCreated {
				t.Fatalf("entry: %d %s, want 201", r.status, r.body)
			}
			s.ent++
		}},
	}
}

// wantLimited checks a 429 RATE_LIMITED with a Retry-After of 1-100 s.
func wantLimited(t *testing.T, r response) {
	t.Helper()
	wantError(t, r, http.StatusTooManyRequests, "RATE_LIMITED")
	if sec, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || sec < 1 || sec > 100 {
		t.Fatalf("Retry-After = %q, want 1-100 seconds", r.header.Get("Retry-After"))
	}
}

// wantTaken checks that exactly what the test accepted was taken: the
// first-come sale's stock and reservations, the room's joins and the
// draw's entries, read from Redis and MySQL.
func (s *addrSales) wantTaken(t *testing.T) {
	t.Helper()
	ts := s.ts
	if snap := ts.stock(t, s.item); snap.Stock != int64(100-s.orders) || snap.Inflight != int64(s.orders) {
		t.Fatalf("stock %+v, want %d left and %d in flight", snap, 100-s.orders, s.orders)
	}
	if got := ts.reservations(t, s.item); len(got) != s.orders {
		t.Fatalf("reservations %v, want %d", got, s.orders)
	}
	for _, it := range []int64{s.roomItem, s.drawItem} {
		if snap := ts.stock(t, it); snap.Stock != 100 || snap.Inflight != 0 {
			t.Fatalf("item %d: %+v, want its 100 untouched", it, snap)
		}
	}
	for _, c := range []struct {
		table string
		sale  int64
		want  int
	}{{"room_joins", s.room, s.joins}, {"draw_entries", s.draw, s.ent}} {
		var n int64
		if err := ts.db.Gorm().Raw("SELECT COUNT(*) FROM "+c.table+" WHERE activity_id = ?", c.sale).Scan(&n).Error; err != nil || n != int64(c.want) {
			t.Fatalf("%s: %d (%v), want %d", c.table, n, err, c.want)
		}
	}
}

// Joins, entries and orders share one bucket per client address: an IPv4
// address is its own, every IPv6 address of a /64 shares it, and an
// IPv4-mapped IPv6 address is its IPv4 address. Over the limit a call is
// 429 RATE_LIMITED with Retry-After and takes nothing; the reads of the
// buyer's own order stay open to the address.
func TestAddressLimitPerIPv4AndIPv6Prefix(t *testing.T) {
	t.Parallel()
	// One call per address, then a token every 100 s: the second call of
	// an address is over the limit however slow the machine.
	s := newAddrSales(t, httpapi.Addresses{PerAddress: 0.01})
	user := int64(0)
	next := func() int64 { user++; return user }

	for i, tk := range s.takes() {
		t.Run(tk.name, func(t *testing.T) {
			v4 := fmt.Sprintf("192.0.2.%d", 10+i)
			net64 := fmt.Sprintf("2001:db8:%d:1", i+1)
			tk.ok(t, tk.do(t, v4, nil, next()))
			// The same IPv4 address, also written as an IPv4-mapped
			// IPv6 address: one bucket.
			wantLimited(t, tk.do(t, v4, nil, next()))
			wantLimited(t, tk.do(t, "::ffff:"+v4, nil, next()))
			// Its neighbour has its own.
			tk.ok(t, tk.do(t, fmt.Sprintf("192.0.2.%d", 110+i), nil, next()))

			tk.ok(t, tk.do(t, net64+"::1", nil, next()))
			// Another address of the same /64, however far: limited.
			wantLimited(t, tk.do(t, net64+":ffff:ffff:ffff:fffe", nil, next()))
			wantLimited(t, tk.do(t, net64+"::1", nil, next()))
			// The next /64 is another subscriber.
			tk.ok(t, tk.do(t, fmt.Sprintf("2001:db8:%d:2::1", i+1), nil, next()))
		})
	}
	// The three calls share the bucket: an address that ordered cannot
	// join or enter at once.
	for _, tk := range s.takes()[1:] {
		wantLimited(t, tk.do(t, "192.0.2.10", nil, next()))
		wantLimited(t, tk.do(t, "2001:db8:1:1::77", nil, next()))
	}
	// The answer is the spec's.
	sc := s.spec(t, "192.0.2.10")
	wantLimited(t, sc.do(t, request{method: "POST", path: fmt.Sprintf("/api/v1/activities/%d/queue", s.room), token: buyerToken(t, next())}, http.StatusTooManyRequests))
	// Reads are not the per-address limit's: the limited address lists
	// its buyer's orders.
	if r := s.from(t, "192.0.2.10", nil, request{method: "GET", path: "/api/v1/orders", token: buyerToken(t, 1)}); r.status != http.StatusOK {
		t.Fatalf("list from a limited address: %d %s, want 200", r.status, r.body)
	}
	s.wantTaken(t)
	if s.orders != 4 || s.joins != 4 || s.ent != 4 {
		t.Fatalf("accepted %d orders, %d joins, %d entries; want 4 each", s.orders, s.joins, s.ent)
	}
}

// A denied range's joins, entries and orders are 403 ADDRESS_DENIED, before
// the token is looked at, and take nothing; an address outside every range
// is served, and the denied range still reads.
func TestDeniedAddressRanges(t *testing.T) {
	t.Parallel()
	s := newAddrSales(t, httpapi.Addresses{Deny: []netip.Prefix{
		netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:dead::/48"), netip.MustParsePrefix("198.51.100.7/32"),
	}})
	user := int64(0)
	next := func() int64 { user++; return user }
	for _, tk := range s.takes() {
		t.Run(tk.name, func(t *testing.T) {
			for _, peer := range []string{"203.0.113.1", "203.0.113.254", "::ffff:203.0.113.9", "2001:db8:dead::1",
				"2001:db8:dead:ffff:ffff:ffff:ffff:ffff", "198.51.100.7"} {
				wantError(t, tk.do(t, peer, nil, next()), http.StatusForbidden, "ADDRESS_DENIED")
			}
			for _, peer := range []string{"203.0.114.1", "198.51.100.8", "2001:db8:deae::1", "192.0.2.1"} {
				tk.ok(t, tk.do(t, peer, nil, next()))
			}
		})
	}
	// Without a token too: the address is refused first. The answers are
	// the spec's.
	sc := s.spec(t, "203.0.113.1")
	for _, r := range []request{
		{method: "POST", path: "/api/v1/orders", header: map[string]string{"Idempotency-Key": "k"}, body: fmt.Sprintf(`{"activity_id":%d}`, s.sale)},
		{method: "POST", path: fmt.Sprintf("/api/v1/activities/%d/queue", s.room)},
		{method: "POST", path: fmt.Sprintf("/api/v1/activities/%d/entries", s.draw), token: buyerToken(t, 1000), body: fmt.Sprintf(`{"item_id":%d}`, s.drawItem)},
	} {
		wantError(t, sc.do(t, r, http.StatusForbidden), http.StatusForbidden, "ADDRESS_DENIED")
	}
	// Reads from a denied range are served: the sale page, a buyer's
	// orders, a draw entry's state.
	for _, path := range []string{fmt.Sprintf("/api/v1/activities/%d", s.sale), "/api/v1/orders"} {
		if r := s.from(t, "203.0.113.1", nil, request{method: "GET", path: path, token: buyerToken(t, 1)}); r.status != http.StatusOK {
			t.Fatalf("GET %s from a denied range: %d %s, want 200", path, r.status, r.body)
		}
	}
	s.wantTaken(t)
	if s.orders != 4 || s.joins != 4 || s.ent != 4 {
		t.Fatalf("accepted %d orders, %d joins, %d entries; want 4 each", s.orders, s.joins, s.ent)
	}
}

// Behind a proxy the operator named, the client address is the forwarding
// header's (X-Forwarded-For walked from the right past the named proxies'
// own hops), and the deny list and the limit apply to it; from any other
// peer the header is ignored, so a client can neither escape its own
// limit or range nor charge another address by forging one.
func TestClientAddressFromTrustedProxy(t *testing.T) {
	t.Parallel()
	s := newAddrSales(t, httpapi.Addresses{PerAddress: 0.01,
		Deny:           []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")},
		Header:         "X-Forwarded-For"})
	user := int64(0)
	next := func() int64 { user++; return user }
	xff := func(v string) map[string]string { return map[string]string{"X-Forwarded-For": v} }
	const proxy, proxy2, proxy6 = "10.0.0.1", "10.9.9.9", "fd00::1"

	// The named proxies pass the client's address: its range is denied,
	// whichever proxy or header form carries it.
	for _, h := range []string{"203.0.113.9", "192.0.2.1, 203.0.113.9", "203.0.113.9, 10.0.0.2", "::ffff:203.0.113.9"} {
		wantError(t, s.order(t, proxy, xff(h), next()), http.StatusForbidden, "ADDRESS_DENIED")
	}
	wantError(t, s.join(t, proxy6, xff("203.0.113.10"), next()), http.StatusForbidden, "ADDRESS_DENIED")
	wantError(t, s.enter(t, proxy2, xff("203.0.113.11"), next()), http.StatusForbidden, "ADDRESS_DENIED")

	// The limit is the client's, not the proxy's: many clients through one
	// proxy are each served, and one client through two proxies is
	// limited.
	ok := s.takes()
	ok[0].ok(t, s.order(t, proxy, xff("198.51.100.1"), next()))
	ok[0].ok(t, s.order(t, proxy, xff("198.51.100.2"), next()))
	wantLimited(t, s.order(t, proxy2, xff("198.51.100.1"), next()))
	wantLimited(t, s.order(t, proxy2, xff("::ffff:198.51.100.2"), next()))
	ok[1].ok(t, s.join(t, proxy, xff("2001:db8:7:7::1"), next()))
	wantLimited(t, s.enter(t, proxy6, xff("2001:db8:7:7::2"), next()))

	// The rightmost hop not a named proxy is the client: an address the
	// client wrote further left is ignored, even one in a denied range or
	// one another buyer is limited on.
	ok[2].ok(t, s.enter(t, proxy, xff("203.0.113.9, 198.51.100.3"), next()))
	ok[0].ok(t, s.order(t, proxy, xff("198.51.100.1, 198.51.100.4, 10.0.0.7"), next()))
	// A hop that is no address ends the walk: the proxy's own address is
	// used (here, one not yet limited).
	ok[1].ok(t, s.join(t, proxy2, xff("198.51.100.9, garbage"), next()))
	wantLimited(t, s.enter(t, proxy2, nil, next()))

	// From a peer nobody named, the header is ignored: a denied peer stays
	// denied, and a peer's second call is limited whatever it claims.
	for _, h := range []map[string]string{xff("192.0.2.77"), {"X-Real-IP": "192.0.2.78"}} {
		wantError(t, s.order(t, "203.0.113.50", h, next()), http.StatusForbidden, "ADDRESS_DENIED")
	}
	ok[0].ok(t, s.order(t, "192.0.2.50", xff("203.0.113.9"), next()))
	wantLimited(t, s.order(t, "192.0.2.50", xff("192.0.2.51"), next()))
	wantLimited(t, s.join(t, "192.0.2.50", map[string]string{"X-Real-IP": "192.0.2.52"}, next()))
	// And it charges nobody else: the address it named is served.
	ok[0].ok(t, s.order(t, "192.0.2.51", nil, next()))

	s.wantTaken(t)
	if s.orders != 5 || s.joins != 2 || s.ent != 1 {
		t.Fatalf("accepted %d orders, %d joins, %d entries; want 5, 2, 1", s.orders, s.joins, s.ent)
	}
}

// With X-Real-IP named, a named proxy's X-Real-IP is the client and its
// X-Forwarded-For is ignored.
func TestClientAddressFromXRealIP(t *testing.T) {
	t.Parallel()
	s := newAddrSales(t, httpapi.Addresses{
		Deny:           []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")},
		Header:         "X-Real-IP"})
	real := func(v string) map[string]string { return map[string]string{"X-Real-IP": v} }
	wantError(t, s.order(t, "10.0.0.1", real("203.0.113.9"), 1), http.StatusForbidden, "ADDRESS_DENIED")
	s.takes()[0].ok(t, s.order(t, "10.0.0.1", map[string]string{"X-Forwarded-For": "203.0.113.9"}, 2))
	s.takes()[0].ok(t, s.order(t, "10.0.0.1", real("192.0.2.1"), 3))
	// 10.0.0.2 is not the named proxy: its X-Real-IP is ignored.
	s.takes()[0].ok(t, s.order(t, "10.0.0.2", real("203.0.113.9"), 4))
	wantError(t, s.order(t, "203.0.113.1", real("192.0.2.1"), 5), http.StatusForbidden, "ADDRESS_DENIED")
	s.wantTaken(t)
	if s.orders != 3 {
		t.Fatalf("accepted %d orders, want 3", s.orders)
	}
}
