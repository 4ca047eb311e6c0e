package orderevents_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/order"
)

func newPublisher(t *testing.T, topic string) *orderevents.Publisher {
	t.Helper()
	p := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: topic})
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

var numbers = order.NewNumberGenerator()

func event(item int64, i int) order.Event {
	return order.Event{Version: order.EventVersion, OrderNo: numbers.Next(item), UserID: strconv.Itoa(i + 1), ItemID: item,
		ActivityID: 1, Quantity: 1, IdempotencyKey: fmt.Sprintf("key-%d-%d", item, i), ReservedAt: time.Now()}
}

// readAll returns every event in topic, by partition.
func readAll(t *testing.T, topic string) map[int][]order.Event {
	t.Helper()
	got := map[int][]order.Event{}
	for part, msgs := range kafkatest.ReadAll(t, topic) {
		for _, m := range msgs {
			e, err := orderevents.Decode(m.Value)
			if err != nil {
				t.Fatal(err)
			}
			got[part] = append(got[part], e)
		}
	}
	return got
}

// publishAll publishes n events at once, the i-th of item itemOf(i), and
// returns each one's item by order number once all are acknowledged.
func publishAll(t *testing.T, p *orderevents.Publisher, n int, itemOf func(int) int64) map[string]int64 {
	t.Helper()
	sent := map[string]int64{}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		e := event(itemOf(i), i)
		sent[e.OrderNo] = e.ItemID
		wg.Go(func() { errs <- p.Publish(context.Background(), e) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return sent
}

// A burst of one item's events (a flash sale) and a few of another item,
// all published at once: each Publish answers nil only once its event is
// in Kafka, every event is there once, one item's events share one
// partition, and they went in far fewer produce requests than events.
func TestPublishBurstGoesTogether(t *testing.T) {
	topic := kafkatest.NewTopic(t, 4)
	p := newPublisher(t, topic)
	p.Writes()
	const hot, cold = 400, 20
	sent := publishAll(t, p, hot+cold, func(i int) int64 {
		if i >= hot {
			return 8
		}
		return 7
	})
	writes := p.Writes()
	got := readAll(t, topic)
	seen := map[string]bool{}
	partOf := map[int64]int{}
	for part, evs := range got {
		for _, e := range evs {
			item, ok := sent[e.OrderNo]
			if !ok || seen[e.OrderNo] {
				t.Fatalf("event %s in partition %d: sent %v, seen before %v", e.OrderNo, part, ok, seen[e.OrderNo])
			}
			seen[e.OrderNo] = true
			if p, ok := partOf[item]; ok && p != part {
				t.Fatalf("item %d's events in partitions %d and %d", item, p, part)
			}
			partOf[item] = part
		}
	}
	if len(seen) != hot+cold {
		t.Fatalf("%d events in Kafka, want %d", len(seen), hot+cold)
	}
	if writes >= (hot+cold)/4 {
		t.Fatalf("%d produce requests for %d events: the lanes did not send them together", writes, hot+cold)
	}
	t.Logf("%d events in %d produce requests", hot+cold, writes)
}

// Twenty drops at once, their events spread over a twelve-partition
// topic and published together: every event lands once, in the partition
// kafka.Hash gives its key (what the tests that pick a sale's partition
// rely on), and a lane's write to several partitions is one produce
// request, not one per partition.
func TestPublishManySalesOneRequestPerWrite(t *testing.T) {
	topic := kafkatest.NewTopic(t, 12)
	p := newPublisher(t, topic)
	writes0, requests0, parts0 := p.Sent()
	const sales, each = 20, 30
	sent := publishAll(t, p, sales*each, func(i int) int64 { return int64(100 + i%sales) })
	writes, requests, partsSent := p.Sent()
	writes, requests, partsSent = writes-writes0, requests-requests0, partsSent-parts0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := map[string]bool{}
	parts := map[int]bool{}
	partOf := map[int64]int{}
	for part, evs := range readAll(t, topic) {
		for _, e := range evs {
			item, ok := sent[e.OrderNo]
			if !ok || seen[e.OrderNo] {
				t.Fatalf("event %s in partition %d: sent %v, seen before %v", e.OrderNo, part, ok, seen[e.OrderNo])
			}
			seen[e.OrderNo] = true
			want, ok := partOf[item]
			if !ok { // one metadata request per item, not per event
				var err error
				if want, err = kafkatest.PartitionOf(ctx, kafkatest.Brokers(), topic, orderevents.ItemKey(item)); err != nil {
					t.Fatal(err)
				}
				partOf[item] = want
			}
			if part != want {
				t.Fatalf("item %d's event in partition %d, its key hashes to %d", item, part, want)
			}
			parts[part] = true
		}
	}
	if len(seen) != sales*each {
		t.Fatalf("%d events in Kafka, want %d", len(seen), sales*each)
	}
	// kafka-go's Writer sent one request per partition of a write; here
	// a write to one broker is one request whatever its partitions.
	if requests != writes {
		t.Fatalf("%d lane writes sent as %d produce requests, want one each", writes, requests)
	}
	if partsSent <= requests {
		t.Fatalf("%d produce requests held %d partitions in all: no write went to several partitions, the test proves nothing", requests, partsSent)
	}
	t.Logf("%d events of %d sales over %d partitions: %d writes, %d produce requests holding %d partitions", sales*each, sales, len(parts), writes, requests, partsSent)
}

// One lane write of 20 events of four sales (so to several partitions, in
// one produce request) reaches the broker and its answer is lost (the link
// cut, and refused past the publisher's timeout): no event of the write is
// answered nil, and every one is in Kafka (a resend may write some twice:
// the consumer is idempotent). So each caller takes the unknown-outcome
// path, which settles its own order.
func TestPublishLostAnswerReachesEveryEventOfTheWrite(t *testing.T) {
	topic := kafkatest.NewTopic(t, 4)
	px := proxytest.StartKafka(t)
	p := orderevents.NewPublisher(orderevents.Config{Brokers: []string{px.Addr()}, Topic: topic, WriteTimeout: time.Second})
	t.Cleanup(func() { _ = p.Close() })
	waittest.UntilEvery(t, 30*time.Second, 100*time.Millisecond, "a first publish through the proxy", func() bool {
		return p.Publish(context.Background(), event(7, 0)) == nil
	})
	if px.Connections() == 0 {
		t.Fatal("the publisher is not connected through the proxy: is the PROXIED listener configured?")
	}
	px.CutAfter(proxytest.KafkaRequest(proxytest.KafkaProduce), 3*time.Second)
	var msgs []kafka.Message
	sent := map[string]bool{}
	for i := 1; i <= 20; i++ {
		e := event(int64(7+i%4), i)
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: orderevents.ItemKey(e.ItemID), Value: b})
		sent[e.OrderNo] = true
	}
	for i, err := range p.WriteDue(time.Now().Add(time.Second), msgs...) {
		if err == nil {
			t.Fatalf("event %d of the cut write was answered nil", i)
		}
	}
	px.WaitLost(t, 1, 5*time.Second)
	n, parts := 0, 0
	for _, evs := range readAll(t, topic) {
		parts++
		n += len(evs)
		for _, e := range evs {
			delete(sent, e.OrderNo)
		}
	}
	if len(sent) != 0 {
		t.Fatalf("%d events of the cut write are not in Kafka: the cut came before the produce landed", len(sent))
	}
	t.Logf("%d events in %d partitions after the cut write of 20", n, parts)
}

