package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/segmentio/kafka-go"
)

// crowd fires one order per user in users, concurrency at a time, and
// returns the accepted order numbers (-> user) and the error codes seen.
func crowd(t *testing.T, api *pipelinetest.API, activity int64, users []int64, concurrency int) (map[string]int64, map[string]int) {
	t.Helper()
	var (
		mu       sync.Mutex
		accepted = map[string]int64{}
		codes    = map[string]int{}
		wg       sync.WaitGroup
		sem      = make(chan struct{}, concurrency)
	)
	for _, u := range users {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			p, err := api.PlaceOrder(u, fmt.Sprintf("k-%d", u), activity, 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("user %d: %v", u, err)
			case p.Code == 202:
				accepted[p.OrderNo] = u
			default:
				codes[p.Error]++
			}
		}()
	}
	wg.Wait()
	return accepted, codes
}

func userRange(from, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

func countStatus(orders map[string]order.Order) map[order.Status]int {
	out := map[order.Status]int{}
	for _, o := range orders {
		out[o.Status]++
	}
	return out
}

func TestEndToEndFlashSaleAndRedelivery(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSale(100, 1)

	accepted, codes := crowd(t, api, sale.ActivityID, userRange(1, 1000), 200)
	if len(accepted) != 100 || codes["SOLD_OUT"] != 900 {
		t.Fatalf("accepted %d, refused %v; want 100 accepted and 900 SOLD_OUT", len(accepted), codes)
	}
	final := p.WaitFinal(accepted, 60*time.Second)
	if got := countStatus(final); got[order.Created] != 100 {
		t.Fatalf("statuses %v, want 100 CREATED", got)
	}
	p.WaitDrained(sale.ItemID, 10*time.Second)
	inv := p.Check(sale)
	if inv.DBStock != 0 || inv.RedisStock != 0 || inv.LiveOrders != 100 {
		t.Fatalf("after the sale: %+v", inv)
	}
	// Polling shows CREATED.
	for no, u := range accepted {
		if st, _, err := api.OrderStatus(u, no); err != nil || st != "CREATED" {
			t.Fatalf("poll %s: %s %v", no, st, err)
		}
		break
	}

	// Redelivery: a second consumer group reads the whole topic again.
	again := p.StartConsumer("SECKILL_CONSUMER_GROUP=" + kafkatest.Name("replay"))
	waitCommitted(t, p.Topic, again)
	again.Stop(30 * time.Second)
	if inv2 := p.Check(sale); inv2 != inv {
		t.Fatalf("redelivery changed the stores: before %+v, after %+v", inv, inv2)
	}
	var n int64
	if err := p.DB.Gorm().Raw("SELECT COUNT(*) FROM orders WHERE item_id = ?", sale.ItemID).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != 100 {
		t.Fatalf("%d order rows after redelivery, want 100", n)
	}
}

// waitCommitted polls until the consumer group of proc has committed the
// whole topic.
func waitCommitted(t *testing.T, topic string, proc *pipelinetest.Proc) {
	t.Helper()
	group := proc.Env("SECKILL_CONSUMER_GROUP")
	waittest.Until(t, 60*time.Second, "consumer group "+group+" to catch up on "+topic, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lag, err := kafkatest.GroupLag(ctx, topic, group)
		return err == nil && lag == 0
	})
}

func TestMySQLHasLessStockThanRedis(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	sale := api.CreateSale(50, 1)
	// MySQL loses 20 units after warmup: Redis believes in 50.
	if err := p.DB.Activities.SetItemStock(context.Background(), sale.ItemID, 30); err != nil {
		t.Fatal(err)
	}
	accepted, _ := crowd(t, api, sale.ActivityID, userRange(1, 50), 50)
	if len(accepted) != 50 {
		t.Fatalf("accepted %d, want 50 (Redis stock)", len(accepted))
	}
	p.StartConsumer()
	final := p.WaitFinal(accepted, 60*time.Second)
	got := countStatus(final)
	if got[order.Created] != 30 || got[order.Failed] != 20 {
		t.Fatalf("statuses %v, want 30 CREATED and 20 FAILED", got)
	}
	for no, o := range final {
		if o.Status == order.Failed {
			if o.FailureReason != order.ReasonOutOfStock {
				t.Fatalf("%s failed with %q", no, o.FailureReason)
			}
			// The buyer's quota comes back (the consumer releases the
			// reservation right after MySQL's FAILED row): they may try
			// again, and find it sold out, since Redis was brought down
			// to MySQL.
			waitReservationReleased(t, p, sale.ItemID, no)
			pl, err := api.PlaceOrder(accepted[no], "retry", sale.ActivityID, 1)
			if err != nil || pl.Error != "SOLD_OUT" {
				t.Fatalf("retry of a failed buyer: %+v %v, want SOLD_OUT", pl, err)
			}
			break
		}
	}
	p.WaitDrained(sale.ItemID, 10*time.Second)
	check := sale
	check.Stock = 30 // what MySQL really had
	if inv := p.Check(check); inv.DBStock != 0 || inv.RedisStock != 0 {
		t.Fatalf("final %+v, want both stores at 0", inv)
	}
}

