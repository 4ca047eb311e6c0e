// Package pipelinetest runs the real programs (api and consumer, built from
// this module) as processes against the running Redis, MySQL and Kafka, each
// test with its own database, key prefix, topic and consumer group, and
// checks the pipeline's invariants with its own reads of MySQL and Redis.
package pipelinetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/segmentio/kafka-go"
)

// Secret is the JWT secret the test processes use.
const Secret = "pipelinetest-secret-0123456789abcdef0123"

// PaymentSecret is the payment provider's secret the test processes use.
const PaymentSecret = "pipelinetest-payments-0123456789abcdef"

// Pipeline is one test's isolated pipeline.
type Pipeline struct {
	t     testing.TB
	DB    *mysqltest.DB
	Store *stockredis.Store
	// Redis is the client Store runs on, for a test's own reads and
	// faults (the store hands out no client).
	Redis  redis.UniversalClient
	Prefix string
	Topic  string
	Group  string
	// Extra is added to every process's environment.
	Extra []string

	cluster      bool
	clusterAddrs []string
	brokers      []string

	mu    sync.Mutex
	procs []*Proc
}

// Options tunes a pipeline.
type Options struct {
	Partitions int // of the orders topic (default 3)
	// RedisCluster runs the pipeline on the Redis Cluster
	// (scripts/services up redis-cluster) instead of the single node.
	RedisCluster bool
	// RedisClusterAddrs are the seed nodes of another cluster to run on
	// (RedisCluster is then implied); default redistest.ClusterAddrs.
	RedisClusterAddrs []string
	// KafkaBrokers are the brokers to run on; default kafkatest.Brokers.
	KafkaBrokers []string
	// MySQLDSN names the server the test database is made on (its
	// database part is ignored); default mysqltest.BaseDSN.
	MySQLDSN string
}

// New prepares an isolated pipeline; start its processes with StartAPI and
// StartConsumer. Every process is killed when the test ends.
func New(t testing.TB, opts Options) *Pipeline {
	t.Helper()
	if opts.Partitions <= 0 {
		opts.Partitions = 3
	}
	if opts.KafkaBrokers == nil {
		opts.KafkaBrokers = kafkatest.Brokers()
	}
	if opts.MySQLDSN == "" {
		opts.MySQLDSN = mysqltest.BaseDSN()
	}
	if opts.RedisClusterAddrs != nil {
		opts.RedisCluster = true
	} else if opts.RedisCluster {
		opts.RedisClusterAddrs = redistest.ClusterAddrs()
	}
	rdb, prefix := redistest.New(t)
	if opts.RedisCluster {
		rdb, prefix = redistest.NewClusterAt(t, opts.RedisClusterAddrs)
	}
	p := &Pipeline{
		t:            t,
		cluster:      opts.RedisCluster,
		clusterAddrs: opts.RedisClusterAddrs,
		brokers:      opts.KafkaBrokers,
		DB:           mysqltest.NewOn(t, opts.MySQLDSN),
		Store:        stockredis.New(rdb, prefix),
		Redis:        rdb,
		Prefix:       prefix,
		Topic:        kafkatest.NewTopicOn(t, opts.KafkaBrokers, opts.Partitions),
		Group:        kafkatest.Name("test-consumer"),
	}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, pr := range p.procs {
			pr.Kill()
		}
	})
	return p
}

// Env is the environment of the pipeline's processes.
func (p *Pipeline) Env() []string {
	rf, isr := kafkatest.Replication(p.brokers)
	env := append(os.Environ(),
		"SECKILL_JWT_SECRET="+Secret,
		"SECKILL_REDIS_ADDR="+redistest.Addr(),
		"SECKILL_REDIS_PREFIX="+p.Prefix,
		"SECKILL_MYSQL_DSN="+p.DB.DSN,
		"SECKILL_KAFKA_BROKERS="+strings.Join(p.brokers, ","),
		"SECKILL_KAFKA_REPLICATION_FACTOR="+strconv.Itoa(rf),
		"SECKILL_KAFKA_MIN_INSYNC_REPLICAS="+strconv.Itoa(isr),
		"SECKILL_KAFKA_TOPIC="+p.Topic,
		"SECKILL_CONSUMER_GROUP="+p.Group,
		"SECKILL_LOG_LEVEL=info",
		"SECKILL_PAYMENT_SECRET="+PaymentSecret,
		"SECKILL_BUYER_PAY=true",
	)
	if p.cluster {
		env = append(env, "SECKILL_REDIS_ADDRS="+strings.Join(p.clusterAddrs, ","), "SECKILL_REDIS_CLUSTER=true")
	}
	return append(env, p.Extra...)
}

