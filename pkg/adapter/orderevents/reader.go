package orderevents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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

// commitEvery is how often the reader sends the offsets the router marked
// final. The router calls CommitMessages only once a batch's work is final
// (so only final offsets are ever sent), and the reader sends the newest of
// each partition every commitEvery, and once more when its generation ends
// (a rebalance or a close): a commit per batch would be an OffsetCommit
// request every few milliseconds under sustained load, a large share of
// the broker's CPU. What a crash loses is at most commitEvery of
// commits: those events are delivered again, and the handler is idempotent
// (the reservation's state machine and the unique order number).
const commitEvery = 200 * time.Millisecond

const (
	// fetchMaxBytes bounds one fetch's answer, partitionMaxBytes each of
	// its partitions (the broker still returns a first batch larger than
	// these, so a big batch cannot stall a partition).
	fetchMaxBytes     = 32 << 20
	partitionMaxBytes = 8 << 20
	// queueCapacity is how many fetched messages wait for the router at
	// most; past it, fetching waits.
	queueCapacity = 4000
	// commitAttempts is how many times the last commit of a generation is
	// tried.
	commitAttempts = 3
)

// groupReader reads the topic as a member of a consumer group and never
// commits by itself: the router uses FetchMessage, and CommitMessages once
// the work is final.
//
// Membership, assignments, heartbeats and offset commits are kafka-go's
// ConsumerGroup, as in its Reader. The fetches are the reader's own:
// kafka-go's Reader fetches each partition on a connection of its own, so
// a load spread over ten partitions cost the broker and the consumer about
// ten fetches where one spread over one partition cost one, and both spend
// their CPU per fetch, not per event. Here one fetch asks a broker for all
// the assigned partitions it leads, as Kafka's own consumer does.
//
// Where it stands on the events is kafka-go's Reader's too: a generation
// starts each partition at its committed offset (or, with none, at the
// earliest or the newest as RouterConfig.StartLast says), an offset below
// the log's start moves up to it, and one past the log's end waits until
// the log reaches it. Fetch errors are handed to the router through
// FetchMessage, which counts and paces them; the reader backs off and
// tries again, with the cluster's current leaders, until it is closed.
type groupReader struct {
	topic   string
	spacing time.Duration
	cg      *kafka.ConsumerGroup
	tr      *kafka.Transport
	client  *kafka.Client
	addr    net.Addr
	log     *slog.Logger
	failed  func() // a commit failed

	msgs    chan fetched
	commits chan map[int]int64
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	closed  sync.Once

	// For the tests: fetch requests sent, and the partitions they asked
	// for in all.
	fetches, fetchedPartitions atomic.Int64
}

// fetched is one message, or an error to report, for FetchMessage.
type fetched struct {
	m   kafka.Message
	err error
}

// newReader returns a reader that joins cfg.GroupID. Failed commits (each
// retried at the next tick, and the last one of a generation three times)
// are logged and counted through failed.
func newReader(cfg RouterConfig, log *slog.Logger, failed func()) *groupReader {
	start := kafka.FirstOffset
	if cfg.StartLast {
		start = kafka.LastOffset
	}
	tr := &kafka.Transport{MetadataTTL: time.Second, DialTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	r := &groupReader{
		topic:   cfg.Topic,
		spacing: fetchSpacing,
		tr:      tr,
		client:  &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr, Timeout: 10 * time.Second},
		addr:    kafka.TCP(cfg.Brokers...),
		log:     log,
		failed:  failed,
		msgs:    make(chan fetched, queueCapacity),
		commits: make(chan map[int]int64),
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                    cfg.GroupID,
		Brokers:               cfg.Brokers,
		Dialer:                &kafka.Dialer{Timeout: 10 * time.Second},
		Topics:                []string{cfg.Topic},
		HeartbeatInterval:     1 * time.Second,
		SessionTimeout:        6 * time.Second,
		RebalanceTimeout:      10 * time.Second,
		JoinGroupBackoff:      500 * time.Millisecond,
		WatchPartitionChanges: true,
		StartOffset:           start,
	})
	if err != nil {
		// A configuration the group refuses: every fetch says so.
		go func() {
			defer close(r.done)
			for r.report(ctx, fmt.Errorf("consumer group %q: %w", cfg.GroupID, err)) && sleep(ctx, time.Second) {
			}
		}()
		return r
	}
	r.cg = cg
	go r.run()
	return r
}

