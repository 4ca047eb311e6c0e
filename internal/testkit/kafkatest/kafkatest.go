// Package kafkatest gives each test its own topic (and names for its own
// consumer groups) on the running Kafka broker (scripts/services), or on
// the brokers a test names (the *On functions: the three-node cluster of
// `scripts/services up kafka-cluster`, a proxy). An unreachable broker fails
// the test.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/outbox"
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
	return NewTopicOn(t, Brokers(), partitions)
}

// Replication is the replication factor and min.insync.replicas of the
// topics NewTopicOn makes on brokers: one copy on one broker; on a cluster,
// as in production, three copies (or as many as brokers are named) and a
// majority of them in sync.
func Replication(brokers []string) (factor, minInsync int) {
	factor = min(max(len(brokers), 1), 3)
	return factor, factor/2 + 1
}

// NewTopicOn is NewTopic on the given brokers, replicated as Replication
// says. The topics are deleted when the test ends.
func NewTopicOn(t testing.TB, brokers []string, partitions int) string {
	t.Helper()
	topic := Name("test.orders")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rf, isr := Replication(brokers)
	cfg := orderevents.Config{Brokers: brokers, Topic: topic, Partitions: partitions, ReplicationFactor: rf, MinInsyncReplicas: isr}
	if err := orderevents.EnsureTopics(ctx, cfg); err != nil {
		t.Fatalf("kafkatest: Kafka at %v: create topic (run `scripts/services up`): %v", brokers, err)
	}
	// Registered before the test's programs and readers, so it runs after
	// they are stopped. Best effort: a broker that is down keeps them. The
	// broker's idle CPU grows with the partitions it holds, and a run of
	// every test made several hundred topics.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = orderevents.DeleteTopics(ctx, brokers, topic, orderevents.DLQTopic(topic))
	})
	waitForLeaders(t, ctx, brokers[0], topic, partitions)
	return topic
}

// waitForLeaders polls until every partition of topic has a leader that
// answers: a broker that has just started may list a leader before that
// leader serves the partition ("Not Leader For Partition").
func waitForLeaders(t testing.TB, ctx context.Context, broker, topic string, partitions int) {
	t.Helper()
	for {
		if leadersServe(ctx, broker, topic, partitions) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kafkatest: topic %s has no serving leaders: %v", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func leadersServe(ctx context.Context, broker, topic string, partitions int) bool {
	for p := range partitions {
		conn, err := kafka.DialLeader(ctx, "tcp", broker, topic, p)
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

// Offsets returns, per partition of topic, its end offset and the offset
// group has committed (0 when none; group "" reads no commits). It uses a
// transport of its own: the shared default caches metadata for seconds, and
// would not know a topic created since.
func Offsets(ctx context.Context, topic, group string) (end, committed map[int]int64, err error) {
	return OffsetsOn(ctx, Brokers(), topic, group)
}

// OffsetsOn is Offsets on the given brokers.
func OffsetsOn(ctx context.Context, brokers []string, topic, group string) (end, committed map[int]int64, err error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, nil, err
	}
	if len(meta.Topics) != 1 || meta.Topics[0].Error != nil || len(meta.Topics[0].Partitions) == 0 {
		return nil, nil, fmt.Errorf("no metadata for topic %s: %+v", topic, meta.Topics)
	}
	var parts []int
	var ends []kafka.OffsetRequest
	for _, p := range meta.Topics[0].Partitions {
		parts = append(parts, p.ID)
		ends = append(ends, kafka.LastOffsetOf(p.ID))
	}
	last, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: ends}})
	if err != nil {
		return nil, nil, err
	}
	if len(last.Topics[topic]) != len(parts) {
		return nil, nil, fmt.Errorf("end offsets of %d of %d partitions of %s", len(last.Topics[topic]), len(parts), topic)
	}
	end, committed = map[int]int64{}, map[int]int64{}
	for _, p := range last.Topics[topic] {
		if p.Error != nil {
			return nil, nil, fmt.Errorf("end offset of %s/%d: %w", topic, p.Partition, p.Error)
		}
		end[p.Partition], committed[p.Partition] = p.LastOffset, 0
	}
	if group == "" {
		return end, committed, nil
	}
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		return nil, nil, err
	}
	if res.Error != nil {
		return nil, nil, fmt.Errorf("committed offsets of %s: %w", group, res.Error)
	}
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			return nil, nil, fmt.Errorf("committed offset of %s/%d: %w", topic, p.Partition, p.Error)
		}
		committed[p.Partition] = max(p.CommittedOffset, 0)
	}
	return end, committed, nil
}

// GroupLag returns how many messages of topic the consumer group has not
// committed yet (a group that committed nothing lags by the whole topic).
func GroupLag(ctx context.Context, topic, group string) (int64, error) {
	return GroupLagOn(ctx, Brokers(), topic, group)
}