// Brokers are the Kafka brokers the pipeline runs on.
func (p *Pipeline) Brokers() []string { return p.brokers }

// Offsets returns, per partition of the pipeline's topic, its end offset and
// the offset group has committed, from the pipeline's brokers
// (kafkatest.Offsets).
func (p *Pipeline) Offsets(ctx context.Context, group string) (end, committed map[int]int64, err error) {
	return kafkatest.OffsetsOn(ctx, p.brokers, p.Topic, group)
}

// GroupLag returns how many messages of the pipeline's topic group has not
// committed yet, from the pipeline's brokers.
func (p *Pipeline) GroupLag(ctx context.Context, group string) (int64, error) {
	return kafkatest.GroupLagOn(ctx, p.brokers, p.Topic, group)
}

// Write writes msgs to the pipeline's topic as they are (kafkatest.Write),
// on the pipeline's brokers.
func (p *Pipeline) Write(msgs ...kafka.Message) {
	p.t.Helper()
	kafkatest.WriteOn(p.t, p.brokers, p.Topic, msgs...)
}

// Proc is a running program.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
	mu   *sync.Mutex
}

// PeakRSS is the most memory the process has had resident (Linux's
// VmHWM), in MiB: the peak of its Go heap and all else it mapped.
func (pr *Proc) PeakRSS() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pr.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 64)
			return n / 1024, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/<pid>/status")
}

// Kill sends SIGKILL and waits for the process to exit.
func (pr *Proc) Kill() {
	_ = pr.cmd.Process.Signal(syscall.SIGKILL)
	<-pr.done
}

// Signal sends sig to the process (e.g. SIGSTOP and SIGCONT to freeze it).
func (pr *Proc) Signal(sig syscall.Signal) error { return pr.cmd.Process.Signal(sig) }

// Done is closed when the process has exited.
func (pr *Proc) Done() <-chan struct{} { return pr.done }

// Stop sends SIGTERM and waits up to timeout for a clean exit.
func (pr *Proc) Stop(timeout time.Duration) error {
	_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pr.done:
		if code := pr.cmd.ProcessState.ExitCode(); code != 0 {
			return fmt.Errorf("%s exited with %d", pr.Name, code)
		}
		return nil
	case <-time.After(timeout):
		pr.Kill()
		return fmt.Errorf("%s did not stop within %v", pr.Name, timeout)
	}
}

