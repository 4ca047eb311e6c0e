//go:build chaos

package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
)

// retryAll places each user's order again with the same idempotency key on
// api and waits until every one is accepted: after a 503 the key must be
// usable again.
func retryAll(t *testing.T, api *pipelinetest.API, sale pipelinetest.Sale, users []int64) map[string]int64 {
	t.Helper()
	accepted := map[string]int64{}
	for _, u := range users {
		var last pipelinetest.Placed
		waittest.Until(t, 20*time.Second, fmt.Sprintf("user %d's retry to be accepted", u), func() bool {
			pl, err := buy(api, sale, u, firstKey(u))
			last = pl
			return err == nil && pl.Code == 202 && pl.Status == string(order.Pending)
		})
		accepted[last.OrderNo] = u
	}
	return accepted
}

// wantUnpublished fails the test unless api's metrics counted n
// reservations it could not confirm with outcome.
func wantUnpublished(t *testing.T, api *pipelinetest.API, outcome string, n int) {
	t.Helper()
	got := pipelinetest.ScrapeMetrics(t, api.URL+"/metrics").Value("seckill_unpublished_reservations_total", "outcome", outcome)
	if got != float64(n) {
		t.Fatalf("seckill_unpublished_reservations_total{outcome=%q} = %v, want %d", outcome, got, n)
	}
}

// 10. Redis runs the reserve script but its answer is lost (a proxy
// between the API and Redis drops every reserve answer). The API
// answers 503 and takes the reservation back; when Redis cannot be told
// either, it records the order FAILED in MySQL and the sweep gives the
// reservation back. Either way a 503 leaves nothing reserved, and a retry
// with the same key is a fresh attempt that sells.
func TestChaosReserveAnswerLost(t *testing.T) {
	fault(t)
	reserveAnswerLost(t, false)
}

// 10s. 10 with a sale in eight sizes of uneven stock, some buyers
// clicking on two sizes at once: every click's answer is lost, each is
// given back, and each buyer then buys its size once.
func TestChaosReserveAnswerLostSized(t *testing.T) {
	fault(t)
	reserveAnswerLost(t, true)
}

func reserveAnswerLost(t *testing.T, sized bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	healthy := p.StartAPI()
	p.StartConsumer("SECKILL_SWEEP_AFTER=1s", "SECKILL_SWEEP_EVERY=250ms")
	// A sale in sizes has stock for its buyers' slots to be distinct
	// (sizeOf), so that each size has a unit for every buyer wanting it.
	stock := int64(100)
	if sized {
		stock = 200
	}
	sale := newSale(healthy, stock, sized)

	// Redis can be told: the reservation is released at once.
	lossyRedis, lossyEnv := redisProxy(t, false)
	lossy := p.StartAPI(lossyEnv)
	lossyRedis.LoseReply(luaScript("reserve"), always)
	first := users(1, 40)
	l := startLoad(lossy, sale, first, time.Second, 20).wait()
	if n := refusedHoldNothing(t, p, sale, l); n != len(first) {
		t.Fatalf("answer lost, Redis reachable: %d of %d answered 503: %v", n, len(first), l.codes)
	}
	if inv := p.Check(sale); inv.RedisStock != sale.Stock || inv.Inflight != 0 {
		t.Fatalf("a refused request left stock reserved: %+v", inv)
	}
	wantUnpublished(t, lossy, "released", l.attempts)

	// Redis cannot be told (the API's release requests never reach it):
	// MySQL records the order FAILED, the sweep releases the reservation
	// and frees the key.
	deafRedis, deafEnv := redisProxy(t, false)
	deaf := p.StartAPI(deafEnv)
	deafRedis.LoseReply(luaScript("reserve"), always)
	deafRedis.LoseRequest(luaScript("release"), always)
	second := users(101, 40)
	l2 := startLoad(deaf, sale, second, time.Second, 20).wait()
	if n := refusedHoldNothing(t, p, sale, l2); n != len(second) {
		t.Fatalf("answer lost, Redis unreachable: %d of %d answered 503: %v", n, len(second), l2.codes)
	}
	wantUnpublished(t, deaf, "abandoned", l2.attempts)
	failed := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'FAILED'", sale.ActivityID)
	// Every given-up order is recorded FAILED in MySQL, whether or not
	// Redis could be told (the record outlives any Redis data loss).
	if failed != int64(l.attempts+l2.attempts) {
		t.Fatalf("%d FAILED orders, want %d records of the given-up orders", failed, l.attempts+l2.attempts)
	}
	p.WaitSaleDrained(sale, 30*time.Second)
	if inv := p.Check(sale); inv.RedisStock != sale.Stock || inv.LiveOrders != 0 {
		t.Fatalf("given-up orders left stock reserved or sold: %+v", inv)
	}

	// Every buyer retries with the same key and buys.
	accepted := retryAll(t, healthy, sale, append(first, second...))
	inv := settle(t, p, sale, accepted, 60*time.Second)
	if inv.LiveOrders != int64(len(accepted)) || inv.LiveOrders != int64(len(first)+len(second)) {
		t.Fatalf("after the retries: live %d, accepted %d, buyers %d", inv.LiveOrders, len(accepted), len(first)+len(second))
	}
}

// 11. The publish outcome is unknown (a proxy between the API and Kafka
// drops every produce answer) and Redis cannot be told (the API's release
// requests never reach it): the API's
// FAILED record in MySQL races the consumer's CREATED row, and exactly one
// wins for each order. A buyer answered 503 holds nothing; one answered
// 202 gets the order.
func TestChaosPublishAckLostRedisUnreachable(t *testing.T) {
	fault(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	healthy := p.StartAPI()
	p.StartConsumer("SECKILL_SWEEP_AFTER=1s", "SECKILL_SWEEP_EVERY=250ms")
	sale := healthy.CreateSale(100, 1)
	deafKafka, kafkaEnv := kafkaProxy(t)
	deafRedis, redisEnv := redisProxy(t, false)
	deaf := p.StartAPI(kafkaEnv, redisEnv)
	deafKafka.LoseReply(proxytest.KafkaRequest(proxytest.KafkaProduce), always)
	deafRedis.LoseRequest(luaScript("release"), always)
	l := startLoad(deaf, sale, users(1, 100), 2*time.Second, 20).wait()
	refused := refusedHoldNothing(t, p, sale, l)
	t.Logf("ack lost, Redis unreachable: %d answered 202 (the consumer wrote first), %d answered 503 (the FAILED record won)",
		len(l.accepted), refused)
	if len(l.accepted)+refused != 100 {
		t.Fatalf("unexpected answers: %v (network errors %d)", l.codes, l.neterrs)
	}
	wantUnpublished(t, deaf, "abandoned", refused)
	wantUnpublished(t, deaf, "claimed", len(l.accepted))
	inv := settle(t, p, sale, l.accepted, 60*time.Second)
	if inv.LiveOrders != int64(len(l.accepted)) {
		t.Fatalf("live orders %d != accepted %d", inv.LiveOrders, len(l.accepted))
	}
	rows := p.Count("SELECT COUNT(*) FROM orders WHERE item_id = ?", sale.ItemID)
	if rows != 100 {
		t.Fatalf("%d order rows for 100 attempts, want one each (CREATED or FAILED)", rows)
	}
}
