package orderevents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	fetchAPI "github.com/segmentio/kafka-go/protocol/fetch"
)

// fetchWait is how long the broker holds a fetch that finds no message.
// A fetch asks MinBytes 1, so it returns as soon as one message is there:
// the wait bounds only empty fetches. An idle consumer sends one per broker
// per fetchWait, and 2 s keeps them to a few a second. A close or a
// rebalance waits for the fetches under way, so it may take up to this long.
const fetchWait = 2 * time.Second

// fetchSpacing is the least time between two fetch requests to one broker.
// The broker answers as soon as one event is there, so unspaced, a busy
// broker would be asked once per produce request that reached it; spaced,
// each fetch brings what came meanwhile for all of its partitions. An idle
// broker's fetch waits in the broker (fetchWait) and the first event after
// a quiet moment is fetched at once: only events that follow others by
// less than fetchSpacing wait, and at most that long.
const fetchSpacing = 10 * time.Millisecond

// partitionState is where the fetching of one assigned partition stands.
type partitionState struct {
	id     int
	offset int64     // the next offset to fetch; FirstOffset or LastOffset until resolved
	parked time.Time // past the log's end: not fetched before this
}

// fetchLoop fetches the partitions of one generation until it ends or the
// reader closes: one fetcher per broker, each asking for all the
// partitions that broker leads. When one fetcher fails (the leaders moved,
// a broker is down), they all stop, and after a backoff the partitions
// are placed again on the cluster's current leaders.
func (r *groupReader) fetchLoop(ctx context.Context, assigned []kafka.PartitionAssignment) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	if len(assigned) == 0 {
		<-ctx.Done() // returning would end the generation
		return
	}
	parts := make([]*partitionState, len(assigned))
	for i, a := range assigned {
		parts[i] = &partitionState{id: a.ID, offset: a.Offset}
	}
	for failures := 0; ctx.Err() == nil; {
		if failures > 0 && !sleep(ctx, fetchBackoff(failures)) {
			return
		}
		progressed, err := r.fetchAll(ctx, parts)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			failures = 0
		}
		failures++
		r.report(ctx, err)
	}
}

// fetchBackoff is the pause after the failures-th failure in a row: 50 ms
// doubling up to 1 s.
func fetchBackoff(failures int) time.Duration {
	return min(50*time.Millisecond<<min(failures-1, 5), time.Second)
}

// fetchAll resolves the partitions' offsets, groups them by leader and
// fetches from every leader at once until one fetcher fails; it returns
// that error, and whether any fetch succeeded meanwhile.
func (r *groupReader) fetchAll(ctx context.Context, parts []*partitionState) (bool, error) {
	if err := r.resolve(ctx, parts); err != nil {
		return false, err
	}
	leaders, err := topicLeaders(ctx, r.tr, r.addr, r.topic)
	if err != nil {
		return false, err
	}
	byLeader := map[int32][]*partitionState{}
	for _, p := range parts {
		if p.id >= len(leaders) {
			return false, fmt.Errorf("topic %s: partition %d of %d", r.topic, p.id, len(leaders))
		}
		byLeader[leaders[p.id]] = append(byLeader[leaders[p.id]], p)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var progressed atomic.Bool
	errs := make(chan error, len(byLeader))
	var wg sync.WaitGroup
	for _, ps := range byLeader {
		wg.Go(func() {
			err := r.fetcher(fctx, ps, &progressed)
			errs <- err
			cancel()
		})
	}
	wg.Wait()
	return progressed.Load(), <-errs // the first to fail, which stopped the others
}

// resolve turns FirstOffset and LastOffset into the partitions' offsets,
// and moves an offset below the log's start up to it.
func (r *groupReader) resolve(ctx context.Context, parts []*partitionState) error {
	var reqs []kafka.OffsetRequest
	for _, p := range parts {
		reqs = append(reqs, kafka.FirstOffsetOf(p.id), kafka.LastOffsetOf(p.id))
	}
	res, err := r.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{r.topic: reqs}})
	if err != nil {
		return fmt.Errorf("list offsets: %w", err)
	}
	got := map[int]kafka.PartitionOffsets{}
	for _, po := range res.Topics[r.topic] {
		got[po.Partition] = po
	}
	for _, p := range parts {
		po, ok := got[p.id]
		switch {
		case !ok:
			return fmt.Errorf("list offsets: no answer for partition %d", p.id)
		case po.Error != nil:
			return fmt.Errorf("list offsets of partition %d: %w", p.id, po.Error)
		case p.offset == kafka.FirstOffset:
			p.offset = po.FirstOffset
		case p.offset == kafka.LastOffset:
			p.offset = po.LastOffset
		case p.offset < po.FirstOffset:
			r.log.Warn("offset below the log's start; skipping to it", "partition", p.id, "offset", p.offset,
				"first", po.FirstOffset)
			p.offset = po.FirstOffset
		}
	}
	return nil
}

