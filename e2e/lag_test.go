package e2e_test

import (
	"context"
	"errors"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/kafkatest"
	"github.com/seckill/seckill/pkg/pipelinetest"
)

// groupLag returns how many messages of topic the consumer group of proc
// has not committed yet. The group id is read from the process's
// environment as the test set it.
func groupLag(topic string, proc *pipelinetest.Proc) (int64, error) {
	group := proc.Env("SECKILL_CONSUMER_GROUP")
	if group == "" {
		return 0, errors.New("no group")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(kafkatest.Brokers()...)}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(meta.Topics) != 1 {
		return 0, errors.Join(err, errors.New("no metadata"))
	}
	var parts []int
	var offReq []kafka.OffsetRequest
	for _, p := range meta.Topics[0].Partitions {
		parts = append(parts, p.ID)
		offReq = append(offReq, kafka.LastOffsetOf(p.ID))
	}
	ends, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: offReq}})
	if err != nil {
		return 0, err
	}
	committed, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		return 0, err
	}
	done := map[int]int64{}
	for _, p := range committed.Topics[topic] {
		done[p.Partition] = p.CommittedOffset
	}
	var lag int64
	for _, p := range ends.Topics[topic] {
		c := done[p.Partition]
		if c < 0 {
			c = 0
		}
		lag += p.LastOffset - c
	}

	return lag, nil
}
