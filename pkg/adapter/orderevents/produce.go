package orderevents

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
)

// producer sends the events of one write in one produce request per
// partition leader, however many partitions they go to.
//
// kafka-go's Writer sends one produce request per partition, each from its
// own batch and goroutine. A write of twenty sales' events spreads over
// about ten partitions, so it became ten requests, and both the broker and
// the api spend their CPU per request, not per event: measured on this
// machine, the broker spent about three times the CPU per event and the
// client four times when 5,000 events a second went to ten partitions
// instead of one, and about the same for both once each write was one
// request. Kafka's own producer batches by broker in the same way.
//
// An event goes to the partition kafka.Hash picks for its key among all
// the topic's partitions, as the Writer did, so one sale's events stay in
// one partition, in order. A failed partition is sent again, at most
// produceAttempts times in all, while the error is one a later attempt
// may not meet (a leader change, a broken connection, a topic not known
// yet); like the Writer's MaxAttempts, this may write an event twice, which
// the consumer takes.
type producer struct {
	tr      *kafka.Transport
	addr    net.Addr
	topic   string
	balance kafka.Hash
	// For the tests: write calls, produce requests sent, and the
	// partitions those requests held in all.
	calls, requests, partitions atomic.Int64
}

const (
	// produceAttempts is how many times one event is sent at most.
	produceAttempts = 3
	// produceBackoff is the wait before the second attempt, four times
	// that before the third (kafka-go's Writer waits the same).
	produceBackoff = 100 * time.Millisecond
)

// write sends msgs and returns each one's error (nil once Kafka has it),
// trying until ctx ends at the latest.
func (p *producer) write(ctx context.Context, msgs []kafka.Message) []error {
	p.calls.Add(1)
	errs := make([]error, len(msgs))
	left := make([]int, len(msgs)) // indexes of msgs not written yet
	for i := range left {
		left[i] = i
	}
	now := time.Now()
	for attempt := 1; len(left) > 0; attempt++ {
		if attempt > 1 {
			if !sleep(ctx, time.Duration((attempt-1)*(attempt-1))*produceBackoff) {
				break
			}
		}
		leaders, err := p.leaders(ctx)
		if err != nil {
			for _, i := range left {
				errs[i] = err
			}
			if attempt == produceAttempts || !retriable(err) {
				break
			}
			continue
		}
		// By leader, then by partition, in the order of msgs.
		byLeader := map[int32]map[int32][]int{}
		ids := partitionIDs(len(leaders))
		for _, i := range left {
			part := int32(p.balance.Balance(msgs[i], ids...))
			l := leaders[part]
			if byLeader[l] == nil {
				byLeader[l] = map[int32][]int{}
			}
			byLeader[l][part] = append(byLeader[l][part], i)
		}
		var mu sync.Mutex
		var again []int
		send := func(parts map[int32][]int) {
			perPart := p.produce(ctx, msgs, parts, now)
			mu.Lock()
			defer mu.Unlock()
			for part, idx := range parts {
				err := perPart[part]
				for _, i := range idx {
					errs[i] = err
				}
				if err != nil && attempt < produceAttempts && retriable(err) {
					again = append(again, idx...)
				}
			}
		}
		if len(byLeader) == 1 { // one broker, or one leader for all
			for _, parts := range byLeader {
				send(parts)
			}
		} else { // the leaders at once
			var wg sync.WaitGroup
			for _, parts := range byLeader {
				wg.Go(func() { send(parts) })
			}
			wg.Wait()
		}
		left = again
	}
	return errs
}

// leaders returns the leader of each partition of the topic.
func (p *producer) leaders(ctx context.Context) ([]int32, error) {
	return topicLeaders(ctx, p.tr, p.addr, p.topic)
}

// topicLeaders returns the leader of each partition of topic, from tr's
// cached metadata (refreshed every MetadataTTL).
func topicLeaders(ctx context.Context, tr *kafka.Transport, addr net.Addr, topic string) ([]int32, error) {
	r, err := tr.RoundTrip(ctx, addr, &metadataAPI.Request{TopicNames: []string{topic}})
	if err != nil {
		return nil, err
	}
	for _, t := range r.(*metadataAPI.Response).Topics {
		if t.Name != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, kafka.Error(t.ErrorCode)
		}
		leaders := make([]int32, len(t.Partitions))
		for _, part := range t.Partitions {
			if int(part.PartitionIndex) >= len(leaders) {
				return nil, fmt.Errorf("topic %s: partition %d of %d", topic, part.PartitionIndex, len(leaders))
			}
			leaders[part.PartitionIndex] = part.LeaderID
		}
		return leaders, nil
	}
	return nil, kafka.UnknownTopicOrPartition
}

// produce sends the messages of parts (partitions that share a leader) in
// one request and returns each partition's error.
func (p *producer) produce(ctx context.Context, msgs []kafka.Message, parts map[int32][]int, now time.Time) map[int32]error {
	topic := produceAPI.RequestTopic{Topic: p.topic}
	for part, idx := range parts {
		records := make([]kafka.Record, len(idx))
		for j, i := range idx {
			m := &msgs[i]
			records[j] = kafka.Record{Time: now, Key: kafka.NewBytes(m.Key), Value: kafka.NewBytes(m.Value), Headers: m.Headers}
		}
		topic.Partitions = append(topic.Partitions, produceAPI.RequestPartition{Partition: part,
			RecordSet: protocol.RecordSet{Records: kafka.NewRecordReader(records...)}})
	}
	// The broker waits for the replicas no longer than the caller does.
	timeout := int32(30_000)
	if d, ok := ctx.Deadline(); ok {
		timeout = int32(max(time.Until(d).Milliseconds(), 1))
	}
	out := make(map[int32]error, len(parts))
	fail := func(err error) map[int32]error {
		for part := range parts {
			out[part] = err
		}
		return out
	}
	p.requests.Add(1)
	p.partitions.Add(int64(len(parts)))
	r, err := p.tr.RoundTrip(ctx, p.addr, &produceAPI.Request{Acks: int16(kafka.RequireAll), Timeout: timeout, Topics: []produceAPI.RequestTopic{topic}})
	if err != nil {
		return fail(err)
	}
	for _, t := range r.(*produceAPI.Response).Topics {
		for _, part := range t.Partitions {
			if _, ok := parts[part.Partition]; !ok || t.Topic != p.topic {
				continue
			}
			out[part.Partition] = nil
			if part.ErrorCode != 0 {
				out[part.Partition] = kafka.Error(part.ErrorCode)
			}
		}
	}
	for part := range parts {
		if _, ok := out[part]; !ok {
			out[part] = fmt.Errorf("topic %s partition %d: no answer in the produce response", p.topic, part)
		}
	}
	return out
}

// retriable reports whether another attempt may succeed: a Kafka error
// that says so, a broken or refused connection, or a partition the cached
// metadata does not place yet (no leader, leaders that changed under the
// request). A caller's deadline is not.
func retriable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke.Temporary()
	}
	return true
}

// partitionIDs returns 0..n-1, the partitions kafka.Hash chooses among.
func partitionIDs(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	return ids
}
