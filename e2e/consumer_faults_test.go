package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/segmentio/kafka-go"
)

// noSweep keeps the sweep away from every reservation of a test, so only
// Kafka redelivery (or the code under test) can finish an order.
const noSweep = "SECKILL_SWEEP_AFTER=1h"

// A consumer sent SIGTERM while orders flow exits 0 within its drain
// timeout, having committed only offsets whose orders are in MySQL; a
// second consumer in the group then finishes the rest, each order once.
func TestConsumerSIGTERMMidStreamCommitsOnlyFinishedWork(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	sale := api.CreateSale(3000, 1)
	const drain = 30 * time.Second
	c := p.StartConsumer("SECKILL_CONSUMER_BATCH=20", fmt.Sprintf("SECKILL_CONSUMER_DRAIN_TIMEOUT=%v", drain), noSweep)

	// Buyers keep coming until told to stop, so the consumer is stopped
	// with orders flowing.
	var (
		mu       sync.Mutex
		accepted = map[string]int64{}
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		next     = make(chan int64)
	)
	go func() {
		defer close(next)
		for u := int64(1); ; u++ {
			select {
			case next <- u:
			case <-stop:
				return
			}
		}
	}()
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				pl, err := api.PlaceOrder(u, fmt.Sprintf("k-%d", u), sale.ActivityID, 1)
				if err != nil {
					t.Errorf("user %d: %v", u, err)
					return
				}
				if pl.Code == 202 {
					mu.Lock()
					accepted[pl.OrderNo] = u
					mu.Unlock()
				}
			}
		}()
	}
	stopBuyers := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopBuyers()
	waittest.UntilEvery(t, 60*time.Second, 5*time.Millisecond, "50 orders created", func() bool {
		n, _ := p.DB.Orders.LiveOrderCount(context.Background(), sale.ItemID)
		return n >= 50
	})
	if err := c.Stop(drain); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	stopBuyers()

	// Before anyone else consumes: every event below the group's committed
	// offsets is finished, a CREATED order in MySQL whose reservation Redis
	// confirmed.
	committed := committedEvents(t, p.Topic, p.Group)
	if len(committed) == 0 {
		t.Fatal("the stopped consumer committed nothing")
	}
	nos := make([]string, len(committed))
	for i, e := range committed {
		nos[i] = e.OrderNo
	}
	inDB, err := p.DB.Orders.Orders(context.Background(), nos)
	if err != nil {
		t.Fatal(err)
	}
	var unfinished []string
	for _, e := range committed {
		res, err := p.Store.Reservations.Reservation(context.Background(), e.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		if inDB[e.OrderNo].Status != order.Created || res.State != reservation.StateConfirmed {
			unfinished = append(unfinished, fmt.Sprintf("%s (MySQL %q, Redis %s)", e.OrderNo, inDB[e.OrderNo].Status, res.State))
		}
	}
	if len(unfinished) > 0 {
		t.Fatalf("%d of %d committed events are not finished, e.g. %v", len(unfinished), len(committed), unfinished[:min(5, len(unfinished))])
	}
	t.Logf("stopped with %d events committed of %d accepted", len(committed), len(accepted))

	p.StartConsumer(noSweep)
	final := p.WaitFinal(accepted, 90*time.Second)
	if got := countStatus(final); got[order.Created] != len(accepted) {
		t.Fatalf("accepted %d, statuses %v; want every one CREATED", len(accepted), got)
	}
	var rows int64
	if err := p.DB.Gorm().Raw("SELECT COUNT(*) FROM orders WHERE item_id = ?", sale.ItemID).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if rows != int64(len(accepted)) {
		t.Fatalf("%d order rows for %d accepted orders", rows, len(accepted))
	}
	p.WaitDrained(sale.ItemID, 30*time.Second)
	if inv := p.Check(sale); inv.LiveOrders != int64(len(accepted)) {
		t.Fatalf("final %+v, want %d live orders", inv, len(accepted))
	}
}

// committedEvents returns the events of topic that group has committed,
// read back partition by partition from the start to the committed offset.
func committedEvents(t *testing.T, topic, group string) []order.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, committed, err := kafkatest.Offsets(ctx, topic, group)
	if err != nil {
		t.Fatal(err)
	}
	var out []order.Event
	for partition, upTo := range committed {
		if upTo <= 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: kafkatest.Brokers(), Topic: topic, Partition: partition, MaxWait: 100 * time.Millisecond})
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("read partition %d up to %d: %v", partition, upTo, err)
			}
			e, err := orderevents.Decode(m.Value)
			if err != nil {
				r.Close()
				t.Fatalf("partition %d offset %d: %v", partition, m.Offset, err)
			}
			out = append(out, e)
			if m.Offset >= upTo-1 {
				break
			}
		}
		r.Close()
	}
	return out
}