// Env returns the value the process's environment gives name (the last
// setting wins, as for the process).
func (pr *Proc) Env(name string) string {
	v := ""
	for _, kv := range pr.cmd.Env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// Log returns what the process wrote so far.
func (pr *Proc) Log() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.log.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// Start runs program ("api" or "consumer") with the pipeline's environment
// plus env.
func (p *Pipeline) Start(program string, env ...string) *Proc {
	p.t.Helper()
	bin := Binary(p.t, program)
	cmd := exec.Command(bin)
	cmd.Env = append(p.Env(), env...)
	var mu sync.Mutex
	buf := &bytes.Buffer{}
	cmd.Stdout = lockedWriter{&mu, buf}
	cmd.Stderr = lockedWriter{&mu, buf}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("pipelinetest: start %s: %v", program, err)
	}
	pr := &Proc{Name: program, cmd: cmd, done: make(chan struct{}), log: buf, mu: &mu}
	go func() { _ = cmd.Wait(); close(pr.done) }()
	p.mu.Lock()
	p.procs = append(p.procs, pr)
	p.mu.Unlock()
	p.t.Cleanup(func() {
		if p.t.Failed() {
			p.t.Logf("--- %s log (last 4 KiB):\n%s", program, tail(pr.Log(), 4096))
		}
	})
	return pr
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// StartConsumer starts a consumer process.
func (p *Pipeline) StartConsumer(env ...string) *Proc { return p.Start("consumer", env...) }

// API is a running api process.
type API struct {
	*Proc
	URL string
	// Mint makes the bearer token of a request as sub with role, for an
	// api that verifies tokens of another issuer (nil: TokenFor).
	Mint     func(sub, role string) string
	pipeline *Pipeline
	client   *http.Client
}

// StartAPI starts an api process on a free loopback port and waits until
// /readyz answers 200.
func (p *Pipeline) StartAPI(env ...string) *API {
	p.t.Helper()
	a := p.LaunchAPI(FreeAddr(p.t), env...)
	waittest.Until(p.t, 60*time.Second, "the api ready at "+a.URL+"/readyz", func() bool {
		select {
		case <-a.done:
			p.t.Fatalf("pipelinetest: api exited: %s", tail(a.Log(), 2048))
		default:
		}
		return a.Ready()
	})
	return a
}

// LaunchAPI starts an api process listening on addr and returns at once,
// without waiting for it to be ready: a soak restarts an instance on the
// address its clients know, maybe while a service the api needs is down.
func (p *Pipeline) LaunchAPI(addr string, env ...string) *API {
	p.t.Helper()
	pr := p.Start("api", append(env, "SECKILL_HTTP_ADDR="+addr)...)
	return &API{Proc: pr, URL: "http://" + addr, pipeline: p, client: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256},
	}}
}

// Ready says whether the api answers 200 on /readyz now.
func (a *API) Ready() bool {
	resp, err := a.client.Get(a.URL + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Token mints a token for user (role "admin" for operators).
func Token(user int64, role string) string { return TokenFor(strconv.FormatInt(user, 10), role) }

// TokenFor mints a token whose subject is sub, signed with Secret.
func TokenFor(sub, role string) string {
	tok, err := auth.Mint([]byte(Secret), sub, role, time.Hour)
	if err != nil {
		panic(err)
	}
	return tok
}

// Do sends a JSON request as user and decodes a JSON answer into out (if
// not nil). It returns the status code.
func (a *API) Do(method, path string, user int64, role string, headers map[string]string, body, out any) (int, error) {
	return a.DoAs(method, path, strconv.FormatInt(user, 10), role, headers, body, out)
}

// DoAs is Do for a user whose id (the token's subject) is sub. The token is
// a.Mint's when set, else TokenFor's.
func (a *API) DoAs(method, path, sub, role string, headers map[string]string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.URL+path, rd)
	if err != nil {
		return 0, err
	}
	tok := ""
	if a.Mint != nil {
		tok = a.Mint(sub, role)
	} else {
		tok = TokenFor(sub, role)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %q: %w", b, err)
		}
	}
	return resp.StatusCode, nil
}

// Sale is an item, or several (a sale in sizes), with a warmed, running
// activity.
type Sale struct {
	ItemID, ActivityID int64 // ItemID: the first item, whose hash tag the sale's keys share
	Stock              int64 // of all its items
	// Items are the sale's items with their initial stock, the first
	// first; nil for a Sale written as a literal of one item (ItemID,
	// Stock).
	Items []SaleItem
}

// SaleItem is one item of a sale: a size.
type SaleItem struct {
	ID, Stock int64
	Label     string
}

// All is s's items: Items, or the one item ItemID with Stock.
func (s Sale) All() []SaleItem {
	if len(s.Items) > 0 {
		return s.Items
	}
	return []SaleItem{{ID: s.ItemID, Stock: s.Stock}}
}

// Sized says whether s sells several items (orders then name one).
func (s Sale) Sized() bool { return len(s.Items) > 1 }

// Item is the stockredis item of s with id (under s's hash tag).
func (s Sale) Item(id int64) reservation.Item { return reservation.In(s.ItemID, id) }

// CreateSale creates an item with stock and an activity running now for an
// hour, and warms it up.
func (a *API) CreateSale(stock int64, perUserLimit int) Sale {
	a.pipeline.t.Helper()
	return a.CreateBucketedSale(stock, perUserLimit, 1)
}

