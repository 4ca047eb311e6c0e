package orderevents

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/consume"
)

// RouterConfig configures a Router.
type RouterConfig struct {
	Brokers []string
	Topic   string
	GroupID string
	// StartLast makes a new group start at the newest offset; by default
	// it starts at the earliest.
	StartLast bool
	// MaxBatch is the most messages one batch (of one partition) holds
	// (default 2000; at most 4000, so a multi-row insert stays under
	// 65,535 placeholders).
	MaxBatch int
	// Linger is how long to wait for more messages once one arrived
	// (default 5ms).
	Linger time.Duration
	// DrainTimeout bounds finishing the batches in hand after shutdown
	// began (default 30s).
	DrainTimeout time.Duration
}

// Router is the consume loop of a consumer group: it fetches messages,
// splits them by partition, hands each partition's batches to the Handler
// in offset order (the first attempts of several partitions' batches that
// wait at once in one call: see gang), retries what is not final with
// backoff, dead-letters poison, and commits a batch's offsets only once
// every event of it is final. Each partition moves on its own: one whose events keep failing
// is retried while the others commit and go on.
type EventRouter[E any] struct {
	cfg     RouterConfig
	reader  *groupReader
	dlq     *kafka.Writer
	codec   Codec[E]
	handler EventHandler[E]
	metrics Metrics
	log     *slog.Logger
}

// NewRouter returns a router reading cfg.Topic as group cfg.GroupID; m may
// be nil.
func NewRouter(cfg RouterConfig, h Handler, m Metrics, log *slog.Logger) *Router {
	return NewEventRouter(cfg, orderCodec, h, m, log)
}

// Router routes create-order events.
type Router = EventRouter[order.Event]

// NewEventRouter returns a router reading cfg.Topic's events of type E
// with codec as group cfg.GroupID; m may be nil.
func NewEventRouter[E any](cfg RouterConfig, codec Codec[E], h EventHandler[E], m Metrics, log *slog.Logger) *EventRouter[E] {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 2000
	}
	if cfg.Linger <= 0 {
		cfg.Linger = 5 * time.Millisecond
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	if m == nil {
		m = noMetrics{}
	}
	if log == nil {
		log = slog.Default()
	}
	return &EventRouter[E]{
		cfg:     cfg,
		codec:   codec,
		reader:  newReader(cfg, log, m.CommitFailed),
		dlq:     newDLQWriter(cfg.Brokers, cfg.Topic),
		handler: h,
		metrics: m,
		log:     log,
	}
}

// fetchErrors paces the router through fetch errors. The reader queues its
// errors among the messages, each already spaced by its backoff: during a
// broker outage many pile up, and a fixed pause after each would hold the
// messages behind them back long after the brokers are back. So the router
// pauses at most once a second, and logs at most once a second with the
// count.
type fetchErrors struct {
	lastPause, lastLog time.Time
	unlogged           int
}

func (f *fetchErrors) failed(ctx context.Context, log *slog.Logger, err error) {
	f.unlogged++
	if time.Since(f.lastLog) >= time.Second {
		log.Warn("fetch failed", "err", err, "errors", f.unlogged)
		f.lastLog, f.unlogged = time.Now(), 0
	}
	if time.Since(f.lastPause) >= time.Second {
		sleep(ctx, 200*time.Millisecond)
		f.lastPause = time.Now()
	}
}

// maxPendingBatches bounds, in batches of MaxBatch messages, what may wait
// for one partition's worker; past it, fetching waits for that partition
// (the reader cannot pause one partition), so a partition stuck for long
// under a steady stream stalls the others only once this much waits.
const maxPendingBatches = 10

