// Package unpaid closes unpaid orders whose payment window ended, giving
// their stock and quota back, and finishes releases a crash interrupted.
// Exactly one closer acts at a time across consumer processes (the "closer"
// lock); two overlapping would still be safe, since every close is a
// compare-and-set in MySQL and every release is at most once. An order a
// pass fails on is reported and skipped for a while (package backoff); the
// pass goes on with the others.
package unpaid

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/consumer/internal/backoff"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/periodic"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// Closer runs the timeout close periodically.
type Closer struct {
	Lifecycle *lifecycle.Service
	Locker    *lock.Locker
	// Every is the pause between passes (default 1s).
	Every time.Duration
	// Batch bounds the orders one pass closes (default 500).
	Batch int
	Log   *slog.Logger
	// Metrics counts closed orders; nil counts nothing.
	Metrics *metrics.Closer
	// Backoff holds the orders a pass failed on (default: backoff.New
	// without metrics).
	Backoff *backoff.Records

	once sync.Once
}

func (c *Closer) backoff() *backoff.Records {
	c.once.Do(func() {
		if c.Backoff == nil {
			c.Backoff = backoff.New(metrics.PassCloser, c.Log, nil)
		}
	})
	return c.Backoff
}

// Run closes expired orders every Every until ctx ends.
func (c *Closer) Run(ctx context.Context) {
	every := c.Every
	if every <= 0 {
		every = time.Second
	}
	periodic.Every(ctx, every, func(ctx context.Context) {
		st, err := c.Once(ctx)
		c.Metrics.Closed(st.Closed, st.Finished)
		switch {
		case errors.Is(err, lock.ErrNotAcquired):
			c.backoff().Idle()
		case ctx.Err() != nil:
		case err != nil:
			c.Metrics.Failed()
			c.Log.Warn("closer pass failed", "err", err)
		case st != lifecycle.Stats{}:
			c.Log.Info("unpaid orders closed", "closed", st.Closed, "releases_finished", st.Finished)
		}
	})
}

// Once runs one pass under the lock; lock.ErrNotAcquired means another
// process is closing.
func (c *Closer) Once(ctx context.Context) (lifecycle.Stats, error) {
	l, err := c.Locker.TryLock(ctx, "closer", lock.WithTTL(15*time.Second))
	if err != nil {
		return lifecycle.Stats{}, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	lctx, cancel := l.Context(ctx)
	defer cancel()
	batch := c.Batch
	if batch <= 0 {
		batch = 500
	}
	b := c.backoff()
	defer b.Report()
	return c.Lifecycle.CloseExpired(lctx, time.Now(), batch, b)
}
