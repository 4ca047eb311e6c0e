package orderevents_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
)

// readN fetches n messages from r, failing the test past 30 s.
func readN(t *testing.T, r interface {
	FetchMessage(context.Context) (kafka.Message, error)
}, n int) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []kafka.Message
	for len(got) < n {
		m, err := r.FetchMessage(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d messages fetched: %v", len(got), n, err)
		}
		if err != nil {
			t.Logf("fetch: %v", err) // reported, and the reader goes on
			continue
		}
		got = append(got, m)
	}
	return got
}

// Twenty sales' events over twelve partitions, read as a group: each event
// comes once, each partition's in offset order from the first, and every
// fetch request asked the broker for all twelve partitions at once (kafka-go's
// Reader sent one per partition). Once the reader closed, the group's
// offsets are the log's end (the last commit went with the close), and a
// new member of the group gets only the events published after.
func TestReaderFetchesEveryPartitionOfABrokerAtOnce(t *testing.T) {
	const partitions = 12
	topic := kafkatest.NewTopic(t, partitions)
	p := newPublisher(t, topic)
	const sales, each = 20, 30
	sent := publishAll(t, p, sales*each, func(i int) int64 { return int64(100 + i%sales) })
	cfg := orderevents.RouterConfig{Brokers: kafkatest.Brokers(), Topic: topic, GroupID: kafkatest.Name("reader")}
	r := orderevents.NewGroupReader(cfg)
	got := readN(t, r, len(sent))
	seen := map[string]bool{}
	next := map[int]int64{}
	for _, m := range got {
		e, err := orderevents.Decode(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := sent[e.OrderNo]; !ok || seen[e.OrderNo] {
			t.Fatalf("event %s at %d/%d: sent %v, seen before %v", e.OrderNo, m.Partition, m.Offset, ok, seen[e.OrderNo])
		}
		seen[e.OrderNo] = true
		if m.Offset != next[m.Partition] {
			t.Fatalf("partition %d: offset %d, want %d", m.Partition, m.Offset, next[m.Partition])
		}
		next[m.Partition]++
		if m.HighWaterMark <= m.Offset {
			t.Fatalf("partition %d offset %d: high-water mark %d", m.Partition, m.Offset, m.HighWaterMark)
		}
	}
	if len(next) < 2 {
		t.Fatalf("the events went to %d partition(s): the test proves nothing", len(next))
	}
	requests, asked := r.Fetches()
	if requests == 0 || asked != partitions*requests {
		t.Fatalf("%d fetch requests asked for %d partitions in all, want all %d in each", requests, asked, partitions)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.CommitMessages(ctx, got...); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	end, done, err := kafkatest.Offsets(ctx, topic, cfg.GroupID)
	if err != nil {
		t.Fatal(err)
	}
	for part, n := range end {
		if done[part] != n {
			t.Fatalf("partition %d: committed %d after the close, the log ends at %d", part, done[part], n)
		}
	}
	t.Logf("%d events over %d partitions in %d fetch requests", len(got), len(next), requests)

	more := publishAll(t, p, 10, func(i int) int64 { return int64(100 + i) })
	r2 := orderevents.NewGroupReader(cfg)
	defer r2.Close()
	for _, m := range readN(t, r2, len(more)) {
		e, err := orderevents.Decode(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := more[e.OrderNo]; !ok {
			t.Fatalf("the group's next member got %s at %d/%d, published before the commit", e.OrderNo, m.Partition, m.Offset)
		}
		delete(more, e.OrderNo)
	}
	if len(more) != 0 {
		t.Fatalf("%d events published after the commit never came", len(more))
	}
}

// Through a proxy that loses the answers of the first two fetches (the
// broker ran them, the reader never hears, its connection closes) and
// then of one offset commit: every event still comes once, each partition's
// in offset order from the first, so a lost fetch answer is fetched again
// from the same offsets. After the lost commit, the group's next member gets
// every event published since (those the lost commit covered may come
// again: the handler is idempotent), so nothing is lost.
func TestReaderLostAnswers(t *testing.T) {
	topic := kafkatest.NewTopic(t, 4)
	p := newPublisher(t, topic)
	sent := publishAll(t, p, 40, func(i int) int64 { return int64(200 + i%8) })
	px := proxytest.StartKafka(t)
	px.LoseReply(proxytest.KafkaRequest(proxytest.KafkaFetch), 2)
	cfg := orderevents.RouterConfig{Brokers: []string{px.Addr()}, Topic: topic, GroupID: kafkatest.Name("lost")}
	r := orderevents.NewGroupReader(cfg)
	got := readN(t, r, len(sent))
	px.WaitLost(t, 2, 10*time.Second) // through the proxy, and both answers lost
	next := map[int]int64{}
	for _, m := range got {
		e, err := orderevents.Decode(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := sent[e.OrderNo]; !ok {
			t.Fatalf("event %s was not published", e.OrderNo)
		}
		delete(sent, e.OrderNo)
		if m.Offset != next[m.Partition] {
			t.Fatalf("partition %d: offset %d after a lost fetch answer, want %d", m.Partition, m.Offset, next[m.Partition])
		}
		next[m.Partition]++
	}
	if len(sent) != 0 {
		t.Fatalf("%d events never came", len(sent))
	}

	px.LoseReply(proxytest.KafkaRequest(proxytest.KafkaOffsetCommit), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.CommitMessages(ctx, got...); err != nil {
		t.Fatal(err)
	}
	px.WaitLost(t, 3, 10*time.Second)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	more := publishAll(t, p, 10, func(i int) int64 { return int64(200 + i) })
	r2 := orderevents.NewGroupReader(orderevents.RouterConfig{Brokers: kafkatest.Brokers(), Topic: topic, GroupID: cfg.GroupID})
	defer r2.Close()
	again := 0
	for len(more) > 0 {
		m := readN(t, r2, 1)[0]
		e, err := orderevents.Decode(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := more[e.OrderNo]; ok {
			delete(more, e.OrderNo)
		} else {
			again++
		}
	}
	t.Logf("after the lost commit answer, the next member got %d events again beside the 10 new ones", again)
}
