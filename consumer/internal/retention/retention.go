// Package retention deletes the shop's events and their webhook deliveries
// once they are older than the installation keeps them: a replay reaches
// back that far. One consumer at a time does it (the "outbox-retention"
// lock); two would only delete the same rows.
package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill/seckill/consumer/internal/backoff"
	"github.com/seckill/seckill/consumer/internal/pass"
)

// Store deletes old events and deliveries (*orderdb.Outbox).
type Store interface {
	Purge(ctx context.Context, cutoff time.Time, limit int) (events, deliveries int64, err error)
}

// Purger runs the purge every Every.
type Purger struct {
	Store  Store
	Locker pass.Locker
	// Keep is how long an event and its deliveries are kept.
	Keep  time.Duration
	Every time.Duration
	// Batch bounds each delete (default 5000), so no statement holds
	// locks for long.
	Batch int
	Log   *slog.Logger
	Now   func() time.Time

	runner pass.Runner[[2]int64]
}

func (p *Purger) pass() pass.Pass[[2]int64] {
	return pass.Pass[[2]int64]{
		Name: "outbox-retention", Lock: "outbox-retention", TTL: time.Minute, Every: p.Every, Default: time.Minute,
		Locker: p.Locker, Log: p.Log, Work: p.purge, FailedMsg: "outbox retention pass failed",
		Done: func(n [2]int64, clean bool) {
			if n != ([2]int64{}) {
				p.Log.Info("old events and webhook deliveries deleted", "events", n[0], "deliveries", n[1], "kept", p.Keep.String())
			}
		},
	}
}

// Run purges every Every until ctx ends.
func (p *Purger) Run(ctx context.Context) { p.runner.Run(ctx, p.pass()) }

// Once runs one pass under the lock.
func (p *Purger) Once(ctx context.Context) ([2]int64, error) { return p.runner.Once(ctx, p.pass()) }

func (p *Purger) purge(ctx context.Context, _ *backoff.Records) ([2]int64, error) {
	batch := p.Batch
	if batch <= 0 {
		batch = 5000
	}
	cutoff := p.Now().Add(-p.Keep)
	var total [2]int64
	for ctx.Err() == nil {
		events, deliveries, err := p.Store.Purge(ctx, cutoff, batch)
		total[0] += events
		total[1] += deliveries
		if err != nil || events < int64(batch) && deliveries < int64(batch) {
			return total, err
		}
	}
	return total, ctx.Err()
}
