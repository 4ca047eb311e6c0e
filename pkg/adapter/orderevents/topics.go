package orderevents

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/domain/order"
)

// DLQTopic is the dead-letter topic of topic.
func DLQTopic(topic string) string { return topic + ".dlq" }

// EnsureTopics creates the orders topic and its dead-letter topic if they do
// not exist yet, with cfg's replication factor, min.insync.replicas and
// unclean leader election off (an out-of-sync replica never becomes leader:
// that would drop acknowledged events). A topic that exists with fewer
// replicas than cfg asks for is an error.
func EnsureTopics(ctx context.Context, cfg Config) error {
	return ensure(ctx, cfg, kafka.TopicConfig{Topic: cfg.Topic}, kafka.TopicConfig{Topic: DLQTopic(cfg.Topic), NumPartitions: 1})
}

// ensure creates topics that do not exist yet, each with cfg's partition
// count unless it names its own, cfg's replication factor and settings,
// and checks their replicas.
func ensure(ctx context.Context, cfg Config, topics ...kafka.TopicConfig) error {
	parts := cfg.Partitions
	if parts <= 0 {
		parts = 12
	}
	rf := max(cfg.ReplicationFactor, 1)
	entries := []kafka.ConfigEntry{{ConfigName: "unclean.leader.election.enable", ConfigValue: "false"}}
	if cfg.MinInsyncReplicas > 0 {
		entries = append(entries, kafka.ConfigEntry{ConfigName: "min.insync.replicas", ConfigValue: strconv.Itoa(cfg.MinInsyncReplicas)})
	}
	names := make([]string, len(topics))
	for i := range topics {
		t := &topics[i]
		if t.NumPartitions <= 0 {
			t.NumPartitions = parts
		}
		t.ReplicationFactor, t.ConfigEntries, names[i] = rf, entries, t.Topic
	}
	err := CreateTopics(ctx, cfg.Brokers, topics...)
	if err != nil {
		if errors.Is(err, kafka.InvalidReplicationFactor) {
			return fmt.Errorf("%w (replication factor %d: the cluster needs that many live brokers)", err, rf)
		}
		return err
	}
	return checkReplicas(ctx, cfg.Brokers, rf, names...)
}

// checkReplicas fails when a partition of topics has fewer than rf replicas
// (the topic existed before, made with a smaller replication factor). A
// broker may not know a topic created a moment ago yet: that is asked again
// for up to 10 s.
func checkReplicas(ctx context.Context, brokers []string, rf int, topics ...string) error {
	tr := &kafka.Transport{DialTimeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 10 * time.Second}
	for deadline := time.Now().Add(10 * time.Second); ; {
		meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
		if err != nil {
			return fmt.Errorf("kafka metadata: %w: %w", order.ErrUnavailable, err)
		}
		var unknown error
		for _, t := range meta.Topics {
			if t.Error != nil {
				unknown = fmt.Errorf("kafka metadata of %s: %w: %w", t.Name, order.ErrUnavailable, t.Error)
				continue
			}
			for _, p := range t.Partitions {
				if len(p.Replicas) < rf {
					return fmt.Errorf("kafka topic %s exists with %d replicas, want %d (SECKILL_KAFKA_REPLICATION_FACTOR): "+
						"raise it with kafka-reassign-partitions, or use a new topic", t.Name, len(p.Replicas), rf)
				}
			}
		}
		if unknown == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return unknown
		}
		select {
		case <-ctx.Done():
			return unknown
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// CreateTopics creates topics through the cluster's controller; topics that
// exist already are fine.
func CreateTopics(ctx context.Context, brokers []string, topics ...kafka.TopicConfig) error {
	if len(brokers) == 0 {
		return errors.New("kafka: no brokers configured")
	}
	d := &kafka.Dialer{Timeout: 5 * time.Second}
	conn, err := dialAny(ctx, d, brokers)
	if err != nil {
		return fmt.Errorf("kafka dial: %w: %w", order.ErrUnavailable, err)
	}
	defer conn.Close()
	ctl, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("kafka controller: %w: %w", order.ErrUnavailable, err)
	}
	cc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ctl.Host, strconv.Itoa(ctl.Port)))
	if err != nil {
		return fmt.Errorf("kafka dial controller: %w: %w", order.ErrUnavailable, err)
	}
	defer cc.Close()
	if err := cc.CreateTopics(topics...); err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("kafka create topics: %w", err)
	}
	return nil
}

// Ping checks that a broker answers a metadata request (the first of
// brokers that can be reached: one broker of a cluster down is not Kafka
// down).
func Ping(ctx context.Context, brokers []string) error {
	if len(brokers) == 0 {
		return errors.New("kafka: no brokers configured")
	}
	d := &kafka.Dialer{Timeout: 2 * time.Second}
	conn, err := dialAny(ctx, d, brokers)
	if err != nil {
		return fmt.Errorf("kafka: %w: %w", order.ErrUnavailable, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Brokers(); err != nil {
		return fmt.Errorf("kafka: %w: %w", order.ErrUnavailable, err)
	}
	return nil
}

// dialAny connects to the first of brokers that accepts, in order.
func dialAny(ctx context.Context, d *kafka.Dialer, brokers []string) (*kafka.Conn, error) {
	var errs []error
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// DeleteTopics deletes topics through the cluster's controller.
func DeleteTopics(ctx context.Context, brokers []string, topics ...string) error {
	if len(brokers) == 0 {
		return errors.New("kafka: no brokers configured")
	}
	d := &kafka.Dialer{Timeout: 5 * time.Second}
	conn, err := dialAny(ctx, d, brokers)
	if err != nil {
		return err
	}
	defer conn.Close()
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		_ = conn.SetDeadline(dl)
	}
	ctl, err := conn.Controller()
	if err != nil {
		return err
	}
	cc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ctl.Host, strconv.Itoa(ctl.Port)))
	if err != nil {
		return err
	}
	defer cc.Close()
	if hasDeadline {
		_ = cc.SetDeadline(dl)
	}
	return cc.DeleteTopics(topics...)
}

// DeleteGroup deletes a consumer group; a group that does not exist is fine.
func DeleteGroup(ctx context.Context, brokers []string, group string) error {
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	res, err := c.DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: []string{group}})
	if err == nil {
		err = res.Errors[group]
	}
	if err != nil && !errors.Is(err, kafka.GroupIdNotFound) {
		return fmt.Errorf("delete consumer group %s: %w", group, err)
	}
	return nil
}
