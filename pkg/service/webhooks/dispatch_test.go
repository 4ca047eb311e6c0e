package webhooks_test

import (
	"context"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"time"

	"github.com/seckill/seckill/internal/testkit/hooktest"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/service/lifecycle"
	"github.com/seckill/seckill/pkg/service/relay"
	"github.com/seckill/seckill/pkg/service/webhooks"
)

// rig is a test's relay, dispatchers and webhook service over its own
// database and topic.
type rig struct {
	db  *mysqltest.DB
	svc *webhooks.Service
	// timeout is the dispatchers' per-delivery timeout.
	timeout time.Duration
	// schedule is the dispatchers' (quickSchedule unless set).
	schedule hook.Schedule
	metrics  *metrics.Webhooks
}

func newRig(t *testing.T) *rig {
	t.Helper()
	db := mysqltest.New(t)
	return &rig{db: db, timeout: time.Second, svc: &webhooks.Service{Store: db.Webhooks, NewSecret: webhook.NewSecret, Now: time.Now,
		CheckURL: func(ctx context.Context, raw string) error { return webhook.CheckURL(ctx, raw, true) }}}
}

// register registers e for events and has it trust the secret.
func (r *rig) register(t *testing.T, e *hooktest.Endpoint, events ...string) hook.Endpoint {
	t.Helper()
	ep, secret, err := r.svc.Register(context.Background(), webhooks.Registration{URL: e.URL, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	e.Trust(secret)
	return ep
}

func (r *rig) scheduleOr(def hook.Schedule) hook.Schedule {
	if r.schedule != nil {
		return r.schedule
	}
	return def
}

// quickSchedule retries within seconds, and for long enough to outlast
// the tests' faults.
var quickSchedule = func() hook.Schedule {
	s := hook.Schedule{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	for range 60 {
		s = append(s, time.Second)
	}
	return s
}()

// run starts a relay publishing to a topic of its own and n dispatchers
// until the test ends.
func (r *rig) run(t *testing.T, n int, disableAfter time.Duration) {
	t.Helper()
	topic := kafkatest.NewTopic(t, 3)
	w := orderevents.NewOutboxWriter(orderevents.Config{Brokers: kafkatest.Brokers()}, topic)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	rl := &relay.Relay{Tx: r.db, Store: r.db.Outbox, Publisher: w, Fanout: &webhooks.Fanout{Queue: r.db.Webhooks}}
	wg.Go(func() {
		for ctx.Err() == nil {
			_, _ = rl.Pass(ctx)
			time.Sleep(10 * time.Millisecond)
		}
	})
	for i := range n {
		d := &webhooks.Dispatcher{Store: r.db.Webhooks, Sender: webhook.Sender{Client: webhook.NewClient(r.timeout, true)},
			Owner: "test-" + strconv.Itoa(i), Every: 20 * time.Millisecond, Lease: r.timeout + 5*time.Second, Batch: 50,
			Concurrency: 4, Schedule: r.scheduleOr(quickSchedule), DisableAfter: disableAfter, Metrics: r.metrics,
			Log: slog.New(slog.DiscardHandler), Now: time.Now}
		wg.Go(func() { d.Run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = w.Close()
	})
}

// orders writes n orders of a sale of stock units (those past it FAILED)
// and pays every other one created, concurrently.
func (r *rig) orders(t *testing.T, n int, stock int64) {
	t.Helper()
	ctx := context.Background()
	a := r.db.OpenSale(t, stock, order.Money{Amount: 900, Currency: "EUR"})
	gen := order.NewNumberGenerator()
	reqs := make([]order.FulfilRequest, n)
	for u := range n {
		reqs[u] = order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: gen.Next(a.ItemID),
			IdempotencyKey: "k", UserID: strconv.Itoa(u + 1), ItemID: a.ItemID, ActivityID: a.ID, Quantity: 1, ReservedAt: time.Now()},
			PayDeadline: time.Now().Add(time.Hour), UnitPrice: order.Money{Amount: 900, Currency: "EUR"}}
	}
	life := &lifecycle.Service{Tx: r.db, Events: r.db.Outbox, DB: r.db.Orders, Payments: r.db.Payments, Log: slog.New(slog.DiscardHandler)}
	var wg sync.WaitGroup
	for i := 0; i < n; i += 10 {
		wg.Go(func() {
			outs, err := mysqltest.Fulfil(ctx, r.db.DB, reqs[i:min(i+10, n)])
			if err != nil {
				t.Error(err)
				return
			}
			for j, q := range reqs[i:min(i+10, n)] {
				if outs[q.Event.OrderNo].Status == order.Created && j%2 == 0 {
					if _, err := life.Pay(ctx, q.Event.UserID, q.Event.OrderNo); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
}

// drained waits until no delivery to ep is pending.
func (r *rig) drained(t *testing.T, ep hook.Endpoint, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		shards, err := r.db.Outbox.PendingShards(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pending, err := r.db.Webhooks.Deliveries(context.Background(), ep.ID, hook.Pending, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(shards) == 0 && len(pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook %d: deliveries still pending after %s (%d outbox shards unpublished)", ep.ID, within, len(shards))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// heard checks that e got every event of the outbox it wants, with valid
// signatures, each order's first arrivals in seq order, and that the last
// event of each order states the order's status in MySQL.
func (r *rig) heard(t *testing.T, e *hooktest.Endpoint, ep hook.Endpoint) {
	t.Helper()
	ctx := context.Background()
	if err := e.Invalid(); err != nil {
		t.Fatalf("endpoint %s refused deliveries: %v", e.URL, err)
	}
	committed, _, err := r.db.Outbox.Since(ctx, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]outbox.Event{}
	last := map[string]outbox.Event{}
	for _, ev := range e.Unique() {
		got[ev.ID] = ev
		prev, ok := last[ev.Stream()]
		if ok && ev.Data.Seq != prev.Data.Seq+1 || !ok && ev.Data.Seq != 1 {
			t.Fatalf("endpoint %s: order %s's event seq %d arrived after seq %d", e.URL, ev.Stream(), ev.Data.Seq, prev.Data.Seq)
		}
		last[ev.Stream()] = ev
	}
	wanted := 0
	for _, c := range committed {
		if !ep.Wants(c.Type) {
			if _, ok := got[c.ID]; ok {
				t.Fatalf("endpoint %s got %s, a %s it did not ask for", e.URL, c.ID, c.Type)
			}
			continue
		}
		wanted++
		g, ok := got[c.ID]
		if !ok {
			t.Fatalf("endpoint %s never got event %s (%s)", e.URL, c.ID, c.Type)
		}
		if g.Type != c.Type || !reflect.DeepEqual(g.Data, c.Data) || !g.Time.Equal(c.Time) {
			t.Fatalf("endpoint %s got %+v for %+v", e.URL, g, c)
		}
	}
	if len(got) != wanted || wanted == 0 {
		t.Fatalf("endpoint %s got %d events, the outbox has %d it wants", e.URL, len(got), wanted)
	}
	for no, ev := range last {
		o, err := r.db.Orders.Order(ctx, no)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Data.Status != string(o.Status) && ep.Wants(outbox.OrderPaid) {
			t.Fatalf("endpoint %s: the last event of order %s says %s; MySQL holds %s", e.URL, no, ev.Data.Status, o.Status)
		}
	}
}

// Four endpoints take the events of 120 orders (created, failed for stock,
// paid) while two dispatchers share them: one answers at once, one 500 to
// every other delivery, one is down for a while, one hangs past the
// timeout until the healthy one was served in full. Each gets every event
// it asked for, signed, each order's in seq order, the last stating the
// order's final status.
func TestEveryEndpointHearsEveryEventInOrder(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	healthy, flaky, down, slow := hooktest.New(t), hooktest.New(t), hooktest.New(t), hooktest.New(t)
	epHealthy := r.register(t, healthy, "*")
	epFlaky := r.register(t, flaky, "order.*")
	epDown := r.register(t, down, "order.created", "order.paid", "order.failed")
	epSlow := r.register(t, slow, "*")
	flaky.Answer(func(n int) (time.Duration, int) {
		if n%2 == 0 {
			return 0, http.StatusInternalServerError
		}
		return 0, http.StatusOK
	})
	// The slow endpoint hangs (past the dispatchers' 1 s) until the healthy
	// one has every event: it cannot hold the healthy one up.
	hung := make(chan struct{})
	slow.Answer(func(int) (time.Duration, int) {
		<-hung
		return 0, http.StatusAccepted
	})
	down.Down()
	r.run(t, 2, time.Hour)
	r.orders(t, 120, 100)

	r.drained(t, epHealthy, 60*time.Second)
	waittest.Until(t, 30*time.Second, "the hung endpoint is sent a delivery again after its timeout", func() bool {
		return len(slow.Arrivals()) > len(slow.Unique())
	})
	close(hung)
	down.Up(t)
	for _, ep := range []hook.Endpoint{epFlaky, epDown, epSlow} {
		r.drained(t, ep, 60*time.Second)
	}
	r.heard(t, healthy, epHealthy)
	r.heard(t, flaky, epFlaky)
	r.heard(t, down, epDown)
	r.heard(t, slow, epSlow)
	if len(flaky.Arrivals()) <= len(flaky.Unique()) || len(slow.Arrivals()) <= len(slow.Unique()) {
		t.Fatal("the failing endpoints were not sent anything twice: their faults did not happen")
	}
	ds, err := r.db.Webhooks.Deliveries(context.Background(), epFlaky.ID, "", 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	retried := 0
	for _, d := range ds {
		if d.State != hook.Delivered || len(d.Tries) != d.Attempts || d.Tries[len(d.Tries)-1].Status != http.StatusOK {
			t.Fatalf("delivery %+v: want delivered with its attempts logged, the last 200", d)
		}
		if d.Attempts > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Fatal("no delivery of the flaky endpoint shows a retry")
	}
	// A try that succeeds is kept on its delivery, not as an attempt row:
	// the healthy endpoint's deliveries have none, and each still lists
	// its one try.
	ds, err = r.db.Webhooks.Deliveries(context.Background(), epHealthy.ID, "", 0, 200)
	if err != nil || len(ds) == 0 {
		t.Fatalf("%d deliveries of the healthy endpoint (%v)", len(ds), err)
	}
	for _, d := range ds {
		if d.State != hook.Delivered || d.Attempts != 1 || len(d.Tries) != 1 || d.Tries[0].Status/100 != 2 || d.Tries[0].At.IsZero() {
			t.Fatalf("delivery %+v of the healthy endpoint: want delivered at its one try, a 2xx, listed", d)
		}
	}
	var rows int64
	r.db.Gorm().Raw("SELECT COUNT(*) FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.webhook_id = ?", epHealthy.ID).Scan(&rows)
	if rows != 0 {
		t.Fatalf("%d attempt rows for the healthy endpoint's deliveries, each delivered at its first try; want none", rows)
	}
}

// An endpoint that answers 500 to everything is turned off once it has
// failed for DisableAfter (reason "failing", counted), its deliveries kept
// pending; turned on again by the operator and answering, it gets them
// all, in order.
func TestAFailingEndpointIsTurnedOffAndCatchesUpWhenOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	e := hooktest.New(t)
	ep := r.register(t, e, "*")
	e.Answer(func(int) (time.Duration, int) { return 0, http.StatusInternalServerError })
	reg := prometheus.NewRegistry()
	r.metrics = metrics.NewWebhooks(reg)
	r.run(t, 2, 2*time.Second)
	r.orders(t, 20, 20)
	waittest.Until(t, 30*time.Second, "the failing endpoint is turned off", func() bool {
		got, err := r.svc.Get(ctx, ep.ID)
		return err == nil && !got.Enabled
	})
	got, err := r.svc.Get(ctx, ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.DisabledReason != hook.Failing || got.FailingSince == nil || got.DisabledAt == nil ||
		got.DisabledAt.Sub(*got.FailingSince) < 2*time.Second {
		t.Fatalf("turned off as %+v; want reason failing, after failing 2 s", got)
	}
	if n, err := testutil.GatherAndCount(reg, "seckill_webhook_endpoints_disabled_total"); err != nil || n != 1 {
		t.Fatalf("%d series of endpoints turned off (%v), want 1", n, err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP seckill_webhook_endpoints_disabled_total Webhook endpoints the dispatcher turned off because every delivery failed for a day.
# TYPE seckill_webhook_endpoints_disabled_total counter
seckill_webhook_endpoints_disabled_total 1
`), "seckill_webhook_endpoints_disabled_total"); err != nil {
		t.Fatal(err)
	}
	pending, err := r.db.Webhooks.Deliveries(ctx, ep.ID, hook.Pending, 0, 200)
	if err != nil || len(pending) == 0 {
		t.Fatalf("%d deliveries pending after the endpoint was turned off (%v); want them kept", len(pending), err)
	}
	e.Answer(nil)
	on := true
	if _, err := r.svc.Update(ctx, ep.ID, webhooks.Change{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	r.drained(t, ep, 60*time.Second)
	r.heard(t, e, ep)
}

// A delivery whose every try of the schedule fails is given up ("failed",
// each try logged), and the next event of its order goes after it: the
// endpoint refuses each order's first event only.
func TestADeliveryIsGivenUpAfterItsScheduleAndTheNextGoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	r.schedule = hook.Schedule{50 * time.Millisecond, 50 * time.Millisecond}
	e := hooktest.New(t)
	ep := r.register(t, e, "*")
	e.Refuse(func(ev outbox.Event) bool { return ev.Data.Seq == 1 })
	r.run(t, 1, time.Hour)
	r.orders(t, 10, 10)
	r.drained(t, ep, 30*time.Second)
	failed, err := r.db.Webhooks.Deliveries(ctx, ep.ID, hook.GaveUp, 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 10 {
		t.Fatalf("%d deliveries given up, want the 10 orders' first events", len(failed))
	}
	for _, d := range failed {
		if d.Seq != 1 || d.Attempts != 3 || len(d.Tries) != 3 || d.LastStatus != http.StatusInternalServerError {
			t.Fatalf("given up: %+v; want seq 1 after 3 tries, the last a 500", d)
		}
	}
	paid := 0
	for _, ev := range e.Unique() {
		if ev.Type == outbox.OrderPaid {
			paid++
		}
	}
	if paid != 5 {
		t.Fatalf("%d order.paid delivered after their orders' order.created was given up, want 5", paid)
	}
}
