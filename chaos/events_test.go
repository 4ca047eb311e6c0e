//go:build chaos

package chaos

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/hooktest"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/eventcheck"
)

// markCommit matches the COMMIT that follows a relay's mark of a batch
// published (the first COMMIT after the mark's UPDATE, on any connection:
// the proxy's consumer writes orders too, whose COMMITs may come first,
// which loses one of theirs: a fault as good).
func markCommit() proxytest.Matcher {
	var marked atomic.Bool
	update, commit := proxytest.MySQLQuery("UPDATE `outbox_events` SET `published_at`"), proxytest.MySQLQuery("COMMIT")
	return func(r proxytest.Request) bool {
		if update(r) {
			marked.Store(true)
			return false
		}
		return commit(r) && marked.Swap(false)
	}
}

// E1. The shop's events through the relay's and the endpoints' faults, one
// after the other while buyers order, pay and cancel: a relay killed
// between its publish and its mark (a failpoint), three answers to its
// publishes lost, the answers to its mark and to the mark's COMMIT lost,
// its consumer's MySQL link stalled (seconds a round trip) for 10 s, Kafka
// stopped for 10 s; an endpoint down for two minutes, one answering 500 to
// every other delivery, one taking 30 s to answer (past the dispatchers'
// 5 s) for the first minute. Afterwards every endpoint and the topic hold
// every event MySQL committed, each order's in seq order, signed, the last
// stating its order's status (the project's checker), and the faults
// happened.
func TestChaosEventsReachKafkaAndEveryEndpointThroughFaults(t *testing.T) {
	fault(t)
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	topic := kafkatest.NewTopicOn(t, p.Brokers(), 3)
	hooks := append(pipelinetest.HookSettings(topic), "SECKILL_WEBHOOK_TIMEOUT=5s")
	api := p.StartAPI(hooks...)
	healthy, down, flaky, slow := hooktest.New(t), hooktest.New(t), hooktest.New(t), hooktest.New(t)
	var eps []hook.Endpoint
	for _, e := range []*hooktest.Endpoint{healthy, down, flaky, slow} {
		eps = append(eps, api.RegisterHook(t, e, "*"))
	}
	flaky.Answer(func(n int) (time.Duration, int) {
		if n%2 == 0 {
			return 0, http.StatusInternalServerError
		}
		return 0, http.StatusOK
	})
	start := time.Now()
	slow.Answer(func(int) (time.Duration, int) {
		if time.Since(start) < time.Minute {
			return 30 * time.Second, http.StatusOK
		}
		return 0, http.StatusOK
	})
	down.Down()

	consumerEnv := append(hooks, "SECKILL_PAYMENT_WINDOW=8s", "SECKILL_CLOSER_EVERY=200ms")
	mysqlPx, dsn := mysqlProxy(t, p)
	kafkaPx, brokers := kafkaProxy(t)
	proxied := p.StartConsumer(append(consumerEnv, interpolated(t, dsn), brokers)...)
	logOnFailure(t, proxied, "relay")
	dying := p.StartConsumer(append(consumerEnv, "SECKILL_FAILPOINTS=relay-after-publish")...)

	sale := api.CreateSale(100_000, 1)
	var (
		mu       sync.Mutex
		accepted = map[string]int64{}
	)
	buyers := users(1, 1200)
	loading := make(chan struct{})
	go func() { // 1,200 buyers over 90 s
		defer close(loading)
		for _, u := range buyers {
			if pl, err := api.PlaceOrder(u, firstKey(u), sale.ActivityID, 1); err == nil && pl.Code == 202 {
				mu.Lock()
				accepted[pl.OrderNo] = u
				mu.Unlock()
			}
			time.Sleep(75 * time.Millisecond)
		}
	}()
	acting := make(chan struct{})
	go func() { // a third of the orders paid, a third cancelled, as they become CREATED
		defer close(acting)
		done := map[string]bool{}
		for {
			select {
			case <-loading:
				return
			case <-time.After(time.Second):
			}
			mu.Lock()
			nos := make(map[string]int64, len(accepted))
			for no, u := range accepted {
				nos[no] = u
			}
			mu.Unlock()
			for no, u := range nos {
				if done[no] || u%3 == 0 {
					continue
				}
				o, err := p.DB.Orders.Order(ctx, no)
				if err != nil || o.Status != order.Created {
					continue
				}
				verb := "pay"
				if u%3 == 2 {
					verb = "cancel"
				}
				// A 503 while a service is down: tried again next second.
				if code, _ := api.Do("POST", "/api/v1/orders/"+no+"/"+verb, u, "", nil, nil, nil); code == 200 || code == 409 {
					done[no] = true
				}
			}
		}
	}()

	// The relay killed between its publish and its mark, then started
	// again without the failpoint.
	select {
	case <-dying.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the relay with the failpoint never reached it")
	}
	p.StartConsumer(consumerEnv...)
	time.Sleep(5 * time.Second)
	kafkaPx.LoseReply(proxytest.KafkaRequest(proxytest.KafkaProduce), 3)
	mysqlPx.LoseReply(proxytest.MySQLQuery("UPDATE `outbox_events` SET `published_at`"), 1)
	mysqlPx.LoseReply(markCommit(), 2)
	kafkaPx.WaitLost(t, 3, 60*time.Second)
	mysqlPx.WaitLost(t, 3, 60*time.Second)
	lostRepliesIn(t, kafkaPx.Lost()+mysqlPx.Lost())
	mysqlPx.Latency(2*time.Second, time.Second)
	time.Sleep(10 * time.Second)
	mysqlPx.Latency(0, 0)
	services(t, "stop", "kafka")
	time.Sleep(10 * time.Second)
	services(t, "start", "kafka")
	<-loading
	<-acting
	if wait := 2*time.Minute - time.Since(start); wait > 0 {
		time.Sleep(wait)
	}
	down.Up(t)

	mu.Lock()
	all := make(map[string]int64, len(accepted))
	for no, u := range accepted {
		all[no] = u
	}
	mu.Unlock()
	if len(all) < 300 {
		t.Fatalf("only %d orders accepted", len(all))
	}
	p.WaitFinal(all, 2*time.Minute)
	waittest.Until(t, time.Minute, "every unpaid order closed", func() bool {
		var n int64
		p.DB.Gorm().Raw("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = ?", sale.ActivityID, order.Created).Scan(&n)
		return n == 0
	})
	p.WaitEventsDrained(t, 5*time.Minute, eps...)

	checker := &eventcheck.Checker{Tx: p.DB, Store: p.DB.Streams}
	check := func(where string, evs []outbox.Event) eventcheck.Report {
		r, err := checker.Check(ctx, []int64{sale.ActivityID}, evs)
		if err != nil {
			t.Fatal(err)
		}
		// MySQL holds every order accepted, and those the api gave up
		// (FAILED) while Kafka was down.
		if !r.OK() || r.Orders < len(all) {
			t.Fatalf("%s (%d orders accepted): %s", where, len(all), r)
		}
		t.Logf("%s: %s", where, r.Summary())
		return r
	}
	for name, e := range map[string]*hooktest.Endpoint{"healthy": healthy, "down": down, "flaky": flaky, "slow": slow} {
		if err := e.Invalid(); err != nil {
			t.Fatalf("the %s endpoint refused deliveries: %v", name, err)
		}
		check("the "+name+" endpoint", e.Arrivals())
	}
	inKafka := kafkatest.ReadEvents(t, topic)
	if r := check("the topic", inKafka); r.Duplicates == 0 {
		t.Fatal("the topic holds no event twice: the relay killed after its publish published nothing, or nothing again")
	}
	if len(flaky.Arrivals()) <= len(flaky.Unique()) || len(slow.Arrivals()) <= len(slow.Unique()) {
		t.Fatal("the flaky and slow endpoints were sent nothing twice: their faults did not happen")
	}
}