// CreateBucketedSale is CreateSale with the item's Redis stock split over
// buckets keys (the activity's stock_buckets).
func (a *API) CreateBucketedSale(stock int64, perUserLimit, buckets int) Sale {
	a.pipeline.t.Helper()
	return a.CreateSaleWith(stock, SaleOptions{PerUserLimit: perUserLimit, Buckets: buckets})
}

// SaleOptions are the activity settings of CreateSaleWith.
type SaleOptions struct {
	PerUserLimit int
	// Buckets splits the item's Redis stock (stock_buckets); 0 or 1 is one key.
	Buckets int
	// PaymentWindow is the activity's own payment window
	// (payment_window_seconds); 0 leaves the global one.
	PaymentWindow time.Duration
	// Price is the item's price (minor units of Currency); no price when
	// Currency is empty.
	Price    int64
	Currency string
	// Sizes makes a sale of several items, one per entry, each with that
	// stock (labelled "size 1", "size 2", ...); the stock argument is then
	// ignored, the Sale's Stock being their sum. Empty: one item.
	Sizes []int64
	// StartsIn starts the sale that long from now (0: it started a minute
	// ago); it runs for an hour from its start.
	StartsIn time.Duration
	// WaitingRoom is the activity's "waiting_room" (nil: none).
	WaitingRoom map[string]any
	// EntriesCloseIn makes the sale a draw ("mode": "draw") whose entries
	// close that long from now (0: a first-come sale).
	EntriesCloseIn time.Duration
	// Access is the sale's "access" ("": left out, open).
	Access string
}

// CreateSizedSale creates a sale of len(sizes) items (its sizes), item i
// with stock sizes[i], running now for an hour, and warms it up.
func (a *API) CreateSizedSale(sizes []int64, perUserLimit int) Sale {
	a.pipeline.t.Helper()
	var total int64
	for _, n := range sizes {
		total += n
	}
	return a.CreateSaleWith(total, SaleOptions{PerUserLimit: perUserLimit, Sizes: sizes})
}

// CreateSaleWith creates an item with stock and an activity running now
// with o, and warms it up.
func (a *API) CreateSaleWith(stock int64, o SaleOptions) Sale {
	t := a.pipeline.t
	t.Helper()
	perUserLimit, buckets := max(o.PerUserLimit, 1), o.Buckets
	sizes := o.Sizes
	if len(sizes) == 0 {
		sizes = []int64{stock}
	}
	var items []SaleItem
	for i, n := range sizes {
		var item struct {
			ItemID int64 `json:"item_id"`
		}
		itemBody := map[string]any{"name": "test item", "stock": n}
		if o.Currency != "" {
			itemBody["price"], itemBody["currency"] = o.Price, o.Currency
		}
		if code, err := a.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil, itemBody, &item); err != nil || code != 201 {
			t.Fatalf("create item: %d %v", code, err)
		}
		items = append(items, SaleItem{ID: item.ItemID, Stock: n, Label: fmt.Sprintf("size %d", i+1)})
	}
	var act struct {
		ActivityID int64 `json:"activity_id"`
	}
	now := time.Now().UTC()
	start, end := now.Add(-time.Minute), now.Add(time.Hour)
	if o.StartsIn > 0 {
		start, end = now.Add(o.StartsIn), now.Add(o.StartsIn+time.Hour)
	}
	body := map[string]any{"item_id": items[0].ID, "starts_at": start, "ends_at": end, "per_user_limit": perUserLimit}
	if o.WaitingRoom != nil {
		body["waiting_room"] = o.WaitingRoom
	}
	if o.EntriesCloseIn > 0 {
		body["mode"], body["entries_close_at"] = "draw", now.Add(o.EntriesCloseIn)
	}
	if o.Access != "" {
		body["access"] = o.Access
	}
	if len(o.Sizes) > 0 {
		list := make([]map[string]any, len(items))
		for i, it := range items {
			list[i] = map[string]any{"item_id": it.ID, "label": it.Label}
		}
		delete(body, "item_id")
		body["items"] = list
	}
	if buckets > 1 {
		body["stock_buckets"] = buckets
	}
	if o.PaymentWindow > 0 {
		body["payment_window_seconds"] = int(o.PaymentWindow / time.Second)
	}
	if code, err := a.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil, body, &act); err != nil || code != 201 {
		t.Fatalf("create activity: %d %v", code, err)
	}
	if code, err := a.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/warmup", act.ActivityID), 1, auth.RoleAdmin, nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("warmup: %d %v", code, err)
	}
	sale := Sale{ItemID: items[0].ID, ActivityID: act.ActivityID, Stock: stock}
	if len(o.Sizes) > 0 {
		sale.Items, sale.Stock = items, 0
		for _, it := range items {
			sale.Stock += it.Stock
		}
	}
	return sale
}

