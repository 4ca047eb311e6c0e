package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/metadata"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/placing"
)

// testSecret signs every token the tests mint.
var testSecret = []byte("contract-test-secret-0123456789abcdef")

// unusedAddr is a loopback port nothing listens on.
const unusedAddr = "127.0.0.1:1"

// testServer is the API served in-process over the real Redis (own key
// prefix), MySQL (own database) and Kafka (own one-partition topic).
type testServer struct {
	url    string
	rdb    redis.UniversalClient
	store  *stockredis.Store
	prefix string
	db     *mysqltest.DB
	svc    *placing.Service
	topic  string
	client *http.Client
}

// serviceOption adjusts the placing service before the server starts.
type serviceOption func(*placing.Service)

func withClock(now func() time.Time) serviceOption {
	return func(s *placing.Service) { s.Now = now }
}

func newTestServer(t *testing.T, opts ...serviceOption) *testServer {
	t.Helper()
	rdb, prefix := redistest.New(t)
	db := mysqltest.New(t)
	topic := kafkatest.NewTopic(t, 1)
	announceTopic(t, topic)
	pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: topic})
	t.Cleanup(func() { pub.Close() })
	ts := &testServer{
		rdb:    rdb,
		store:  stockredis.New(rdb, prefix),
		prefix: prefix,
		db:     db,
		topic:  topic,
		client: &http.Client{Timeout: 15 * time.Second},
	}
	ts.svc = ts.service(t, pub)
	for _, o := range opts {
		o(ts.svc)
	}
	ts.url = ts.serve(t, ts.svc, ts.checkers(kafkatest.Brokers()))
	return ts
}

// service returns a fresh placing service over the test's store and
// database that publishes through pub.
func (ts *testServer) service(t *testing.T, pub placing.Publisher) *placing.Service {
	svc := &placing.Service{
		Publisher: pub, Activities: ts.db.Activities, Orders: ts.db.Orders, Tx: ts.db, Events: ts.db.Outbox,
		Numbers: order.NewNumberGenerator(), PaymentWindow: 15 * time.Minute,
		Log: testLogger(t), Now: time.Now,
	}
	useStore(svc, ts.store)
	return svc
}

// useStore makes svc run on st's stores.
func useStore(svc *placing.Service, st *stockredis.Store) {
	svc.Reservations, svc.Stock, svc.Rooms = st.Reservations, st.Stock, st.Rooms
}

func (ts *testServer) checkers(kafkaBrokers []string) []httpapi.Checker {
	return []httpapi.Checker{
		{Name: "redis", Check: ts.store.Ping},
		{Name: "mysql", Check: ts.db.Ping},
		{Name: "kafka", Check: func(ctx context.Context) error { return orderevents.Ping(ctx, kafkaBrokers) }},
	}
}

// serve starts another API over svc and the test's database; it returns
// the base URL.
func (ts *testServer) serve(t *testing.T, svc *placing.Service, ready []httpapi.Checker) string {
	t.Helper()
	srv := httptest.NewServer(httpapi.New(svc, ts.services(svc, testLogger(t)), auth.NewVerifier(testSecret), ready, testLogger(t)))
	t.Cleanup(srv.Close)
	return srv.URL
}

// announceTopic makes kafka-go's process-wide DefaultTransport, which the
// publisher's writer uses and which caches cluster metadata for seconds,
// learn of a topic just created: until it does, a publish fails with
// Unknown Topic Or Partition. A metadata request that allows auto-creation
// of a topic missing from the cache makes the transport refresh and wait.
func announceTopic(t *testing.T, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	addr := kafka.TCP(kafkatest.Brokers()...)
	for _, create := range []bool{true, false} { // refresh, then read the cache
		res, err := kafka.DefaultTransport.RoundTrip(ctx, addr, &metadata.Request{TopicNames: []string{topic}, AllowAutoTopicCreation: create})
		if err != nil {
			t.Fatalf("kafka metadata for %s: %v", topic, err)
		}
		for _, tp := range res.(*metadata.Response).Topics {
			if tp.Name == topic && tp.ErrorCode != 0 {
				t.Fatalf("kafka metadata for %s: %v", topic, kafka.Error(tp.ErrorCode))
			}
		}
	}
}

// testLogger writes the server's log into the test's output, shown when
// the test fails or runs with -v.
func testLogger(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

// frozenClock is the service's clock; while frozen it stands still.
type frozenClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *frozenClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() {
		return time.Now()
	}
	return c.at
}

