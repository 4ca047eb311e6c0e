//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Crashes, not stops: each backing service is killed with SIGKILL while a
// sale runs (`scripts/services kill`, `docker compose kill`), so it flushes
// nothing and closes no connection cleanly; then it is started again from
// the data it left.

// acceptedBy merges the orders the loads were answered 202 for.
func acceptedBy(loads ...*load) map[string]int64 {
	all := map[string]int64{}
	for _, l := range loads {
		maps.Copy(all, l.accepted)
	}
	return all
}

// ordersFlowing waits until the sale has orders in MySQL: the api, Kafka
// and the consumer are all at work before a crash.
func ordersFlowing(t *testing.T, p *pipelinetest.Pipeline, sale pipelinetest.Sale) {
	t.Helper()
	waittest.Until(t, 30*time.Second, "orders to be created before the crash", func() bool {
		n, _ := p.DB.Orders.LiveOrderCount(context.Background(), sale.ItemID)
		return n >= 20
	})
}

// crashUntilRefused kills service, keeps it dead until the running load
// has a buyer answered 503 (the crash is seen), then starts it again.
func crashUntilRefused(t *testing.T, service string, l *load) {
	t.Helper()
	services(t, "kill", service)
	waittest.Until(t, 20*time.Second, "a 503 while "+service+" is down", func() bool { return l.answered(503) > 0 })
	services(t, "start", service)
}

