package orderevents

import (
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
)

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
