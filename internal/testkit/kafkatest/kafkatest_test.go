package kafkatest_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
)

// A test's topics do not outlive it: a broker holding every topic every
// run made spends more and more CPU on them.
func TestNewTopicIsDeletedWhenTheTestEnds(t *testing.T) {
	var topic string
	t.Run("uses a topic", func(t *testing.T) {
		topic = kafkatest.NewTopic(t, 2)
		if _, err := kafkatest.Partitions(context.Background(), kafkatest.Brokers(), topic); err != nil {
			t.Fatalf("the new topic has no metadata: %v", err)
		}
	})
	gone := func(name string) func() bool {
		return func() bool {
			_, err := kafkatest.Partitions(context.Background(), kafkatest.Brokers(), name)
			return err != nil
		}
	}
	waittest.Until(t, 20*time.Second, "the topic deleted after its test", gone(topic))
	waittest.Until(t, 20*time.Second, "its dead-letter topic deleted too", gone(orderevents.DLQTopic(topic)))
}