// Run consumes until ctx is cancelled, then stops fetching, finishes and
// commits the batches in hand (within DrainTimeout), closes the reader and
// the dead-letter writer, and returns nil. A batch still not final at the
// drain deadline stays uncommitted and is redelivered to whoever takes the
// partition over.
func (r *EventRouter[E]) Run(ctx context.Context) error {
	defer r.dlq.Close()
	defer r.reader.Close()
	queues := map[int]*partitionQueue{}
	var wg sync.WaitGroup
	g := startGang(r.handler, r.cfg.MaxBatch)
	defer func() {
		for _, q := range queues {
			q.close()
		}
		wg.Wait()
		g.stop()
	}()
	var errs fetchErrors
	for {
		batch, err := r.fetchBatch(ctx)
		if len(batch) == 0 {
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				r.metrics.FetchFailed()
				errs.failed(ctx, r.log, err)
			}
			continue
		}
		for _, part := range byPartition(batch) {
			p := part[0].Partition
			q, ok := queues[p]
			if !ok {
				q = newPartitionQueue(maxPendingBatches * r.cfg.MaxBatch)
				queues[p] = q
				wg.Add(1)
				go func() { defer wg.Done(); r.work(ctx, p, q, g) }()
			}
			if !q.push(ctx, part) {
				// Not started: left uncommitted, redelivered.
				return nil
			}
		}
	}
}

// byPartition splits a batch by partition, keeping each one's order.
func byPartition(batch []kafka.Message) [][]kafka.Message {
	idx := map[int]int{}
	var out [][]kafka.Message
	for _, m := range batch {
		i, ok := idx[m.Partition]
		if !ok {
			i = len(out)
			idx[m.Partition] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], m)
	}
	return out
}

// work handles one partition's messages, one batch at a time, in order;
// a batch takes whatever waits, up to MaxBatch, so a partition that fell
// behind batches again. Once ctx is cancelled it finishes the batch in
// hand and starts no other.
func (r *EventRouter[E]) work(ctx context.Context, part int, q *partitionQueue, g *gang[E]) {
	for {
		batch, ok := q.take(r.cfg.MaxBatch)
		if !ok {
			return
		}
		wctx, cancel := drainContext(ctx, r.cfg.DrainTimeout)
		err := r.processAndCommit(wctx, part, batch, g)
		cancel()
		if err != nil {
			// Only when the drain deadline passed.
			r.log.Warn("stopping with an uncommitted batch; it will be redelivered", "partition", part,
				"messages", len(batch), "err", err)
			return
		}
		if ctx.Err() != nil {
			// Shutdown: the batch in hand is done; what waits is
			// redelivered.
			return
		}
	}
}

// drainContext is not cancelled by ctx, but ends drain after ctx is.
func drainContext(ctx context.Context, drain time.Duration) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(drain, cancel)
		context.AfterFunc(wctx, func() { t.Stop() })
	})
	return wctx, func() { stop(); cancel() }
}

func (r *EventRouter[E]) fetchBatch(ctx context.Context) ([]kafka.Message, error) {
	m, err := r.reader.FetchMessage(ctx)
	if err != nil {
		return nil, err
	}
	batch := []kafka.Message{m}
	lctx, cancel := context.WithTimeout(ctx, r.cfg.Linger)
	defer cancel()
	for len(batch) < r.cfg.MaxBatch {
		m, err := r.reader.FetchMessage(lctx)
		if err != nil {
			break
		}
		batch = append(batch, m)
	}
	return batch, nil
}

// msgState is where one message of a batch stands.
type msgState int

const (
	pending      msgState = iota // to the handler (again)
	poison                       // to be dead-lettered
	deadLettered                 // in the dead-letter topic; the handler not told yet
	final
)

// processAndCommit makes every message of one partition's batch final,
// retrying only those that are not, then commits the batch's offsets. The
// first attempt goes through g, merged with other partitions' batches; a
// retry goes to the handler alone.
func (r *EventRouter[E]) processAndCommit(ctx context.Context, part int, batch []kafka.Message, g *gang[E]) error {
	start := time.Now()
	b := decodeBatch(r.codec, batch)
	for attempt := 0; ; attempt++ {
		cause := r.deadLetterAll(ctx, batch, b.state, b.reasons)
		cause = r.handlePending(ctx, g, attempt, b, cause)
		done := b.final()
		if done == len(batch) {
			if r.log.Enabled(ctx, slog.LevelDebug) {
				r.log.Debug("batch final", batchAttrs(part, len(batch), b.counts, b.deadLetters, time.Since(start))...)
			}
			r.metrics.Events(b.counts)
			break
		}
		if cause == nil {
			cause = errors.New("events not final")
		}
		r.metrics.Retry()
		r.log.Warn("batch failed; retrying", "attempt", attempt+1, "partition", part, "messages", len(batch),
			"pending", len(batch)-done, "err", cause)
		if !sleep(ctx, backoff(attempt)) {
			return ctx.Err()
		}
	}
	return r.commit(ctx, start, batch)
}

