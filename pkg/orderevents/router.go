package orderevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/order"
)

// Outcome is what a handler made of one event.
type Outcome int

// The outcomes. Every one but Retry is final: the router may commit the
// event's offset once the other events before it are final too.
const (
	// Retry: not final; the router hands the event to the handler again,
	// with backoff. The zero value, so a result the handler left unset
	// retries.
	Retry Outcome = iota
	// Created: a new order.
	Created
	// Failed: MySQL refused the order (out of stock, already purchased).
	Failed
	// Existing: MySQL had the order already (a redelivery).
	Existing
	// Skipped: the API had released the reservation; no order.
	Skipped
	// Poison: the event can never be an order; the router dead-letters it.
	Poison
)

// Result is a handler's answer for one event.
type Result struct {
	Outcome Outcome
	// Err says why: a Poison's reason (written to the dead letter), a
	// Retry's cause (logged).
	Err error
}

// Handler decides events; it knows nothing of Kafka.
type Handler interface {
	// Handle returns one Result per event, in order. Events of one call
	// come from one partition, in offset order.
	Handle(ctx context.Context, events []order.Event) []Result
	// DeadLettered is told of each poison message once the dead-letter
	// topic holds it, with whatever its value decodes to (possibly a zero
	// Event). An error retries the call, never the dead letter.
	DeadLettered(ctx context.Context, e order.Event) error
}

// Metrics is what the router records; *metrics.Consumer implements it.
type Metrics interface {
	Batch(n int, d time.Duration)
	Events(created, failed, existing, skipped int)
	Retry()
	CommitFailed()
	FetchFailed()
	DeadLettered()
	Lag(partition int, lag int64)
}

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
// in offset order, retries what is not final with backoff, dead-letters
// poison, and commits a batch's offsets only once every event of it is
// final. Each partition moves on its own: one whose events keep failing
// is retried while the others commit and go on.
type Router struct {
	cfg     RouterConfig
	reader  *kafka.Reader
	dlq     *kafka.Writer
	handler Handler
	metrics Metrics
	log     *slog.Logger
}

// NewRouter returns a router reading cfg.Topic as group cfg.GroupID; m may
// be nil.
func NewRouter(cfg RouterConfig, h Handler, m Metrics, log *slog.Logger) *Router {
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
	return &Router{
		cfg:     cfg,
		reader:  newReader(cfg, log, m.CommitFailed),
		dlq:     newDLQWriter(cfg.Brokers, cfg.Topic),
		handler: h,
		metrics: m,
		log:     log,
	}
}

// fetchErrors paces the router through fetch errors. kafka-go's partition
// readers queue their errors among the messages, each already spaced by the
// reader's backoff: during a broker outage hundreds pile up, and a fixed
// pause after each would hold the messages behind them back long after the
// brokers are back (with six partitions and a 20 s outage, minutes). So the
// router pauses at most once a second, and logs at most once a second with
// the count.
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
// (kafka-go cannot pause one partition), so a partition stuck for long
// under a steady stream stalls the others only once this much waits.
const maxPendingBatches = 10