// allCreated fails the test unless every accepted order is CREATED in
// MySQL: in a sale with stock for every buyer an accepted order has no
// reason to fail. Run it after settle, which waited until each one is final.
func allCreated(t *testing.T, p *pipelinetest.Pipeline, accepted map[string]int64) {
	t.Helper()
	nos := make([]string, 0, len(accepted))
	for no := range accepted {
		nos = append(nos, no)
	}
	got, err := p.DB.Orders.Orders(context.Background(), nos)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, no := range nos {
		if o := got[no]; o.Status != order.Created {
			bad++
			t.Errorf("order %s of user %d was answered 202 but ended %s (%s)", no, accepted[no], o.Status, o.FailureReason)
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d accepted orders did not end CREATED though stock sufficed", bad, len(nos))
	}
}

// TestChaosCrashRedis kills Redis (AOF, appendfsync everysec) with SIGKILL
// while orders flow, and starts it again from its AOF. A kill -9 loses
// nothing Redis answered (the AOF is written before the reply; the page
// cache survives the process): every 202 is sold, every 503 holds nothing,
// and the stores agree after the drain.
func TestChaosCrashRedis(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSale(300, 1)
	l := startLoad(api, sale, users(1, 500), 8*time.Second, 20)
	ordersFlowing(t, p, sale)
	crashUntilRefused(t, "redis", l)
	l.wait()
	more := startLoad(api, sale, users(1001, 300), 2*time.Second, 20).wait()
	refused := refusedHoldNothing(t, p, sale, l) + refusedHoldNothing(t, p, sale, more)
	all := acceptedBy(l, more)
	inv := settle(t, p, sale, all, 90*time.Second)
	t.Logf("Redis killed: %d accepted of 800 attempts for 300 units, %d answered 503, network errors %d; refused %v %v",
		len(all), refused, l.neterrs+more.neterrs, l.codes, more.codes)
	allCreated(t, p, all)
	if inv.LiveOrders != int64(len(all)) {
		t.Fatalf("accepted %d, live %d", len(all), inv.LiveOrders)
	}
}

// TestChaosCrashMySQLMidBatch kills MariaDB while the consumer is inside a
// batch's transaction: its stock UPDATE done, its multi-row INSERT waiting
// on an order number the test holds uncommitted (the event for it is in
// the batch). The consumer cannot tell whether that batch committed; InnoDB
// rolls it back in crash recovery, and the redelivered batch is resolved by
// the unique order_no: every order once, the stock taken once.
func TestChaosCrashMySQLMidBatch(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	admin := pipelinetest.FreeAddr(t)
	p.StartConsumer("SECKILL_ADMIN_ADDR="+admin, noSweep)
	sale := api.CreateSale(500, 1)
	// A steady load, so batches keep coming while MariaDB dies.
	l := startLoad(api, sale, users(1, 300), 8*time.Second, 10)
	ordersFlowing(t, p, sale)

	// Hold the order number of one more event uncommitted, then publish
	// the event: the batch that carries it blocks in its INSERT.
	ev := p.ReserveEvent(sale, 10001, 1, "k10001")
	blocker := p.DB.Gorm().Begin()
	if err := blocker.Error; err != nil {
		t.Fatal(err)
	}
	// Released before the database is dropped, if the test ends early.
	t.Cleanup(func() { blocker.Rollback() })
	if err := blocker.Exec(`INSERT INTO orders (order_no, user_id, item_id, activity_id, quantity, status, failure_reason, idempotency_key, reserved_at)
		VALUES (?, ?, ?, ?, 1, 'FAILED', 'chaos-blocker', 'chaos-blocker', NOW(3))`, ev.OrderNo, ev.UserID, ev.ItemID, ev.ActivityID).Error; err != nil {
		t.Fatal(err)
	}
	valid, _ := json.Marshal(ev)
	kafkatest.Write(t, p.Topic, kafka.Message{Key: orderevents.ItemKey(sale.ItemID), Value: valid})
	// The batch's INSERT runs after its stock UPDATE, in one transaction;
	// half a second in it is a wait on the held order number.
	var waiting int64
	waittest.Until(t, 30*time.Second, "the consumer's transaction to wait in its INSERT", func() bool {
		err := p.DB.Gorm().Raw(`SELECT COUNT(*) FROM information_schema.processlist
			WHERE db = ? AND info LIKE 'INSERT INTO `+"`orders`"+`%' AND time_ms >= 500`, p.DB.Name).Scan(&waiting).Error
		return err == nil && waiting > 0
	})
	before := p.Count("SELECT stock FROM item_stock WHERE item_id = ?", sale.ItemID)
	t.Logf("the consumer is inside a batch's transaction, its INSERT waiting; committed MySQL stock %d", before)

	services(t, "kill", "mysql")
	_ = blocker.Rollback().Error // its connection died with the server
	// The consumer saw the crash: it retries the batch.
	metricsURL := "http://" + admin + "/metrics"
	waittest.Until(t, 30*time.Second, "the consumer to retry its batch", func() bool {
		return pipelinetest.ScrapeMetrics(t, metricsURL).Value("seckill_consumer_batch_retries_total") >= 1
	})
	services(t, "start", "mysql")
	l.wait()

	all := acceptedBy(l)
	all[ev.OrderNo], _ = order.NumericUserID(ev.UserID) // the test's buyers are numbered
	refused := refusedHoldNothing(t, p, sale, l)
	inv := settle(t, p, sale, all, 90*time.Second)
	t.Logf("MariaDB killed mid-batch: %d accepted, %d answered 503, network errors %d, refused %v", len(l.accepted), refused, l.neterrs, l.codes)
	allCreated(t, p, all)
	if len(l.accepted) != 300 || inv.LiveOrders != 301 {
		t.Fatalf("accepted %d (%v), live %d; want 300 and the injected one", len(l.accepted), l.codes, inv.LiveOrders)
	}
	rows := p.Count("SELECT COUNT(*) FROM orders WHERE item_id = ?", sale.ItemID)
	if rows != int64(len(all)) {
		t.Fatalf("%d order rows for %d accepted orders", rows, len(all))
	}
	m := pipelinetest.ScrapeMetrics(t, metricsURL)
	t.Logf("consumer: batch retries %v, events existing on redelivery %v",
		m.Value("seckill_consumer_batch_retries_total"), m.Value("seckill_consumer_events_total", "outcome", "existing"))
}

// TestChaosCrashKafka kills the broker (acks=all, one node) with SIGKILL
// while orders flow and starts it again (log recovery). Publishes that time
// out are answered 503 and hold nothing, even when the broker had written
// them before it died; every 202 is created once.
func TestChaosCrashKafka(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI("SECKILL_KAFKA_WRITE_TIMEOUT=1s")
	p.StartConsumer()
	sale := api.CreateSale(1000, 1)
	// The load outlasts the broker's restart.
	l := startLoad(api, sale, users(1, 300), 25*time.Second, 20)
	ordersFlowing(t, p, sale)
	crashUntilRefused(t, "kafka", l)
	l.wait()
	after := startLoad(api, sale, users(2001, 100), time.Second, 20).wait()
	refused := refusedHoldNothing(t, p, sale, l) + refusedHoldNothing(t, p, sale, after)
	all := acceptedBy(l, after)
	inv := settle(t, p, sale, all, 120*time.Second)
	t.Logf("Kafka killed: %d accepted, %d answered 503, network errors %d, refused %v %v",
		len(all), refused, l.neterrs+after.neterrs, l.codes, after.codes)
	allCreated(t, p, all)
	if inv.LiveOrders != int64(len(all)) {
		t.Fatalf("accepted %d, live %d", len(all), inv.LiveOrders)
	}
}