// A dead-lettered event that still names a reservation (here: a version
// this consumer does not know, with a real order number, user and
// activity) lands in <topic>.dlq and gives the reservation's stock and
// quota back; no order is written.
func TestDeadLetterReleasesItsReservation(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	sale := api.CreateSale(10, 2)
	ctx := context.Background()
	const user = 5
	ev := p.ReserveEvent(sale, user, 2, "dl-key")
	no := ev.OrderNo
	keys := p.Store.Keys(reservation.One(sale.ItemID))
	if snap, err := p.Store.Stock.Stock(ctx, reservation.One(sale.ItemID)); err != nil || snap.Stock != 8 || snap.Inflight != 2 {
		t.Fatalf("after the reservation: %+v %v, want stock 8, in flight 2", snap, err)
	}
	ev.Version = order.EventVersion + 1
	poison, _ := json.Marshal(ev)
	kafkatest.Write(t, p.Topic, kafka.Message{Key: orderevents.ItemKey(sale.ItemID), Value: poison})
	p.StartConsumer(noSweep)

	dl := readDeadLetter(t, p.Topic)
	if string(dl.Original) != string(poison) || !strings.Contains(dl.Reason, "version") || dl.Topic != p.Topic {
		t.Fatalf("dead letter %+v, want the event with a version reason", dl)
	}
	// The release follows the dead letter: poll for it.
	waittest.Until(t, 30*time.Second, "the reservation to be released: stock 10, in flight 0, no quota", func() bool {
		snap, err := p.Store.Stock.Stock(ctx, reservation.One(sale.ItemID))
		if err != nil {
			t.Fatal(err)
		}
		_, qerr := p.Redis.Get(ctx, keys.Quota(sale.ActivityID, strconv.Itoa(user))).Result()
		return snap.Stock == 10 && snap.Inflight == 0 && errors.Is(qerr, redis.Nil)
	})
	info, err := p.Store.Reservations.Reservation(ctx, no)
	if err != nil || info.State != reservation.StateReleased || info.Reason != order.ReasonInvalidEvent {
		t.Fatalf("reservation %+v %v, want RELEASED with %s", info, err, order.ReasonInvalidEvent)
	}
	if pending, err := p.Store.Reservations.PendingOlderThan(ctx, reservation.One(sale.ItemID), time.Now().Add(time.Hour), 10); err != nil || len(pending) != 0 {
		t.Fatalf("pending %v %v, want none", pending, err)
	}
	if _, err := p.DB.Orders.Order(ctx, no); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("order %s in MySQL: %v, want none", no, err)
	}
	if st, reason, err := api.OrderStatus(user, no); err != nil || st != string(order.Failed) || reason != order.ReasonInvalidEvent {
		t.Fatalf("poll: %s %s %v, want FAILED %s", st, reason, err, order.ReasonInvalidEvent)
	}

	// The quota is back: the same buyer buys, and both stores agree.
	pl, err := api.PlaceOrder(user, "after-dead-letter", sale.ActivityID, 2)
	if err != nil || pl.Code != 202 {
		t.Fatalf("buy again: %+v %v", pl, err)
	}
	if got := p.WaitFinal(map[string]int64{pl.OrderNo: user}, 30*time.Second); got[pl.OrderNo].Status != order.Created {
		t.Fatalf("new order ended %+v", got[pl.OrderNo])
	}
	p.WaitDrained(sale.ItemID, 30*time.Second)
	if inv := p.Check(sale); inv.DBStock != 8 || inv.LiveOrders != 1 {
		t.Fatalf("final %+v, want MySQL stock 8 and one live order", inv)
	}
}