func TestConsumerKilledMidStream(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	sale := api.CreateSale(400, 1)
	c := p.StartConsumer("SECKILL_CONSUMER_BATCH=20")

	var created atomic.Int64
	done := make(chan struct{})
	var accepted map[string]int64
	go func() {
		defer close(done)
		accepted, _ = crowd(t, api, sale.ActivityID, userRange(1, 600), 50)
	}()
	// Kill the consumer once it has created some orders, mid-stream.
	waittest.UntilEvery(t, 60*time.Second, 5*time.Millisecond, "50 orders created", func() bool {
		n, _ := p.DB.Orders.LiveOrderCount(context.Background(), sale.ItemID)
		created.Store(n)
		return n >= 50
	})
	c.Kill()
	t.Logf("consumer killed with %d orders created", created.Load())
	<-done
	p.StartConsumer()
	final := p.WaitFinal(accepted, 90*time.Second)
	if got := countStatus(final); got[order.Created] != 400 || len(accepted) != 400 {
		t.Fatalf("accepted %d, statuses %v; want 400 CREATED", len(accepted), got)
	}
	p.WaitDrained(sale.ItemID, 10*time.Second)
	p.Check(sale)
}

func TestStrandedReservationIsSwept(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	sale := api.CreateSale(10, 1)
	// The API died between reserving and publishing: the reservation
	// exists, the event does not.
	no := order.NewNumberGenerator().Next(sale.ItemID)
	now := time.Now()
	if _, err := p.Store.Reservations.Reserve(context.Background(), reservation.Reservation{
		OrderNo: no, UserID: "5", ItemID: sale.ItemID, ActivityID: sale.ActivityID, Quantity: 1,
		IdempotencyKey: "lost", At: now, QuotaTTL: time.Hour, ReservationTTL: time.Hour,
	}); err != nil {
		t.Fatal(err)
	}
	p.StartConsumer("SECKILL_SWEEP_AFTER=1s", "SECKILL_SWEEP_EVERY=200ms")
	final := p.WaitFinal(map[string]int64{no: 5}, 30*time.Second)
	if final[no].Status != order.Created {
		t.Fatalf("stranded order ended %+v", final[no])
	}
	p.WaitDrained(sale.ItemID, 10*time.Second)
	if st, _, err := api.OrderStatus(5, no); err != nil || st != "CREATED" {
		t.Fatalf("poll: %s %v", st, err)
	}
	p.Check(sale)
}

func TestPoisonMessageIsDeadLettered(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	sale := api.CreateSale(10, 1)
	p.StartConsumer()

	poison := []byte(`{"v": 99, "order_no": "garbage"`)
	kafkatest.Write(t, p.Topic, kafka.Message{Key: []byte("x"), Value: poison})
	// The consumer keeps going: a real order after the poison is created.
	pl, err := api.PlaceOrder(1, "after-poison", sale.ActivityID, 1)
	if err != nil || pl.Code != 202 {
		t.Fatalf("order: %+v %v", pl, err)
	}
	p.WaitFinal(map[string]int64{pl.OrderNo: 1}, 30*time.Second)

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: kafkatest.Brokers(), Topic: orderevents.DLQTopic(p.Topic), Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatalf("dead-letter topic: %v", err)
	}
	var dl orderevents.DeadLetter
	if err := json.Unmarshal(m.Value, &dl); err != nil {
		t.Fatal(err)
	}
	if string(dl.Original) != string(poison) || dl.Reason == "" {
		t.Fatalf("dead letter %+v", dl)
	}
	p.WaitDrained(sale.ItemID, 10*time.Second)
	p.Check(sale)
}

// waitReservationReleased waits until the reservation of orderNo is RELEASED
// in Redis.
func waitReservationReleased(t *testing.T, p *pipelinetest.Pipeline, item int64, orderNo string) {
	t.Helper()
	waittest.Until(t, 10*time.Second, "reservation "+orderNo+" to be released", func() bool {
		info, err := p.Store.Reservations.Reservation(context.Background(), orderNo)
		return err == nil && info.State == reservation.StateReleased
	})
}