// batchWork is where the work on one partition's batch stands.
type batchWork[E any] struct {
	msgs        []kafka.Message
	events      []E // each message's event, decoded
	state       []msgState
	reasons     []error        // why each poison message is one
	deadLetters int            // every poison message is in the dead-letter topic once the batch is final
	counts      map[string]int // Done events by label
}

// decodeBatch decodes the events of batch; a message that does not decode
// is poison.
func decodeBatch[E any](codec Codec[E], batch []kafka.Message) *batchWork[E] {
	b := &batchWork[E]{
		msgs:    batch,
		state:   make([]msgState, len(batch)),
		events:  make([]E, len(batch)),
		reasons: make([]error, len(batch)),
		counts:  map[string]int{},
	}
	for i, m := range batch {
		e, err := codec.Decode(m)
		if err != nil {
			b.state[i], b.reasons[i] = poison, err
			b.deadLetters++
			continue
		}
		b.events[i] = e
	}
	return b
}

// final counts the batch's messages that are final.
func (b *batchWork[E]) final() int {
	done := 0
	for _, s := range b.state {
		if s == final {
			done++
		}
	}
	return done
}

// handlePending hands the batch's pending events to the handler (through
// g on the first attempt, alone on a retry), marks each as its result
// says and dead-letters the new poison. It returns cause or, when that is
// nil, the first reason to retry the batch it met.
func (r *EventRouter[E]) handlePending(ctx context.Context, g *gang[E], attempt int, b *batchWork[E], cause error) error {
	var idx []int
	var evs []E
	for i := range b.msgs {
		if b.state[i] == pending {
			idx = append(idx, i)
			evs = append(evs, b.events[i])
		}
	}
	if len(evs) == 0 {
		return cause
	}
	handle := g.Handle
	if attempt > 0 {
		handle = r.handler.Handle
	}
	res := handle(ctx, evs)
	for j, i := range idx {
		var out consume.Result
		if j < len(res) {
			out = res[j]
		} else {
			out.Err = errors.New("handler gave no result")
		}
		switch out.Outcome {
		case consume.Retry:
			if cause == nil {
				cause = out.Err
			}
		case consume.Poison:
			b.state[i], b.reasons[i] = poison, out.Err
			b.deadLetters++
		default:
			b.state[i] = final
			b.counts[cmp.Or(out.Label, "done")]++
		}
	}
	if err := r.deadLetterAll(ctx, b.msgs, b.state, b.reasons); cause == nil {
		cause = err
	}
	return cause
}

// batchAttrs are the attributes of a final batch's log line: its
// partition and size, its Done events by label (in label order), its dead
// letters and how long it took.
func batchAttrs(part, messages int, counts map[string]int, deadLettered int, took time.Duration) []any {
	attrs := []any{"partition", part, "messages", messages}
	for _, label := range slices.Sorted(maps.Keys(counts)) {
		attrs = append(attrs, label, counts[label])
	}
	return append(attrs, "dead_lettered", deadLettered, "took_ms", took.Milliseconds())
}

// commit hands a final batch's offsets to the reader, which sends them
// within commitEvery (see newReader). It fails only when ctx ends or the
// reader is closed: the batch is then delivered again, to this consumer or
// the next, and the handler is idempotent.
func (r *EventRouter[E]) commit(ctx context.Context, start time.Time, batch []kafka.Message) error {
	if err := r.reader.CommitMessages(ctx, batch...); err != nil {
		return err
	}
	r.metrics.Batch(len(batch), time.Since(start))
	end := batch[len(batch)-1]
	r.metrics.Lag(end.Partition, end.HighWaterMark-end.Offset-1)
	return nil
}

// backoff is exponential from 50ms, capped at 5s, with full jitter on the
// upper half.
func backoff(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(attempt, 7)
	d = min(d, 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
