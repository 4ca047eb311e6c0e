// Package kafkatest gives each test its own topic (and names for its own
// consumer groups) on the running Kafka broker (scripts/services). An
// unreachable broker fails the test.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/orderevents"
)

// Brokers are the brokers tests use: SECKILL_KAFKA_BROKERS or 127.0.0.1:9092.
func Brokers() []string {
	if b := os.Getenv("SECKILL_KAFKA_BROKERS"); b != "" {
		return strings.Split(b, ",")
	}
	return []string{"127.0.0.1:9092"}
}

// Name returns a fresh random name with the given prefix.
func Name(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// NewTopic creates a fresh orders topic with partitions partitions, and its
// dead-letter topic, and returns the topic's name.
func NewTopic(t testing.TB, partitions int) string {
	t.Helper()
	topic := Name("test.orders")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := orderevents.Config{Brokers: Brokers(), Topic: topic, Partitions: partitions}
	if err := orderevents.EnsureTopics(ctx, cfg); err != nil {
		t.Fatalf("kafkatest: Kafka at %v: create topic (run `scripts/services up`): %v", Brokers(), err)
	}
	waitForLeaders(t, ctx, topic, partitions)
	return topic
}

// waitForLeaders polls until every partition of topic has a leader that
// answers: a broker that has just started may list a leader before that
// leader serves the partition ("Not Leader For Partition").
func waitForLeaders(t testing.TB, ctx context.Context, topic string, partitions int) {
	t.Helper()
	for {
		if leadersServe(ctx, topic, partitions) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kafkatest: topic %s has no serving leaders: %v", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func leadersServe(ctx context.Context, topic string, partitions int) bool {
	for p := range partitions {
		conn, err := kafka.DialLeader(ctx, "tcp", Brokers()[0], topic, p)
		if err != nil {
			return false
		}
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			return false
		}
	}
	return true
}

// GroupLag returns how many messages of topic the consumer group has not
// committed yet (a group that committed nothing lags by the whole topic).
func GroupLag(ctx context.Context, topic, group string) (int64, error) {
	// Its own transport: the shared default caches metadata for seconds, and
	// a topic created since would read as having nothing to lag behind.
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(Brokers()...), Transport: tr}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, err
	}
	if len(meta.Topics) != 1 || meta.Topics[0].Error != nil || len(meta.Topics[0].Partitions) == 0 {
		return 0, fmt.Errorf("no metadata for topic %s: %+v", topic, meta.Topics)
	}
	var parts []int
	var ends []kafka.OffsetRequest
	for _, p := range meta.Topics[0].Partitions {
		parts = append(parts, p.ID)
		ends = append(ends, kafka.LastOffsetOf(p.ID))
	}
	last, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: ends}})
	if err != nil {
		return 0, err
	}
	committed, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		return 0, err
	}
	done := map[int]int64{}
	for _, p := range committed.Topics[topic] {
		done[p.Partition] = max(p.CommittedOffset, 0)
	}
	if len(last.Topics[topic]) != len(parts) {
		return 0, fmt.Errorf("end offsets of %d of %d partitions of %s", len(last.Topics[topic]), len(parts), topic)
	}
	var lag int64
	for _, p := range last.Topics[topic] {
		if p.Error != nil {
			return 0, fmt.Errorf("end offset of %s/%d: %w", topic, p.Partition, p.Error)
		}
		lag += p.LastOffset - done[p.Partition]
	}
	return lag, nil
}
