package orderevents

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/domain/order"
)

// Watermark is where a consumer group stands on a topic against a read of
// the topic's end: the draw's freeze waits until the entries' consumer
// group has committed past the end read after the close (ADR 7).
type Watermark struct {
	c            *kafka.Client
	topic, group string
}

// NewEntriesWatermark reads cfg's entries' topic for consumer group.
func NewEntriesWatermark(cfg Config, group string) *Watermark {
	tr := &kafka.Transport{DialTimeout: 5 * time.Second, MetadataTTL: time.Second}
	return &Watermark{c: &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr, Timeout: 10 * time.Second},
		topic: EntriesTopic(cfg.Topic), group: group}
}

// Ends reads the topic's end offsets now: every message Kafka acknowledged
// before the read is below them.
func (w *Watermark) Ends(ctx context.Context) (map[int]int64, error) {
	meta, err := w.c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{w.topic}})
	if err != nil {
		return nil, fmt.Errorf("entries' end: %w: %w", order.ErrUnavailable, err)
	}
	if len(meta.Topics) != 1 || meta.Topics[0].Error != nil || len(meta.Topics[0].Partitions) == 0 {
		return nil, fmt.Errorf("entries' end: no metadata of %s: %w", w.topic, order.ErrUnavailable)
	}
	var reqs []kafka.OffsetRequest
	for _, p := range meta.Topics[0].Partitions {
		reqs = append(reqs, kafka.LastOffsetOf(p.ID))
	}
	res, err := w.c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{w.topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("entries' end: %w: %w", order.ErrUnavailable, err)
	}
	ends := map[int]int64{}
	for _, p := range res.Topics[w.topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("entries' end of partition %d: %w: %w", p.Partition, order.ErrUnavailable, p.Error)
		}
		ends[p.Partition] = p.LastOffset
	}
	if len(ends) != len(reqs) {
		return nil, fmt.Errorf("entries' end: %d of %d partitions: %w", len(ends), len(reqs), order.ErrUnavailable)
	}
	return ends, nil
}

// Reached reads the group's committed offsets and says whether they
// reached ends on every partition, with how many messages below ends are
// not committed yet.
func (w *Watermark) Reached(ctx context.Context, ends map[int]int64) (bool, int64, error) {
	parts := make([]int, 0, len(ends))
	for p := range ends {
		parts = append(parts, p)
	}
	res, err := w.c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: w.group, Topics: map[string][]int{w.topic: parts}})
	if err != nil {
		return false, 0, fmt.Errorf("entries' committed offsets: %w: %w", order.ErrUnavailable, err)
	}
	if res.Error != nil {
		return false, 0, fmt.Errorf("entries' committed offsets: %w: %w", order.ErrUnavailable, res.Error)
	}
	committed := map[int]int64{}
	for _, p := range res.Topics[w.topic] {
		if p.Error != nil {
			return false, 0, fmt.Errorf("entries' committed offset of partition %d: %w: %w", p.Partition, order.ErrUnavailable, p.Error)
		}
		committed[p.Partition] = max(p.CommittedOffset, 0) // -1: none yet
	}
	var behind int64
	for p, end := range ends {
		behind += max(end-committed[p], 0)
	}
	return behind == 0, behind, nil
}