// An event whose deadline passed while it waited in its lane is answered
// "not sent" and is not sent; the others of the same write are.
func TestPublishDueEventsAreNotSent(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1)
	p := newPublisher(t, topic)
	msg := func(e order.Event) kafka.Message {
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return kafka.Message{Key: orderevents.ItemKey(e.ItemID), Value: b}
	}
	for _, err := range p.WriteDue(time.Now().Add(-time.Millisecond), msg(event(7, 1)), msg(event(7, 2))) {
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("an event past its deadline answered %v", err)
		}
	}
	live := event(7, 3)
	if errs := p.WriteDue(time.Now().Add(5*time.Second), msg(live)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got := readAll(t, topic)
	if len(got[0]) != 1 || got[0][0].OrderNo != live.OrderNo {
		t.Fatalf("Kafka holds %v, want only %s", got, live.OrderNo)
	}
}

// Close sends what was already accepted; a Publish after it is refused
// without sending, as ErrUnavailable.
func TestPublishAfterCloseIsRefused(t *testing.T) {
	topic := kafkatest.NewTopic(t, 2)
	p := newPublisher(t, topic)
	if err := p.Publish(context.Background(), event(7, 1)); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	err := p.Publish(context.Background(), event(7, 2))
	if !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("Publish after Close = %v, want ErrUnavailable", err)
	}
	if n := len(readAll(t, topic)[0]) + len(readAll(t, topic)[1]); n != 1 {
		t.Fatalf("%d events in Kafka, want 1", n)
	}
}