// GroupLagOn is GroupLag on the given brokers.
func GroupLagOn(ctx context.Context, brokers []string, topic, group string) (int64, error) {
	end, committed, err := OffsetsOn(ctx, brokers, topic, group)
	if err != nil {
		return 0, err
	}
	var lag int64
	for p, e := range end {
		lag += e - committed[p]
	}
	return lag, nil
}

// Write writes msgs to topic as they are, in one call (one produce request
// per partition), retrying while a fresh topic is not in the writer's
// metadata yet.
func Write(t testing.TB, topic string, msgs ...kafka.Message) {
	t.Helper()
	WriteOn(t, Brokers(), topic, msgs...)
}

// WriteOn is Write on the given brokers.
func WriteOn(t testing.TB, brokers []string, topic string, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{}}
	defer w.Close()
	var err error
	defer func() {
		if t.Failed() && err != nil {
			t.Logf("kafkatest: last write to %s: %v", topic, err)
		}
	}()
	waittest.UntilEvery(t, 30*time.Second, 100*time.Millisecond, "a write to "+topic, func() bool {
		err = w.WriteMessages(context.Background(), msgs...)
		return err == nil
	})
}

// PartitionOf returns the partition of topic that the publisher's balancer
// (kafka.Hash over every partition) sends messages with key to.
func PartitionOf(ctx context.Context, brokers []string, topic string, key []byte) (int, error) {
	parts, err := Partitions(ctx, brokers, topic)
	if err != nil {
		return 0, err
	}
	ids := make([]int, len(parts))
	for i, p := range parts {
		ids[i] = p.ID
	}
	return (&kafka.Hash{}).Balance(kafka.Message{Key: key}, ids...), nil
}

// Partitions returns the metadata of topic's partitions (leader, replicas,
// in-sync replicas), in partition order, as the brokers see them now.
func Partitions(ctx context.Context, brokers []string, topic string) ([]kafka.Partition, error) {
	tr := &kafka.Transport{DialTimeout: 2 * time.Second}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 5 * time.Second}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	if len(meta.Topics) != 1 || meta.Topics[0].Error != nil || len(meta.Topics[0].Partitions) == 0 {
		return nil, fmt.Errorf("no metadata for topic %s: %+v", topic, meta.Topics)
	}
	parts := meta.Topics[0].Partitions
	slices.SortFunc(parts, func(a, b kafka.Partition) int { return a.ID - b.ID })
	return parts, nil
}

// topicConfigSource is DYNAMIC_TOPIC_CONFIG, DescribeConfigs' source of an
// entry set on the topic.
const topicConfigSource = 1

// TopicConfig returns the values of the named configuration entries set on
// topic itself (min.insync.replicas, unclean.leader.election.enable, ...):
// an entry the topic takes from the broker's defaults is left out.
func TopicConfig(ctx context.Context, brokers []string, topic string, names ...string) (map[string]string, error) {
	tr := &kafka.Transport{DialTimeout: 2 * time.Second}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 5 * time.Second}
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: names}}})
	if err != nil {
		return nil, err
	}
	if len(res.Resources) != 1 || res.Resources[0].Error != nil {
		return nil, fmt.Errorf("configuration of topic %s: %+v", topic, res.Resources)
	}
	got := map[string]string{}
	for _, e := range res.Resources[0].ConfigEntries {
		if e.ConfigSource == topicConfigSource {
			got[e.ConfigName] = e.ConfigValue
		}
	}
	return got, nil
}

// ReadAll reads every message topic holds now, by partition, in offset
// order.
func ReadAll(t testing.TB, topic string) map[int][]kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Right after a broker's restart or cut a partition's leader may be
	// moving: an answer that says so is asked again.
	end, _, err := Offsets(ctx, topic, "none")
	for err != nil && temporary(err) && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
		end, _, err = Offsets(ctx, topic, "none")
	}
	if err != nil {
		t.Fatal(err)
	}
	got := map[int][]kafka.Message{}
	for part, n := range end {
		if n == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: Brokers(), Topic: topic, Partition: part, MaxWait: 100 * time.Millisecond})
		for int64(len(got[part])) < n {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("partition %d: %d of %d messages read: %v", part, len(got[part]), n, err)
			}
			got[part] = append(got[part], m)
		}
		_ = r.Close()
	}
	return got
}

// ReadEvents reads every event the outbox's topic holds now (the shop's
// events), partition after partition, each in offset order, duplicates
// included.
func ReadEvents(t testing.TB, topic string) []outbox.Event {
	t.Helper()
	all := ReadAll(t, topic)
	parts := make([]int, 0, len(all))
	for p := range all {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	var out []outbox.Event
	for _, p := range parts {
		for _, m := range all[p] {
			var e outbox.Event
			if err := json.Unmarshal(m.Value, &e); err != nil {
				t.Fatalf("partition %d offset %d: %v", p, m.Offset, err)
			}
			out = append(out, e)
		}
	}
	return out
}

// temporary reports whether err is a Kafka error a later request may not
// meet (a leader moving, a partition not known yet).
func temporary(err error) bool {
	var ke kafka.Error
	return errors.As(err, &ke) && ke.Temporary()
}