func (c *frozenClock) freeze()          { c.mu.Lock(); c.at = time.Now(); c.mu.Unlock() }
func (c *frozenClock) set(at time.Time) { c.mu.Lock(); c.at = at; c.mu.Unlock() }
func (c *frozenClock) unfreeze()        { c.mu.Lock(); c.at = time.Time{}; c.mu.Unlock() }

// Tokens.

func buyerToken(t *testing.T, user int64) string {
	t.Helper()
	tok, err := auth.Mint(testSecret, strconv.FormatInt(user, 10), "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func adminToken(t *testing.T) string {
	t.Helper()
	tok, err := auth.Mint(testSecret, "1", auth.RoleAdmin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// HTTP.

type response struct {
	status int
	header http.Header
	body   []byte
}

// request is one HTTP call; an empty token sends no Authorization header.
type request struct {
	method  string
	path    string
	token   string
	header  map[string]string
	body    string
	rawAuth string // sent as the Authorization header when set
}

func (ts *testServer) do(t *testing.T, base string, r request) response {
	t.Helper()
	res, err := ts.tryDo(base, r)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// tryDo is do for goroutines other than the test's.
func (ts *testServer) tryDo(base string, r request) (response, error) {
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, base+r.path, body)
	if err != nil {
		return response{}, err
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case r.rawAuth != "":
		req.Header.Set("Authorization", r.rawAuth)
	case r.token != "":
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	res, err := ts.client.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: read body: %w", r.method, r.path, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}, nil
}

// decode strictly decodes the response body into v.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("response %d body %q: %v", r.status, r.body, err)
	}
}

// errorBody is the contract's error shape, exactly.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// wantError checks the status and that the body is exactly the error shape
// with the code and a message.
func wantError(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	var e errorBody
	r.decode(t, &e)
	if e.Error.Code != code || e.Error.Message == "" {
		t.Fatalf("error = %+v, want code %s and a message", e.Error, code)
	}
	if strings.ContainsRune(e.Error.Message, utf8.RuneError) {
		t.Fatalf("message %q has a broken character", e.Error.Message)
	}
	if status == http.StatusServiceUnavailable && r.header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After")
	}
}

// Admin set-up through the admin routes.

func (ts *testServer) newItem(t *testing.T, stock int64) int64 {
	t.Helper()
	r := ts.do(t, ts.url, request{method: "POST", path: "/admin/v1/items", token: adminToken(t),
		body: fmt.Sprintf(`{"name":"sneaker","stock":%d}`, stock)})
	if r.status != http.StatusCreated {
		t.Fatalf("create item: %d %s", r.status, r.body)
	}
	var it struct {
		ItemID int64  `json:"item_id"`
		Name   string `json:"name"`
		Stock  int64  `json:"stock"`
	}
	r.decode(t, &it)
	return it.ItemID
}

// newActivity creates an activity; limit 0 leaves per_user_limit out.
func (ts *testServer) newActivity(t *testing.T, item int64, starts, ends time.Time, limit int) int64 {
	t.Helper()
	body := fmt.Sprintf(`{"item_id":%d,"starts_at":%q,"ends_at":%q`, item,
		starts.Format(time.RFC3339Nano), ends.Format(time.RFC3339Nano))
	if limit > 0 {
		body += fmt.Sprintf(`,"per_user_limit":%d`, limit)
	}
	r := ts.do(t, ts.url, request{method: "POST", path: "/admin/v1/activities", token: adminToken(t), body: body + "}"})
	if r.status != http.StatusCreated {
		t.Fatalf("create activity: %d %s", r.status, r.body)
	}
	var a httpapi.ActivityView
	r.decode(t, &a)
	return a.ActivityID
}

func (ts *testServer) warm(t *testing.T, activity int64) {
	t.Helper()
	r := ts.do(t, ts.url, request{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/warmup", activity), token: adminToken(t)})
	if r.status != http.StatusOK {
		t.Fatalf("warmup: %d %s", r.status, r.body)
	}
}

// openSizedSale creates n warmed items with stock each and a sale of all of
// them running now.
func (ts *testServer) openSizedSale(t *testing.T, n int, stock int64) (items []int64, activity int64) {
	t.Helper()
	var list []string
	for i := range n {
		it := ts.newItem(t, stock)
		items = append(items, it)
		list = append(list, fmt.Sprintf(`{"item_id":%d,"label":"size %d"}`, it, i+1))
	}
	body := fmt.Sprintf(`{"items":[%s],"starts_at":%q,"ends_at":%q}`, strings.Join(list, ","),
		time.Now().Add(-time.Minute).Format(time.RFC3339Nano), time.Now().Add(time.Hour).Format(time.RFC3339Nano))
	r := ts.do(t, ts.url, request{method: "POST", path: "/admin/v1/activities", token: adminToken(t), body: body})
	if r.status != http.StatusCreated {
		t.Fatalf("create sized activity: %d %s", r.status, r.body)
	}
	var a httpapi.ActivityView
	r.decode(t, &a)
	ts.warm(t, a.ActivityID)
	return items, a.ActivityID
}

// openSale creates a warmed item with stock and an activity running now.
func (ts *testServer) openSale(t *testing.T, stock int64, limit int) (item, activity int64) {
	t.Helper()
	item = ts.newItem(t, stock)
	activity = ts.newActivity(t, item, time.Now().Add(-time.Minute), time.Now().Add(time.Hour), limit)
	ts.warm(t, activity)
	return item, activity
}

// Orders.

type placed struct {
	OrderNo string `json:"order_no"`
	Status  string `json:"status"`
}

func (ts *testServer) place(t *testing.T, base, token, key string, activity int64) response {
	t.Helper()
	return ts.do(t, base, request{method: "POST", path: "/api/v1/orders", token: token,
		header: map[string]string{"Idempotency-Key": key}, body: fmt.Sprintf(`{"activity_id":%d}`, activity)})
}

// mustPlace places an order that must be accepted and returns its number.
func (ts *testServer) mustPlace(t *testing.T, base, token, key string, activity int64) string {
	t.Helper()
	r := ts.place(t, base, token, key, activity)
	return accepted(t, r)
}

// accepted checks a 202 with its Location and returns the order number.
func accepted(t *testing.T, r response) string {
	t.Helper()
	if r.status != http.StatusAccepted {
		t.Fatalf("status = %d, want 202; body %s", r.status, r.body)
	}
	var p placed
	r.decode(t, &p)
	if !order.ValidOrderNo(p.OrderNo) || p.Status != string(order.Pending) {
		t.Fatalf("accepted body = %+v", p)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/orders/"+p.OrderNo {
		t.Fatalf("Location = %q, want /api/v1/orders/%s", loc, p.OrderNo)
	}
	return p.OrderNo
}

// Observing what the API wrote.

func (ts *testServer) stock(t *testing.T, item int64) reservation.Snapshot {
	t.Helper()
	snap, err := ts.store.Stock.Stock(context.Background(), reservation.One(item))
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// redisDump renders every key under the test's prefix with its value, so
// two dumps differ when anything was written.
func (ts *testServer) redisDump(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	rdb := ts.rdb
	var keys []string
	iter := rdb.Scan(ctx, 0, ts.prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "set":
			var m []string
			m, err = rdb.SMembers(ctx, k).Result()
			sort.Strings(m)
			v = m
		default:
			v = typ
		}
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s = %v\n", k, v)
	}
	return b.String()
}

// reservations returns the order numbers that have a reservation hash for item.
func (ts *testServer) reservations(t *testing.T, item int64) []string {
	t.Helper()
	ctx := context.Background()
	pattern := ts.store.Keys(reservation.One(item)).Reservation("*")
	var nos []string
	iter := ts.rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		nos = append(nos, strings.TrimPrefix(iter.Val(), strings.TrimSuffix(pattern, "*")))
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(nos)
	return nos
}

func (ts *testServer) exists(t *testing.T, key string) bool {
	t.Helper()
	n, err := ts.rdb.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// topicEnd is the end offset of the test topic's only partition: the
// number of events ever published to it.
func (ts *testServer) topicEnd(t *testing.T) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", kafkatest.Brokers()[0], ts.topic, 0)
	if err != nil {
		t.Fatalf("dial topic leader: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	end, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatalf("read end offset: %v", err)
	}
	return end
}

// events reads the topic's first n events.
func (ts *testServer) events(t *testing.T, n int) []order.Event {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: kafkatest.Brokers(), Topic: ts.topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make([]order.Event, 0, n)
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read event %d of %d: %v", len(out)+1, n, err)
		}
		e, err := orderevents.Decode(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}