// Run consumes until ctx is cancelled, then stops fetching, finishes and
// commits the batches in hand (within DrainTimeout), closes the reader and
// the dead-letter writer, and returns nil. A batch still not final at the
// drain deadline stays uncommitted and is redelivered to whoever takes the
// partition over.
func (r *Router) Run(ctx context.Context) error {
	defer r.dlq.Close()
	defer r.reader.Close()
	queues := map[int]*partitionQueue{}
	var wg sync.WaitGroup
	defer func() {
		for _, q := range queues {
			q.close()
		}
		wg.Wait()
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
				go func() { defer wg.Done(); r.work(ctx, p, q) }()
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

// partitionQueue holds one partition's fetched messages, in offset order,
// until its worker takes them.
type partitionQueue struct {
	limit  int
	mu     sync.Mutex
	msgs   []kafka.Message
	closed bool
	ready  chan struct{} // something to take, or closed
	space  chan struct{} // the worker took some
}

func newPartitionQueue(limit int) *partitionQueue {
	return &partitionQueue{limit: limit, ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push appends msgs, waiting while the queue is over its limit; false when
// ctx ended first.
func (q *partitionQueue) push(ctx context.Context, msgs []kafka.Message) bool {
	for {
		q.mu.Lock()
		if len(q.msgs) < q.limit {
			q.msgs = append(q.msgs, msgs...)
			q.mu.Unlock()
			signal(q.ready)
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-ctx.Done():
			return false
		}
	}
}

// take removes and returns up to n messages, waiting for some; false once
// the queue is closed and empty.
func (q *partitionQueue) take(n int) ([]kafka.Message, bool) {
	for {
		q.mu.Lock()
		if len(q.msgs) > 0 {
			n = min(n, len(q.msgs))
			out := append([]kafka.Message(nil), q.msgs[:n]...)
			q.msgs = q.msgs[n:]
			q.mu.Unlock()
			signal(q.space)
			return out, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, false
		}
		<-q.ready
	}
}

func (q *partitionQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.ready)
}

// work handles one partition's messages, one batch at a time, in order;
// a batch takes whatever waits, up to MaxBatch, so a partition that fell
// behind batches again. Once ctx is cancelled it finishes the batch in
// hand and starts no other.
func (r *Router) work(ctx context.Context, part int, q *partitionQueue) {
	for {
		batch, ok := q.take(r.cfg.MaxBatch)
		if !ok {
			return
		}
		wctx, cancel := drainContext(ctx, r.cfg.DrainTimeout)
		err := r.processAndCommit(wctx, part, batch)
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

func (r *Router) fetchBatch(ctx context.Context) ([]kafka.Message, error) {
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
// retrying only those that are not, then commits the batch's offsets.
func (r *Router) processAndCommit(ctx context.Context, part int, batch []kafka.Message) error {
	start := time.Now()
	state := make([]msgState, len(batch))
	events := make([]order.Event, len(batch))
	reasons := make([]error, len(batch))
	for i, m := range batch {
		e, err := Decode(m.Value)
		if err != nil {
			state[i], reasons[i] = poison, err
			continue
		}
		events[i] = withTrace(e, m)
	}
	var counts [Poison + 1]int
	for attempt := 0; ; attempt++ {
		cause := r.deadLetterAll(ctx, batch, state, reasons)
		var idx []int
		var evs []order.Event
		for i := range batch {
			if state[i] == pending {
				idx = append(idx, i)
				evs = append(evs, events[i])
			}
		}
		if len(evs) > 0 {
			res := r.handler.Handle(ctx, evs)
			for j, i := range idx {
				var out Result
				if j < len(res) {
					out = res[j]
				} else {
					out.Err = errors.New("handler gave no result")
				}
				switch out.Outcome {
				case Retry:
					if cause == nil {
						cause = out.Err
					}
				case Poison:
					state[i], reasons[i] = poison, out.Err
				default:
					state[i] = final
					counts[out.Outcome]++
				}
			}
			if err := r.deadLetterAll(ctx, batch, state, reasons); cause == nil {
				cause = err
			}
		}
		done := 0
		for _, s := range state {
			if s == final {
				done++
			}
		}
		if done == len(batch) {
			r.log.Debug("batch fulfilled", "partition", part, "messages", len(batch), "created", counts[Created],
				"failed", counts[Failed], "existing", counts[Existing], "skipped", counts[Skipped],
				"dead_lettered", counts[Poison], "took_ms", time.Since(start).Milliseconds())
			r.metrics.Events(counts[Created], counts[Failed], counts[Existing], counts[Skipped])
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

// deadLetterAll writes every message in state poison to the dead-letter
// topic, once, and tells the handler of every dead-lettered one; it
// returns the first error.
func (r *Router) deadLetterAll(ctx context.Context, batch []kafka.Message, state []msgState, reasons []error) error {
	var first error
	for i, m := range batch {
		if state[i] == poison {
			if err := r.deadLetter(ctx, m, reasons[i]); err != nil {
				first = firstErr(first, err)
				continue
			}
			state[i] = deadLettered
		}
		if state[i] == deadLettered {
			// Whatever of the event is there (the router's Decode refused
			// it, or the handler did).
			var e order.Event
			_ = json.Unmarshal(m.Value, &e)
			if err := r.handler.DeadLettered(ctx, e); err != nil {
				first = firstErr(first, err)
				continue
			}
			state[i] = final
		}
	}
	return first
}

func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// deadLetter publishes a poison message to the dead-letter topic with the
// reason.
func (r *Router) deadLetter(ctx context.Context, m kafka.Message, cause error) error {
	if cause == nil {
		cause = errors.New("poison")
	}
	dl := DeadLetter{Reason: cause.Error(), Topic: m.Topic, Partition: m.Partition,
		Offset: m.Offset, Original: m.Value, At: time.Now().UTC()}
	b, _ := json.Marshal(dl)
	if err := r.dlq.WriteMessages(ctx, kafka.Message{Key: m.Key, Value: b}); err != nil {
		return fmt.Errorf("dead-letter: %w: %w", order.ErrUnavailable, err)
	}
	r.metrics.DeadLettered()
	r.log.Error("poison message dead-lettered", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "reason", cause.Error())
	return nil
}

// commit hands a final batch's offsets to the reader, which sends them
// within commitEvery (see newReader). It fails only when ctx ends or the
// reader is closed: the batch is then delivered again, to this consumer or
// the next, and the handler is idempotent.
func (r *Router) commit(ctx context.Context, start time.Time, batch []kafka.Message) error {
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

type noMetrics struct{}

func (noMetrics) Batch(int, time.Duration)  {}
func (noMetrics) Events(int, int, int, int) {}
func (noMetrics) Retry()                    {}
func (noMetrics) CommitFailed()             {}
func (noMetrics) FetchFailed()              {}
func (noMetrics) DeadLettered()             {}
func (noMetrics) Lag(int, int64)            {}