// fetcher fetches parts, which one broker leads, until ctx ends or a fetch
// fails. A partition past the log's end is parked for a second while the
// others go on; any other partition error ends the fetcher, so that the
// partitions are placed again.
func (r *groupReader) fetcher(ctx context.Context, parts []*partitionState, progressed *atomic.Bool) error {
	byID := make(map[int32]*partitionState, len(parts))
	for _, p := range parts {
		byID[int32(p.id)] = p
	}
	var last time.Time
	for {
		now := time.Now()
		var ask []fetchAPI.RequestPartition
		wake := now.Add(fetchWait)
		for _, p := range parts {
			if p.parked.After(now) {
				wake = minTime(wake, p.parked)
				continue
			}
			ask = append(ask, fetchAPI.RequestPartition{Partition: int32(p.id), CurrentLeaderEpoch: -1,
				FetchOffset: p.offset, LogStartOffset: -1, PartitionMaxBytes: partitionMaxBytes})
		}
		if len(ask) == 0 {
			if !sleep(ctx, time.Until(wake)) {
				return ctx.Err()
			}
			continue
		}
		if !sleep(ctx, time.Until(last.Add(r.spacing))) {
			return ctx.Err()
		}
		last = time.Now()
		// An event of a parked partition should not wait out a long poll.
		maxWait := min(fetchWait, max(time.Until(wake), time.Millisecond))
		msgs, err := r.fetch(ctx, ask, maxWait, byID)
		if err == nil || len(msgs) > 0 {
			progressed.Store(true)
		}
		for _, m := range msgs {
			select {
			case r.msgs <- fetched{m: m}:
			case <-ctx.Done():
				return ctx.Err() // not handed on: fetched again by whoever owns the partition next
			}
		}
		if err != nil {
			return err
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// fetch sends one fetch request for ask and returns its messages in
// partition order, moving each partition's offset past them, and the first
// error of a partition other than an offset out of range (with what the
// other partitions brought).
func (r *groupReader) fetch(ctx context.Context, ask []fetchAPI.RequestPartition, maxWait time.Duration,
	byID map[int32]*partitionState) ([]kafka.Message, error) {
	r.fetches.Add(1)
	r.fetchedPartitions.Add(int64(len(ask)))
	// A broker that stops answering must not hold the fetcher forever.
	rctx, cancel := context.WithTimeout(ctx, maxWait+10*time.Second)
	defer cancel()
	res, err := r.tr.RoundTrip(rctx, r.addr, &fetchAPI.Request{ReplicaID: -1, MaxWaitTime: int32(maxWait.Milliseconds()),
		MinBytes: 1, MaxBytes: fetchMaxBytes, SessionID: -1, SessionEpoch: -1,
		Topics: []fetchAPI.RequestTopic{{Topic: r.topic, Partitions: ask}}})
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	fr := res.(*fetchAPI.Response)
	if fr.ErrorCode != 0 {
		return nil, fmt.Errorf("fetch: %w", kafka.Error(fr.ErrorCode))
	}
	var msgs []kafka.Message
	var failed error
	for _, t := range fr.Topics {
		if t.Topic != r.topic {
			continue
		}
		for _, part := range t.Partitions {
			p, ok := byID[part.Partition]
			if !ok {
				continue
			}
			if part.ErrorCode != 0 {
				err := kafka.Error(part.ErrorCode)
				switch {
				case errors.Is(err, kafka.OffsetOutOfRange) && part.LogStartOffset >= 0 && p.offset < part.LogStartOffset:
					r.log.Warn("offset below the log's start; skipping to it", "partition", p.id,
						"offset", p.offset, "first", part.LogStartOffset)
					p.offset = part.LogStartOffset
				case errors.Is(err, kafka.OffsetOutOfRange):
					// Past the log's end (a broker brought back from an
					// older state): wait for the log to get there.
					r.log.Warn("offset past the log's end; waiting for it", "partition", p.id, "offset", p.offset)
					p.parked = time.Now().Add(time.Second)
				default:
					failed = cmp.Or(failed, fmt.Errorf("fetch partition %d: %w", p.id, err))
				}
				continue
			}
			got, err := readRecords(r.topic, part, p)
			msgs = append(msgs, got...)
			if err != nil {
				failed = cmp.Or(failed, err)
			}
		}
	}
	return msgs, failed
}

// readRecords returns a partition's fetched records from p's offset on
// (a fetch may start inside a batch that holds older ones) and moves the
// offset past them.
func readRecords(topic string, part fetchAPI.ResponsePartition, p *partitionState) ([]kafka.Message, error) {
	if part.RecordSet.Records == nil {
		return nil, nil
	}
	var msgs []kafka.Message
	for {
		rec, err := part.RecordSet.Records.ReadRecord()
		if err != nil {
			if errors.Is(err, io.EOF) || len(msgs) > 0 {
				// A batch cut at the size limit ends the set; it is
				// fetched again from the next offset.
				return msgs, nil
			}
			return nil, fmt.Errorf("read partition %d at offset %d: %w", p.id, p.offset, err)
		}
		if rec.Offset < p.offset {
			continue
		}
		key, err := readBytes(rec.Key)
		var value []byte
		if err == nil {
			value, err = readBytes(rec.Value)
		}
		if err != nil {
			if len(msgs) > 0 {
				return msgs, nil // fetched again from the next offset
			}
			return nil, fmt.Errorf("read partition %d at offset %d: %w", p.id, rec.Offset, err)
		}
		headers := make([]kafka.Header, len(rec.Headers))
		copy(headers, rec.Headers)
		msgs = append(msgs, kafka.Message{Topic: topic, Partition: p.id, Offset: rec.Offset,
			HighWaterMark: part.HighWatermark, Key: key, Value: value, Headers: headers, Time: rec.Time})
		p.offset = rec.Offset + 1
	}
}

// readBytes copies b out of the fetch's buffers and releases it.
func readBytes(b kafka.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	defer b.Close()
	return kafka.ReadAll(b)
}