// A dead letter naming a reservation a consumer already claimed leaves it
// alone: the claim means a valid event for the order exists and will finish
// it. Here a consumer claimed the order and wrote it to MySQL, then died
// before confirming it in Redis or committing its offset; a poison event
// for the same order number precedes the redelivered valid one.
func TestDeadLetterLeavesAClaimedReservationToItsEvent(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	sale := api.CreateSale(10, 1)
	ctx := context.Background()
	const user = 5
	ev := p.ReserveEvent(sale, user, 1, "claimed")
	// The consumer that died: claimed, and committed in MySQL.
	if st, err := p.Store.Reservations.Claim(ctx, reservation.One(sale.ItemID), []string{ev.OrderNo}); err != nil || st[0] != reservation.StateReserved {
		t.Fatalf("claim: %v %v", st, err)
	}
	if out, err := mysqltest.Fulfil(ctx, p.DB.DB, []order.FulfilRequest{{Event: ev, PayDeadline: time.Now().Add(time.Hour)}}); err != nil ||
		out[ev.OrderNo].Status != order.Created {
		t.Fatalf("fulfil: %+v %v", out, err)
	}
	poisonEv := ev
	poisonEv.Version = order.EventVersion + 1
	poison, _ := json.Marshal(poisonEv)
	valid, _ := json.Marshal(ev)
	key := orderevents.ItemKey(sale.ItemID)
	kafkatest.Write(t, p.Topic, kafka.Message{Key: key, Value: poison}, kafka.Message{Key: key, Value: valid})
	p.StartConsumer(noSweep)

	if dl := readDeadLetter(t, p.Topic); string(dl.Original) != string(poison) {
		t.Fatalf("dead letter %+v, want the poison event", dl)
	}
	var info reservation.Info
	waittest.Until(t, 30*time.Second, "the reservation to leave CLAIMED", func() bool {
		var err error
		if info, err = p.Store.Reservations.Reservation(ctx, ev.OrderNo); err != nil {
			t.Fatal(err)
		}
		return info.State != reservation.StateClaimed
	})
	if info.State != reservation.StateConfirmed {
		t.Fatalf("reservation of the CREATED order ended %s (%s), want CONFIRMED", info.State, info.Reason)
	}
	holder, err := p.Redis.Get(ctx, p.Store.Keys(reservation.One(sale.ItemID)).Quota(sale.ActivityID, strconv.Itoa(user))).Result()
	if err != nil || holder != ev.OrderNo {
		t.Fatalf("quota key %q %v, want it held by the live order %s", holder, err, ev.OrderNo)
	}
	p.WaitDrained(sale.ItemID, 30*time.Second)
	if inv := p.Check(sale); inv.DBStock != 9 || inv.LiveOrders != 1 {
		t.Fatalf("final %+v, want MySQL stock 9 and one live order", inv)
	}
}

// readDeadLetter reads the first dead letter of topic's dead-letter topic.
func readDeadLetter(t *testing.T, topic string) orderevents.DeadLetter {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: kafkatest.Brokers(), Topic: orderevents.DLQTopic(topic), Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatalf("dead-letter topic: %v", err)
	}
	var dl orderevents.DeadLetter
	if err := json.Unmarshal(m.Value, &dl); err != nil {
		t.Fatalf("dead letter %q: %v", m.Value, err)
	}
	return dl
}

// When MySQL has less stock than Redis accepted, the consumer logs one
// alert-level line for each order MySQL refused, naming it.
func TestStockDisagreementIsLoggedAtAlertLevel(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	sale := api.CreateSale(5, 1)
	if err := p.DB.Activities.SetItemStock(context.Background(), sale.ItemID, 3); err != nil {
		t.Fatal(err)
	}
	accepted, codes := crowd(t, api, sale.ActivityID, userRange(1, 5), 5)
	if len(accepted) != 5 {
		t.Fatalf("accepted %d, refused %v; want 5 (Redis stock)", len(accepted), codes)
	}
	c := p.StartConsumer()
	final := p.WaitFinal(accepted, 30*time.Second)
	var failed []string
	for no, o := range final {
		if o.Status == order.Failed && o.FailureReason == order.ReasonOutOfStock {
			failed = append(failed, no)
		}
	}
	if got := countStatus(final); got[order.Created] != 3 || len(failed) != 2 {
		t.Fatalf("statuses %v, want 3 CREATED and 2 FAILED OUT_OF_STOCK", got)
	}
	sort.Strings(failed)

	// The line follows the MySQL commit: poll the log.
	var alerted []string
	waittest.Until(t, 30*time.Second, fmt.Sprintf("%d disagreements logged", len(failed)), func() bool {
		alerted = alerted[:0]
		for _, l := range logLines(c.Log()) {
			if strings.HasPrefix(l.str("msg"), "Redis and MySQL disagree") {
				if l.str("level") != "ERROR+4" {
					t.Fatalf("disagreement logged at %q, want ERROR+4: %v", l.str("level"), l)
				}
				alerted = append(alerted, l.str("order_no"))
			}
		}
		return len(alerted) >= len(failed)
	})
	sort.Strings(alerted)
	if strings.Join(alerted, ",") != strings.Join(failed, ",") {
		t.Fatalf("alert lines name %v, want the failed orders %v", alerted, failed)
	}
	p.WaitDrained(sale.ItemID, 30*time.Second)
	check := sale
	check.Stock = 3 // what MySQL really had
	p.Check(check)
}

