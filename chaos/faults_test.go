//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/order"
)

// noSweep turns the stranded-reservation sweep off (it starts after an
// hour): a consumer that skipped work or committed past it cannot be
// rescued by the sweep's re-publish, so the test sees it.
const noSweep = "SECKILL_SWEEP_AFTER=1h"

// 1. kill -9 a consumer mid-batch, restart it.
func TestChaosKillConsumerMidBatch(t *testing.T) {
	fault(t)
	killConsumerMidBatch(t, false)
}

// 1s. 1 with a sale in eight sizes of uneven stock, buyers clicking on
// two sizes at once: every size sells out exactly, nobody holds two
// orders.
func TestChaosKillConsumerMidBatchSized(t *testing.T) {
	fault(t)
	killConsumerMidBatch(t, true)
}

func killConsumerMidBatch(t *testing.T, sized bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	// No sweep: only Kafka's redelivery may finish what the killed
	// consumer left, so an offset committed past unfinished work shows.
	c := p.StartConsumer("SECKILL_CONSUMER_BATCH=50", noSweep)
	sale := newSale(api, 300, sized)
	l := startLoad(api, sale, users(1, 600), 3*time.Second, 50)
	waittest.Until(t, 30*time.Second, "orders to be created", func() bool {
		return p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'CREATED'", sale.ActivityID) >= 30
	})
	c.Kill()
	l.wait()
	p.StartConsumer(noSweep)
	inv := settle(t, p, sale, l.accepted, 60*time.Second)
	if len(l.accepted) != 300 || inv.LiveOrders != 300 {
		t.Fatalf("accepted %d (%v), live %d; want 300 of each", len(l.accepted), l.codes, inv.LiveOrders)
	}
}

// 1b. The consumer dies at the worst instant of every batch: its orders are
// committed in MySQL, their reservations still CLAIMED in Redis, the
// offsets not committed. Each restarted consumer dies the same way on its
// first batch; a healthy one then finishes from the redelivery: every
// order once, Redis confirmed, the stores agreeing.
func TestChaosConsumerDiesAfterMySQLCommit(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	sale := api.CreateSale(100, 1)
	l := startLoad(api, sale, users(1, 150), 2*time.Second, 20).wait()
	if len(l.accepted) != 100 {
		t.Fatalf("accepted %d (%v), want 100", len(l.accepted), l.codes)
	}
	for i := range 3 {
		c := p.StartConsumer("SECKILL_FAILPOINTS=consumer-after-commit", "SECKILL_CONSUMER_BATCH=30", noSweep)
		select {
		case <-c.Done():
		case <-time.After(60 * time.Second):
			t.Fatalf("crash %d: the failpoint did not fire", i+1)
		}
	}
	rows := p.Count("SELECT COUNT(*) FROM orders WHERE item_id = ?", sale.ItemID)
	if rows == 0 {
		t.Fatal("the crashed consumers committed nothing to MySQL: the fault was not exercised")
	}
	t.Logf("%d orders in MySQL after three crashes after the commit", rows)
	p.StartConsumer(noSweep)
	inv := settle(t, p, sale, l.accepted, 60*time.Second)
	if inv.LiveOrders != 100 {
		t.Fatalf("live %d, want 100", inv.LiveOrders)
	}
	rows = p.Count("SELECT COUNT(*) FROM orders WHERE item_id = ?", sale.ItemID)
	if rows != 100 {
		t.Fatalf("%d order rows for 100 accepted orders", rows)
	}
}

// 2. Two consumers, kill -9 one: its partitions move to the other.
func TestChaosKillOneOfTwoConsumers(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 6})
	api := p.StartAPI()
	a := p.StartConsumer("SECKILL_CONSUMER_BATCH=20", noSweep)
	p.StartConsumer("SECKILL_CONSUMER_BATCH=20", noSweep)
	// Several items so both consumers own work.
	var sales []pipelinetest.Sale
	var loads []*load
	for i := range 4 {
		s := api.CreateSale(100, 1)
		sales = append(sales, s)
		loads = append(loads, startLoad(api, s, users(int64(i*1000+1), 150), 3*time.Second, 20))
	}
	// Kill the consumer while it holds work: it has created orders.
	waittest.Until(t, 30*time.Second, "the doomed consumer to create orders", func() bool {
		return strings.Contains(a.Log(), `"msg":"order created"`)
	})
	a.Kill()
	for i, l := range loads {
		l.wait()
		inv := settle(t, p, sales[i], l.accepted, 90*time.Second)
		if inv.LiveOrders != int64(len(l.accepted)) || len(l.accepted) != 100 {
			t.Fatalf("sale %d: accepted %d, live %d", i, len(l.accepted), inv.LiveOrders)
		}
	}
}

