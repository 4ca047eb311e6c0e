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
	"log/slog"
	"time"

	"github.com/seckill/seckill/consumer/internal/backoff"
	"github.com/seckill/seckill/consumer/internal/pass"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// Closer runs the timeout close periodically.
type Closer struct {
	Lifecycle *lifecycle.Service
	Locker    pass.Locker
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

	runner pass.Runner[lifecycle.Stats]
}

// pass is the closer's pass: under the "closer" lock, every Every.
func (c *Closer) pass() pass.Pass[lifecycle.Stats] {
	return pass.Pass[lifecycle.Stats]{
		Name: metrics.PassCloser, Lock: "closer", TTL: 15 * time.Second, Every: c.Every, Default: time.Second,
		Locker: c.Locker, Log: c.Log, Records: c.Backoff, Work: c.close,
		FailedMsg: "closer pass failed", Failed: c.Metrics.Failed,
		Done: func(st lifecycle.Stats, clean bool) {
			c.Metrics.Closed(st.Closed, st.Finished)
			if clean && st != (lifecycle.Stats{}) {
				c.Log.Info("unpaid orders closed", "closed", st.Closed, "releases_finished", st.Finished)
			}
		},
	}
}

// Run closes expired orders every Every until ctx ends.
func (c *Closer) Run(ctx context.Context) { c.runner.Run(ctx, c.pass()) }

// Once runs one pass under the lock; lock.ErrNotAcquired means another
// process is closing.
func (c *Closer) Once(ctx context.Context) (lifecycle.Stats, error) {
	return c.runner.Once(ctx, c.pass())
}

// close closes the orders whose payment window ended, at most Batch.
func (c *Closer) close(ctx context.Context, b *backoff.Records) (lifecycle.Stats, error) {
	batch := c.Batch
	if batch <= 0 {
		batch = 500
	}
	return c.Lifecycle.CloseExpired(ctx, time.Now(), batch, b)
}