// Events that decode but cannot be real orders (no such activity, an
// activity of another item) are dead-lettered with the reason, their
// reservations given back, and nothing reaches MySQL; the consumer goes on
// with the valid event behind. An event of more units than the activity
// allows is a possible order (a limit lowered while an instance had the old
// one): it ends FAILED OVER_LIMIT by MySQL's row, not dead-lettered.
func TestImpossibleEventsAreDeadLettered(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	sale := api.CreateSale(10, 2)
	other := api.CreateSale(10, 2)
	ctx := context.Background()

	cases := []struct {
		reason string
		mutate func(*order.Event)
	}{
		{"no activity", func(e *order.Event) { e.ActivityID = 1 << 40 }},
		{"sells item", func(e *order.Event) { e.ActivityID = other.ActivityID }},
	}
	var msgs []kafka.Message
	var bad []order.Event
	for i, c := range cases {
		e := p.ReserveEvent(sale, int64(i+1), 1, fmt.Sprintf("bad-%d", i))
		c.mutate(&e) // a corrupted event for a real reservation
		b, _ := json.Marshal(e)
		msgs = append(msgs, kafka.Message{Key: orderevents.ItemKey(sale.ItemID), Value: b})
		bad = append(bad, e)
	}
	over := p.ReserveEvent(sale, 8, 3, "over") // 3 units of a sale allowing 2
	good := p.ReserveEvent(sale, 9, 1, "good")
	for _, e := range []order.Event{over, good} {
		b, _ := json.Marshal(e)
		msgs = append(msgs, kafka.Message{Key: orderevents.ItemKey(sale.ItemID), Value: b})
	}
	kafkatest.Write(t, p.Topic, msgs...)
	p.StartConsumer(noSweep)

	got := p.WaitFinal(map[string]int64{good.OrderNo: 9, over.OrderNo: 8}, 30*time.Second)
	if got[good.OrderNo].Status != order.Created {
		t.Fatalf("the valid event behind the poison ended %+v", got[good.OrderNo])
	}
	if o := got[over.OrderNo]; o.Status != order.Failed || o.FailureReason != order.ReasonOverLimit {
		t.Fatalf("the order above the limit ended %s %q, want FAILED %s", o.Status, o.FailureReason, order.ReasonOverLimit)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: kafkatest.Brokers(), Topic: orderevents.DLQTopic(p.Topic), Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i, c := range cases {
		m, err := r.ReadMessage(rctx)
		if err != nil {
			t.Fatalf("dead letter %d: %v", i, err)
		}
		var dl orderevents.DeadLetter
		if err := json.Unmarshal(m.Value, &dl); err != nil || !strings.Contains(dl.Reason, c.reason) {
			t.Fatalf("dead letter %d: %+v %v, want a reason with %q", i, dl, err, c.reason)
		}
	}
	for _, e := range bad {
		if _, err := p.DB.Orders.Order(ctx, e.OrderNo); !errors.Is(err, order.ErrNotFound) {
			t.Fatalf("impossible order %s reached MySQL: %v", e.OrderNo, err)
		}
	}
	// Their units and quotas are back (the keys come from the reservation,
	// not from the corrupted event); only the valid order holds a unit. The
	// router releases a reservation just after its dead letter is written.
	waittest.Until(t, 10*time.Second, "Redis stock 9 with nothing in flight after the dead letters", func() bool {
		snap, err := p.Store.Stock.Stock(ctx, reservation.One(sale.ItemID))
		if err != nil {
			t.Fatal(err)
		}
		return snap.Stock == 9 && snap.Inflight == 0
	})
	for _, e := range append(bad, over) {
		if q, err := p.Redis.Get(ctx, p.Store.Keys(reservation.One(sale.ItemID)).Quota(sale.ActivityID, e.UserID)).Result(); !errors.Is(err, redis.Nil) {
			t.Fatalf("user %s's quota still held by %q (%v)", e.UserID, q, err)
		}
	}
	if inv := p.Check(sale); inv.DBStock != 9 || inv.LiveOrders != 1 {
		t.Fatalf("final %+v", inv)
	}
}