// 3. Stop the Kafka broker for ~10 s: the API answers 503 and holds no
// reservation; accepted orders are created after it returns.
func TestChaosKafkaDown(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI("SECKILL_KAFKA_WRITE_TIMEOUT=1s")
	p.StartConsumer()
	sale := api.CreateSale(1000, 1)
	before := startLoad(api, sale, users(1, 100), time.Second, 20).wait()

	services(t, "stop", "kafka")
	down := startLoad(api, sale, users(1001, 40), 10*time.Second, 10)
	time.Sleep(10 * time.Second)
	services(t, "start", "kafka")
	down.wait()
	after := startLoad(api, sale, users(2001, 100), time.Second, 20).wait()

	// Nothing stays reserved for a 503: no live order (MySQL keeps the
	// FAILED record of the attempt), and the user may try again.
	unavailable := refusedHoldNothing(t, p, sale, down)
	if unavailable == 0 {
		t.Fatalf("no 503 while Kafka was down: %v", down.codes)
	}
	t.Logf("while down: %d answered 503, %d accepted", unavailable, len(down.accepted))
	// The API's metrics saw each failed publish and each reservation it
	// gave back for it.
	m := pipelinetest.ScrapeMetrics(t, api.URL+"/metrics")
	if got := m.Value("seckill_publish_total", "result", "error"); got < float64(unavailable) {
		t.Fatalf("seckill_publish_total{result=error} = %v after %d publishes failed", got, unavailable)
	}
	if got := m.Value("seckill_unpublished_reservations_total", "outcome", "released"); got < float64(unavailable) {
		t.Fatalf("seckill_unpublished_reservations_total{outcome=released} = %v after %d were released", got, unavailable)
	}
	all := map[string]int64{}
	for _, l := range []*load{before, down, after} {
		for no, u := range l.accepted {
			all[no] = u
		}
	}
	inv := settle(t, p, sale, all, 90*time.Second)
	if inv.LiveOrders != int64(len(all)) {
		t.Fatalf("accepted %d, live %d", len(all), inv.LiveOrders)
	}
	refusedHoldNothing(t, p, sale, down) // still, once everything settled
}

// 4. Stop MariaDB for ~10 s: the consumer waits and retries, commits no
// offset during the gap; all orders are created after it returns.
func TestChaosMySQLDown(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	admin := pipelinetest.FreeAddr(t)
	p.StartConsumer("SECKILL_ADMIN_ADDR="+admin, noSweep)
	sale := api.CreateSale(500, 1)
	// One order first, so the consumer is in its group and reading when
	// MySQL goes.
	first := startLoad(api, sale, users(20001, 1), 0, 1).wait()
	p.WaitFinal(first.accepted, 60*time.Second)
	services(t, "stop", "mysql")
	// A poison message and a valid event in one write: one batch, whose
	// valid half fails until MySQL is back. The retries must not
	// dead-letter the poison again.
	ev := p.ReserveEvent(sale, 10001, 1, "k10001")
	valid, _ := json.Marshal(ev)
	key := orderevents.ItemKey(sale.ItemID)
	kafkatest.Write(t, p.Topic, kafka.Message{Key: key, Value: []byte("not an event")}, kafka.Message{Key: key, Value: valid})
	committedBefore := committedOffsets(t, p.Topic, p.Group)
	l := startLoad(api, sale, users(1, 200), 10*time.Second, 20)
	time.Sleep(10 * time.Second)
	// No batch can finish without MySQL, so no offset moved during the gap.
	if got := committedOffsets(t, p.Topic, p.Group); got != committedBefore {
		t.Fatalf("committed offsets moved from %d to %d while MySQL was down", committedBefore, got)
	}
	services(t, "start", "mysql")
	l.wait()
	all := map[string]int64{}
	for _, x := range []*load{first, l} {
		for no, u := range x.accepted {
			all[no] = u
		}
	}
	all[ev.OrderNo], _ = order.NumericUserID(ev.UserID) // the test's buyers are numbered
	inv := settle(t, p, sale, all, 90*time.Second)
	if len(l.accepted) != 200 || inv.LiveOrders != 202 {
		t.Fatalf("accepted %d (%v), live %d; want 200, the first and the injected one", len(l.accepted), l.codes, inv.LiveOrders)
	}
	if n := topicSize(t, orderevents.DLQTopic(p.Topic)); n != 1 {
		t.Fatalf("%d dead letters for one poison message", n)
	}
	// The consumer's metrics show it retrying while MySQL was away.
	if got := pipelinetest.ScrapeMetrics(t, "http://"+admin+"/metrics").Value("seckill_consumer_batch_retries_total"); got < 1 {
		t.Fatalf("seckill_consumer_batch_retries_total = %v after MySQL was down under load", got)
	}
}

