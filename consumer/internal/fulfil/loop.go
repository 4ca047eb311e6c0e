package fulfil

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/metrics"
)

// Reader is the part of a kafka-go consumer-group reader the loop uses.
type Reader interface {
	FetchMessage(ctx context.Context) (kafka.Message, error)
	CommitMessages(ctx context.Context, msgs ...kafka.Message) error
}

// LoopConfig tunes batching.
type LoopConfig struct {
	// MaxBatch is the most messages one batch holds (default 2000; at most
	// 4000, so a multi-row insert stays under 65,535 placeholders).
	MaxBatch int
	// Linger is how long to wait for more messages once one arrived
	// (default 5ms).
	Linger time.Duration
	// DrainTimeout bounds finishing the batch in hand after shutdown began.
	DrainTimeout time.Duration
}

// Run fetches batches and processes them until ctx is cancelled. A batch is
// retried, with backoff and jitter, until it is final; only then are its
// offsets committed, so nothing is committed past a message that is not
// done. On shutdown it stops fetching, finishes and commits the batch in
// hand (within DrainTimeout), and returns nil.
func Run(ctx context.Context, r Reader, p *Processor, cfg LoopConfig, log *slog.Logger) error {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 2000
	}
	if cfg.Linger <= 0 {
		cfg.Linger = 5 * time.Millisecond
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	for {
		batch, err := fetchBatch(ctx, r, cfg)
		if len(batch) == 0 {
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				p.Metrics.FetchFailed()
				log.Warn("fetch failed", "err", err)
				sleep(ctx, 200*time.Millisecond)
			}
			continue
		}
		// The batch in hand is finished even when shutdown begins.
		wctx, cancel := drainContext(ctx, cfg.DrainTimeout)
		err = processAndCommit(wctx, r, p, batch, log)
		cancel()
		if err != nil {
			// Only when the drain deadline passed: the batch stays
			// uncommitted and is redelivered to whoever takes over.
			log.Warn("stopping with an uncommitted batch; it will be redelivered", "messages", len(batch), "err", err)
			return nil
		}
	}
}

// drainContext is not cancelled by ctx, but ends DrainTimeout after ctx is.
func drainContext(ctx context.Context, drain time.Duration) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(drain, cancel)
		context.AfterFunc(wctx, func() { t.Stop() })
	})
	return wctx, func() { stop(); cancel() }
}

func fetchBatch(ctx context.Context, r Reader, cfg LoopConfig) ([]kafka.Message, error) {
	m, err := r.FetchMessage(ctx)
	if err != nil {
		return nil, err
	}
	batch := []kafka.Message{m}
	lctx, cancel := context.WithTimeout(ctx, cfg.Linger)
	defer cancel()
	for len(batch) < cfg.MaxBatch {
		m, err := r.FetchMessage(lctx)
		if err != nil {
			break
		}
		batch = append(batch, m)
	}
	return batch, nil
}

func processAndCommit(ctx context.Context, r Reader, p *Processor, batch []kafka.Message, log *slog.Logger) error {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		st, err := p.Process(ctx, batch)
		if err == nil {
			log.Debug("batch fulfilled", "messages", len(batch), "created", st.Created, "failed", st.Failed,
				"existing", st.Existing, "skipped", st.Skipped, "dead_lettered", st.DeadLettered,
				"took_ms", time.Since(start).Milliseconds())
			p.Metrics.Events(st.Created, st.Failed, st.Existing, st.Skipped)
			break
		}
		p.Metrics.Retry()
		log.Warn("batch failed; retrying", "attempt", attempt+1, "messages", len(batch), "err", err)
		if !sleep(ctx, backoff(attempt)) {
			return ctx.Err()
		}
	}
	for attempt := 0; ; attempt++ {
		err := r.CommitMessages(ctx, batch...)
		if err == nil {
			p.Metrics.Batch(len(batch), time.Since(start))
			recordLag(p.Metrics, batch)
			return nil
		}
		p.Metrics.CommitFailed()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		// The batch is already final, so a commit that keeps failing is
		// not fatal: the next batch's commit covers these offsets, and if
		// the partition moved to another consumer it redelivers them and
		// the work is idempotent.
		log.Warn("commit failed", "attempt", attempt+1, "err", err)
		if attempt >= 5 {
			return nil
		}
		if !sleep(ctx, backoff(attempt)) {
			return ctx.Err()
		}
	}
}

// recordLag sets each partition's lag from the last message of the batch
// in it: the partition's end (HighWaterMark) less that message's offset,
// less one.
func recordLag(m *metrics.Consumer, batch []kafka.Message) {
	if m == nil {
		return
	}
	last := map[int]kafka.Message{}
	for _, msg := range batch {
		if prev, ok := last[msg.Partition]; !ok || msg.Offset > prev.Offset {
			last[msg.Partition] = msg
		}
	}
	for part, msg := range last {
		m.Lag(part, msg.HighWaterMark-msg.Offset-1)
	}
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