// NewSale is CreateSale without the API: the item and the activity are
// written to MySQL and warmed up in Redis directly, for in-process tests.
func (p *Pipeline) NewSale(stock int64, perUserLimit int) Sale {
	t := p.t
	t.Helper()
	ctx := context.Background()
	it, err := p.DB.Activities.CreateItem(ctx, "test item", stock)
	if err != nil {
		t.Fatalf("create item: %v", err)
	}
	now := time.Now().UTC()
	act, err := p.DB.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: now.Add(-time.Minute),
		EndsAt: now.Add(time.Hour), PerUserLimit: max(perUserLimit, 1)})
	if err != nil {
		t.Fatalf("create activity: %v", err)
	}
	if _, err := p.Store.Stock.WarmupFrom(ctx, reservation.One(it.ID), 1, 2*time.Hour, p.DB.Restocks); err != nil {
		t.Fatalf("warmup: %v", err)
	}
	return Sale{ItemID: it.ID, ActivityID: act.ID, Stock: stock}
}

// Placed is the answer to an order attempt.
type Placed struct {
	Code    int
	OrderNo string
	Status  string
	Error   string
}

// PlaceOrder posts one order as user with key.
func (a *API) PlaceOrder(user int64, key string, activity int64, qty int) (Placed, error) {
	return a.PlaceOrderAs(strconv.FormatInt(user, 10), key, activity, qty)
}

// PlaceOrderAs is PlaceOrder for the user whose id is sub.
func (a *API) PlaceOrderAs(sub, key string, activity int64, qty int) (Placed, error) {
	return a.PlaceOrderOf(sub, key, activity, 0, qty)
}

// PlaceOrderItem is PlaceOrder of item (a size) of a sale of several
// items.
func (a *API) PlaceOrderItem(user int64, key string, activity, item int64, qty int) (Placed, error) {
	return a.PlaceOrderOf(strconv.FormatInt(user, 10), key, activity, item, qty)
}

// PlaceOrderOf posts one order of item of activity (no item_id when item
// is 0) as the user whose id is sub.
func (a *API) PlaceOrderOf(sub, key string, activity, item int64, qty int) (Placed, error) {
	return a.PlaceOrderAdmitted(sub, key, activity, item, qty, "")
}

// PlaceOrderAdmitted is PlaceOrderOf with the buyer's admission to a sale
// with a waiting room in X-Admission (none when "").
func (a *API) PlaceOrderAdmitted(sub, key string, activity, item int64, qty int, admission string) (Placed, error) {
	return a.placeOrder(sub, key, activity, item, qty, admission, "")
}

// PlaceOrderWithCode is PlaceOrderAs with a presale code ("access_code").
func (a *API) PlaceOrderWithCode(sub, key string, activity int64, qty int, code string) (Placed, error) {
	return a.placeOrder(sub, key, activity, 0, qty, "", code)
}