// 5. Restart Redis with its AOF: nothing is lost.
func TestChaosRedisRestartWithAOF(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSale(300, 1)
	l := startLoad(api, sale, users(1, 400), 4*time.Second, 20)
	time.Sleep(time.Second)
	services(t, "stop", "redis")
	time.Sleep(2 * time.Second)
	services(t, "start", "redis")
	l.wait()
	more := startLoad(api, sale, users(1001, 300), 2*time.Second, 20).wait()
	all := map[string]int64{}
	for _, x := range []*load{l, more} {
		for no, u := range x.accepted {
			all[no] = u
		}
	}
	inv := settle(t, p, sale, all, 90*time.Second)
	// Every accepted order sold, and nothing else: a request whose reserve
	// answer was lost in the restart was answered 503 and given back.
	// settle checked that the unsold units are back in both stores.
	t.Logf("accepted %d of 700 attempts for 300 units, refused %v %v", len(all), l.codes, more.codes)
	if inv.LiveOrders != int64(len(all)) {
		t.Fatalf("accepted %d, live %d", len(all), inv.LiveOrders)
	}
}

// 7. kill -9 the API between the reservation and the publish: the stranded
// reservation is swept to a final state.
func TestChaosAPIKilledBeforePublish(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	healthy := p.StartAPI()
	p.StartConsumer("SECKILL_SWEEP_AFTER=2s", "SECKILL_SWEEP_EVERY=250ms")
	sale := healthy.CreateSale(10, 1)
	dying := p.StartAPI("SECKILL_FAILPOINTS=api-after-reserve")
	if pl, err := dying.PlaceOrder(7, "doomed", sale.ActivityID, 1); err == nil {
		t.Fatalf("the failpoint did not fire: %+v", pl)
	}
	<-dying.Done()
	// The buyer retries with the same key on a healthy instance and gets
	// the stranded order back, which the sweep finishes.
	var no string
	waittest.Until(t, 10*time.Second, "the retry to find the stranded order", func() bool {
		pl, err := healthy.PlaceOrder(7, "doomed", sale.ActivityID, 1)
		no = pl.OrderNo
		return err == nil && pl.Code == 202
	})
	inv := settle(t, p, sale, map[string]int64{no: 7}, 60*time.Second)
	o, err := p.DB.Orders.Order(context.Background(), no)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != order.Created || inv.LiveOrders != 1 {
		t.Fatalf("stranded order %s ended %s (live %d)", no, o.Status, inv.LiveOrders)
	}
}

// 8. A produce whose answer is lost after the broker accepted the message
// (a proxy between the API and Kafka drops every produce answer): exactly
// one of {created, released}.
func TestChaosPublishAckLost(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	healthy := p.StartAPI()
	p.StartConsumer()
	sale := healthy.CreateSale(100, 1)
	kp, kafkaEnv := kafkaProxy(t)
	lossy := p.StartAPI(kafkaEnv)
	kp.LoseReply(proxytest.KafkaRequest(proxytest.KafkaProduce), always)
	l := startLoad(lossy, sale, users(1, 100), 2*time.Second, 20).wait()
	refused := refusedHoldNothing(t, p, sale, l)
	t.Logf("ack lost: %d answered 202 (consumer claimed first), %d answered 503 (released first)", len(l.accepted), refused)
	if len(l.accepted)+refused != 100 {
		t.Fatalf("unexpected answers: %v", l.codes)
	}
	inv := settle(t, p, sale, l.accepted, 60*time.Second)
	if inv.LiveOrders != int64(len(l.accepted)) {
		t.Fatalf("live orders %d != accepted %d: a released order was created or an accepted one lost", inv.LiveOrders, len(l.accepted))
	}
}

// 9. Redelivery storm: replay the whole topic to a fresh consumer group.
func TestChaosRedeliveryStorm(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSale(200, 1)
	l := startLoad(api, sale, users(1, 400), 2*time.Second, 50).wait()
	before := settle(t, p, sale, l.accepted, 60*time.Second)
	var storm []*pipelinetest.Proc
	for range 2 {
		storm = append(storm, p.StartConsumer("SECKILL_CONSUMER_GROUP="+kafkatest.Name("storm")))
	}
	for _, c := range storm {
		group := c.Env("SECKILL_CONSUMER_GROUP")
		waittest.Until(t, 60*time.Second, "the replay to catch up", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			lag, err := kafkatest.GroupLag(ctx, p.Topic, group)
			return err == nil && lag == 0
		})
	}
	after := settle(t, p, sale, l.accepted, 60*time.Second)
	if before != after {
		t.Fatalf("replay changed the stores: %+v -> %+v", before, after)
	}
	rows := p.Count("SELECT COUNT(*) FROM orders WHERE item_id = ?", sale.ItemID)
	if rows != int64(len(l.accepted)) {
		t.Fatalf("%d order rows for %d accepted orders", rows, len(l.accepted))
	}
}