// FetchMessage returns the next fetched message, or an error the fetching
// met (the reader goes on by itself).
func (r *groupReader) FetchMessage(ctx context.Context) (kafka.Message, error) {
	select {
	case f := <-r.msgs:
		return f.m, f.err
	case <-ctx.Done():
		return kafka.Message{}, ctx.Err()
	case <-r.done:
		return kafka.Message{}, io.EOF
	}
}

// CommitMessages marks msgs final: the reader commits the offset after
// the newest of each partition within commitEvery. It waits for a
// generation, during a rebalance, until ctx ends.
func (r *groupReader) CommitMessages(ctx context.Context, msgs ...kafka.Message) error {
	offsets := map[int]int64{}
	for _, m := range msgs {
		offsets[m.Partition] = max(offsets[m.Partition], m.Offset+1)
	}
	select {
	case r.commits <- offsets:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.done:
		return io.ErrClosedPipe
	}
}

// Close stops fetching, commits what was marked final, leaves the group
// and returns once all of that is done.
func (r *groupReader) Close() error {
	r.closed.Do(func() {
		// The group first: its generation ends (the fetching stops, the
		// last commit goes) and it leaves, with no chance to join again.
		if r.cg != nil {
			r.cg.Close()
		}
		r.cancel()
		<-r.done
		r.tr.CloseIdleConnections()
	})
	return nil
}

// run takes the group's generations one after the other until the reader
// is closed. A generation ends when the group rebalances or the reader
// closes; its fetching stops and its last commit is sent before the next
// one begins.
func (r *groupReader) run() {
	defer close(r.done)
	for {
		gen, err := r.cg.Next(r.ctx)
		if err != nil {
			if r.ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				return
			}
			r.report(r.ctx, fmt.Errorf("joining the consumer group: %w", err))
			continue // the group backs off by itself
		}
		gen.Start(func(ctx context.Context) { r.commitLoop(ctx, gen) })
		gen.Start(func(ctx context.Context) { r.fetchLoop(ctx, gen.Assignments[r.topic]) })
	}
}

// report hands err to FetchMessage; false once ctx ended.
func (r *groupReader) report(ctx context.Context, err error) bool {
	select {
	case r.msgs <- fetched{err: err}:
		return true
	case <-ctx.Done():
		return false
	}
}

// commitLoop gathers the offsets marked final during one generation and
// commits the newest of each partition every commitEvery, and once more
// when the generation ends. A failed commit keeps its offsets for the next.
func (r *groupReader) commitLoop(ctx context.Context, gen *kafka.Generation) {
	tick := time.NewTicker(commitEvery)
	defer tick.Stop()
	stash := map[int]int64{}
	commit := func() error {
		if len(stash) == 0 {
			return nil
		}
		if err := gen.CommitOffsets(map[string]map[int]int64{r.topic: stash}); err != nil {
			r.failed()
			r.log.Warn("offset commit failed; the reader tries again", "err", err)
			return err
		}
		stash = map[int]int64{}
		return nil
	}
	for {
		select {
		case offsets := <-r.commits:
			for p, o := range offsets {
				stash[p] = max(stash[p], o)
			}
		case <-tick.C:
			commit()
		case <-ctx.Done():
			for more := true; more; {
				select {
				case offsets := <-r.commits:
					for p, o := range offsets {
						stash[p] = max(stash[p], o)
					}
				default:
					more = false
				}
			}
			for attempt := 1; commit() != nil && attempt < commitAttempts; attempt++ {
				time.Sleep(100 * time.Millisecond)
			}
			return
		}
	}
}

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
