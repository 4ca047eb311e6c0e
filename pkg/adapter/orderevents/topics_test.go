package orderevents_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
)

// The topics are made with the replication the configuration asks for, or
// the program refuses to start with an error that says why.
func TestEnsureTopicsReplication(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	brokers := kafkatest.Brokers()
	cases := []struct {
		name    string
		cfg     orderevents.Config // Brokers and Topic are filled in
		before  *orderevents.Config
		wantErr string
	}{
		{name: "defaults", cfg: orderevents.Config{Partitions: 2}},
		{name: "more replicas than brokers", cfg: orderevents.Config{Partitions: 2, ReplicationFactor: 32, MinInsyncReplicas: 2},
			wantErr: "replication factor 32: the cluster needs that many live brokers"},
		{name: "existing topic with fewer replicas", before: &orderevents.Config{Partitions: 2},
			cfg: orderevents.Config{Partitions: 2, ReplicationFactor: 32}, wantErr: "exists with 1 replicas, want 32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic := kafkatest.Name("test.replication")
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = orderevents.DeleteTopics(ctx, brokers, topic, orderevents.DLQTopic(topic))
			})
			if tc.before != nil {
				before := *tc.before
				before.Brokers, before.Topic = brokers, topic
				if err := orderevents.EnsureTopics(ctx, before); err != nil {
					t.Fatal(err)
				}
			}
			cfg := tc.cfg
			cfg.Brokers, cfg.Topic = brokers, topic
			err := orderevents.EnsureTopics(ctx, cfg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				got, err := kafkatest.TopicConfig(ctx, brokers, topic, "unclean.leader.election.enable")
				if err != nil || got["unclean.leader.election.enable"] != "false" {
					t.Fatalf("unclean.leader.election.enable = %q (%v), want false", got["unclean.leader.election.enable"], err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