func (a *API) placeOrder(sub, key string, activity, item int64, qty int, admission, accessCode string) (Placed, error) {
	var body struct {
		OrderNo string `json:"order_no"`
		Status  string `json:"status"`
		Error   struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	req := map[string]any{"activity_id": activity, "quantity": qty}
	if item != 0 {
		req["item_id"] = item
	}
	if accessCode != "" {
		req["access_code"] = accessCode
	}
	h := map[string]string{"Idempotency-Key": key}
	if admission != "" {
		h["X-Admission"] = admission
	}
	code, err := a.DoAs("POST", "/api/v1/orders", sub, "", h, req, &body)
	return Placed{Code: code, OrderNo: body.OrderNo, Status: body.Status, Error: body.Error.Code}, err
}

// Solve is a solution of a waiting room's proof of work with at least bits
// leading zero bits (room.Work), found by counting up from 0 as the
// waiting page does.
func Solve(challenge string, bits int) string {
	for n := 0; ; n++ {
		if s := strconv.Itoa(n); room.Work(challenge, s) >= bits {
			return s
		}
	}
}

// Unsolved is the first count whose proof of work falls short of bits.
func Unsolved(challenge string, bits int) string {
	for n := 0; ; n++ {
		if s := strconv.Itoa(n); room.Work(challenge, s) < bits {
			return s
		}
	}
}

// OrderStatus polls one order's status as user.
func (a *API) OrderStatus(user int64, orderNo string) (string, string, error) {
	return a.OrderStatusAs(strconv.FormatInt(user, 10), orderNo)
}

// OrderStatusAs is OrderStatus for the user whose id is sub.
func (a *API) OrderStatusAs(sub, orderNo string) (string, string, error) {
	var body struct {
		Status        string `json:"status"`
		FailureReason string `json:"failure_reason"`
	}
	code, err := a.DoAs("GET", "/api/v1/orders/"+orderNo, sub, "", nil, nil, &body)
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d", code)
	}
	return body.Status, body.FailureReason, err
}

// WaitFinal polls until every accepted order (order number -> user) is
// final in MySQL, and returns their statuses.
func (p *Pipeline) WaitFinal(accepted map[string]int64, timeout time.Duration) map[string]order.Order {
	p.t.Helper()
	nos := make([]string, 0, len(accepted))
	for no := range accepted {
		nos = append(nos, no)
	}
	var got map[string]order.Order
	waittest.Until(p.t, timeout, fmt.Sprintf("pipelinetest: %d accepted orders to be final", len(nos)), func() bool {
		var err error
		got, err = p.DB.Orders.Orders(context.Background(), nos)
		return err == nil && len(got) == len(nos)
	})
	return got
}

// WaitDrained polls until no reservation of item (of a sale of one item)
// is in flight.
func (p *Pipeline) WaitDrained(item int64, timeout time.Duration) {
	p.t.Helper()
	p.waitDrained(reservation.One(item), timeout)
}

// WaitSaleDrained polls until no reservation of any item of s is in flight.
func (p *Pipeline) WaitSaleDrained(s Sale, timeout time.Duration) {
	p.t.Helper()
	for _, it := range s.All() {
		p.waitDrained(s.Item(it.ID), timeout)
	}
}

func (p *Pipeline) waitDrained(it reservation.Item, timeout time.Duration) {
	p.t.Helper()
	waittest.Until(p.t, timeout, fmt.Sprintf("pipelinetest: item %d to have nothing in flight", it.ID), func() bool {
		snap, err := p.Store.Stock.Stock(context.Background(), it)
		return err == nil && snap.Inflight == 0
	})
}

// Invariants are the pipeline's final values for one sale, or one item of
// it.
type Invariants struct {
	DBStock, RedisStock, Inflight int64
	LiveOrders, LiveUnits         int64
	UsersWithTwoLive              int64
}

// Check reads MySQL and Redis and fails the test unless, for the sale and
// each of its items: no unit is oversold (live units + MySQL stock =
// initial stock, MySQL stock >= 0), no user holds two live orders (across
// the sale's items), and Redis stock equals MySQL stock with nothing in
// flight. It returns what it read, summed over the items.
func (p *Pipeline) Check(s Sale) Invariants {
	p.t.Helper()
	return Total(p.CheckItems(s))
}

// Total is the sale's figures from its items' (CheckItems).
func Total(items []Invariants) Invariants {
	var inv Invariants
	for _, it := range items {
		inv.DBStock += it.DBStock
		inv.RedisStock += it.RedisStock
		inv.Inflight += it.Inflight
		inv.LiveOrders += it.LiveOrders
		inv.LiveUnits += it.LiveUnits
		inv.UsersWithTwoLive = it.UsersWithTwoLive
	}
	return inv
}

