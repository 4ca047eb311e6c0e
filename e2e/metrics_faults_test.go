package e2e_test

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/segmentio/kafka-go"
)

// The metrics that only move when something goes wrong move when it does:
// a poison message is dead-lettered, a stranded reservation is swept, an
// unpaid order is closed, and a scheduled reconciler reports drift.
func TestFaultMetricsMove(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	admin := pipelinetest.FreeAddr(t)
	p.StartConsumer("SECKILL_ADMIN_ADDR="+admin, "SECKILL_SWEEP_AFTER=1s", "SECKILL_SWEEP_EVERY=200ms",
		"SECKILL_PAYMENT_WINDOW=2s", "SECKILL_CLOSER_EVERY=200ms")
	sale := api.CreateSale(10, 1)
	ctx := context.Background()
	url := "http://" + admin + "/metrics"

	// A poison message.
	kafkatest.Write(t, p.Topic, kafka.Message{Value: []byte("not an event")})
	// A stranded reservation (reserved, never published).
	no := order.NewNumberGenerator().Next(sale.ItemID)
	if _, err := p.Store.Reservations.Reserve(ctx, reservation.Reservation{OrderNo: no, UserID: "5", ItemID: sale.ItemID,
		ActivityID: sale.ActivityID, Quantity: 1, IdempotencyKey: "lost", At: time.Now(),
		QuotaTTL: time.Hour, ReservationTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// An order nobody pays: the stranded one above, once created, closes too.
	pipelinetest.ScrapeUntil(t, url, "dead letter, sweep and timeout close", func(s pipelinetest.Scrape) bool {
		return s.Value("seckill_consumer_dead_letters_total") >= 1 &&
			s.Value("seckill_sweep_reservations_total", "action", "republished") >= 1 &&
			s.Value("seckill_closer_orders_closed_total") >= 1
	})

	// A scheduled reconciler reports drift on its own /metrics.
	if err := p.Redis.IncrBy(ctx, p.Store.Keys(reservation.One(sale.ItemID)).Stock(), 3).Err(); err != nil {
		t.Fatal(err)
	}
	radmin := pipelinetest.FreeAddr(t)
	p.StartArgs("reconciler", []string{"--schedule", "@every 1s", "--item", fmt.Sprint(sale.ItemID)}, "SECKILL_ADMIN_ADDR="+radmin)
	waitListening(t, radmin)
	pipelinetest.ScrapeUntil(t, "http://"+radmin+"/metrics", "reconciler drift", func(s pipelinetest.Scrape) bool {
		return s.Value("seckill_reconciler_runs_total", "verdict", "drift") >= 1 &&
			s.Value("seckill_reconciler_drift_units", "item", fmt.Sprint(sale.ItemID)) == 3
	})
}

// waitListening polls until something accepts connections on addr.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	waittest.Until(t, 30*time.Second, "something to listen on "+addr, func() bool {
		c, err := dialTCP(addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func dialTCP(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, time.Second) }

// A backlog shows in the per-partition lag gauge, which falls back to 0
// once the consumer has caught up.
func TestConsumerLagFollowsABacklog(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	const buyers = 1500
	sale := api.CreateSale(buyers, 1)
	// The backlog: every order placed before any consumer runs.
	accepted, codes := crowd(t, api, sale.ActivityID, userRange(1, buyers), 50)
	if len(accepted) != buyers {
		t.Fatalf("accepted %d, refused %v", len(accepted), codes)
	}
	admin := pipelinetest.FreeAddr(t)
	p.StartConsumer("SECKILL_ADMIN_ADDR="+admin, "SECKILL_CONSUMER_BATCH=10")
	url := "http://" + admin + "/metrics"
	s := pipelinetest.ScrapeUntil(t, url, "a lag above 0 while the backlog drains", func(s pipelinetest.Scrape) bool {
		return s.Value("seckill_consumer_lag_messages") > 0
	})
	t.Logf("lag %v while draining", s.Value("seckill_consumer_lag_messages"))
	pipelinetest.ScrapeUntil(t, url, "the lag back at 0 once every order is created", func(s pipelinetest.Scrape) bool {
		return s.Value("seckill_consumer_events_total", "outcome", "created") == buyers && s.Value("seckill_consumer_lag_messages") == 0
	})
}

// A consumer frozen while it holds the closer lock, for longer than the
// lock's lease, finds on waking that it lost the lock: the loss is counted
// on its /metrics (and the closes still all happen, once).
func TestLockLossIsCounted(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	admin := pipelinetest.FreeAddr(t)
	// Orders expire a second after they are created; the closer's first
	// pass comes 5 s in and has hundreds to close, so it holds its lock
	// long enough to be caught holding it.
	consumer := p.StartConsumer("SECKILL_ADMIN_ADDR="+admin, "SECKILL_PAYMENT_WINDOW=1s", "SECKILL_CLOSER_EVERY=5s")
	const buyers = 800
	sale := api.CreateSale(buyers, 1)
	accepted, codes := crowd(t, api, sale.ActivityID, userRange(1, buyers), 50)
	if len(accepted) != buyers {
		t.Fatalf("accepted %d, refused %v", len(accepted), codes)
	}
	ctx := context.Background()
	key := p.Prefix + ":lock:{closer}"
	waittest.UntilEvery(t, 60*time.Second, time.Millisecond, "the closer holds its lock", func() bool {
		n, err := p.Redis.Exists(ctx, key).Result()
		return err == nil && n == 1
	})
	if err := consumer.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(16 * time.Second) // the lock's lease is 15 s
	if err := consumer.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	pipelinetest.ScrapeUntil(t, "http://"+admin+"/metrics", "the closer lock's loss counted", func(s pipelinetest.Scrape) bool {
		return s.Value("seckill_lock_losses_total", "lock", "closer") >= 1
	})
	// Every unpaid order still closes exactly once.
	waittest.Until(t, 60*time.Second, fmt.Sprintf("%d CLOSED orders", buyers), func() bool {
		counts, err := p.DB.Orders.StatusCounts(ctx, sale.ItemID)
		return err == nil && counts[order.Closed] == buyers
	})
	waitReleased(t, p, sale.ItemID)
	if inv := p.Check(sale); inv.DBStock != buyers || inv.RedisStock != buyers {
		t.Fatalf("after the closes: %+v, want every unit back in both stores", inv)
	}
}