// CheckItems is Check giving what it read per item, in the order of
// s.All(); UsersWithTwoLive is the sale's in each.
func (p *Pipeline) CheckItems(s Sale) []Invariants {
	p.t.Helper()
	ctx := context.Background()
	g := p.DB.Gorm().WithContext(ctx)
	var twoLive int64
	if err := g.Raw(`SELECT COUNT(*) FROM (SELECT user_id FROM orders WHERE activity_id = ? AND status IN ('CREATED','PAID')
		GROUP BY user_id HAVING COUNT(*) > 1) d`, s.ActivityID).Scan(&twoLive).Error; err != nil {
		p.t.Fatal(err)
	}
	if twoLive != 0 {
		p.t.Errorf("%d users hold more than one live order", twoLive)
	}
	var out []Invariants
	for _, it := range s.All() {
		inv := Invariants{UsersWithTwoLive: twoLive}
		if err := g.Raw("SELECT stock FROM item_stock WHERE item_id = ?", it.ID).Scan(&inv.DBStock).Error; err != nil {
			p.t.Fatal(err)
		}
		if err := g.Raw("SELECT COUNT(*), COALESCE(SUM(quantity), 0) FROM orders WHERE item_id = ? AND status IN ('CREATED','PAID')", it.ID).
			Row().Scan(&inv.LiveOrders, &inv.LiveUnits); err != nil {
			p.t.Fatal(err)
		}
		snap, err := p.Store.Stock.Stock(ctx, s.Item(it.ID))
		if err != nil {
			p.t.Fatal(err)
		}
		inv.RedisStock, inv.Inflight = snap.Stock, snap.Inflight
		if inv.DBStock < 0 || inv.LiveUnits+inv.DBStock != it.Stock {
			p.t.Errorf("item %d oversold: live units %d + MySQL stock %d != initial stock %d", it.ID, inv.LiveUnits, inv.DBStock, it.Stock)
		}
		if !snap.Warmed || inv.RedisStock != inv.DBStock || inv.Inflight != 0 {
			p.t.Errorf("item %d: Redis stock %d (warmed %v, in flight %d) != MySQL stock %d", it.ID, inv.RedisStock, snap.Warmed, inv.Inflight, inv.DBStock)
		}
		out = append(out, inv)
	}
	return out
}

// Count runs a query whose answer is one integer (SELECT COUNT(*) ...) on
// the pipeline's MySQL and fails the test when it cannot be read: a count
// that was never read is not taken for zero ("nothing was written").
func (p *Pipeline) Count(query string, args ...any) int64 {
	p.t.Helper()
	var n int64
	if err := p.DB.Gorm().Raw(query, args...).Scan(&n).Error; err != nil {
		p.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// ReserveEvent reserves qty units of the sale for user in Redis, as the API
// does before it publishes, and returns the event it would publish.
func (p *Pipeline) ReserveEvent(s Sale, user int64, qty int, key string) order.Event {
	p.t.Helper()
	return p.ReserveEventAt(s, user, qty, key, time.Now())
}

// ReserveEventAt is ReserveEvent with the reservation made at time at.
func (p *Pipeline) ReserveEventAt(s Sale, userID int64, qty int, key string, at time.Time) order.Event {
	p.t.Helper()
	user := strconv.FormatInt(userID, 10)
	e := order.Event{Version: order.EventVersion, OrderNo: order.NewNumberGenerator().Next(s.ItemID), IdempotencyKey: key,
		UserID: user, ItemID: s.ItemID, ActivityID: s.ActivityID, Quantity: qty, ReservedAt: at}
	if _, err := p.Store.Reservations.Reserve(context.Background(), reservation.Reservation{
		OrderNo: e.OrderNo, UserID: user, ItemID: s.ItemID, ActivityID: s.ActivityID, Quantity: qty,
		IdempotencyKey: key, At: e.ReservedAt, QuotaTTL: time.Hour, ReservationTTL: time.Hour,
	}); err != nil {
		p.t.Fatalf("reserve: %v", err)
	}
	return e
}
