// Package clock is the one clock by which every instance decides a sale's
// window (starts_at, ends_at, an operator's end or cancel): MySQL's, which
// also holds those times and which the consumer checks every order against.
// A process samples it (orderdb.DB.Now) and then advances the sample by Go's
// monotonic clock, so its own wall clock, however far off, decides nothing
// and reading the time costs no round trip.
package clock

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/pkg/foundation/periodic"
)

// Source reads the shared clock once.
type Source func(ctx context.Context) (time.Time, error)

// ResyncEvery is how often Run samples the shared clock again. Between
// samples the time advances by the monotonic clock, whose rate differs from
// the real one by well under 0.1 % (NTP slews at most 500 ppm): a few ms a
// period.
const ResyncEvery = 30 * time.Second

// samples is how many reads one Sync takes; the one with the shortest round
// trip anchors the clock (its error is at most half that round trip).
const samples = 3

// Clock is a process's view of the shared clock.
type Clock struct {
	offset time.Duration
	src    Source
	anchor atomic.Pointer[anchor]
}

type anchor struct {
	at   time.Time // the shared clock's time, wall only
	mono time.Time // time.Now() at that moment (its monotonic reading counts)
	rtt  time.Duration
}

// New returns a clock over src. offset shifts the process's own wall clock
// (Wall); only tests set one (SECKILL_TEST_CLOCK_OFFSET), to play an
// instance whose clock is off.
func New(src Source, offset time.Duration) *Clock {
	return &Clock{src: src, offset: offset}
}

// Wall is the process's own wall clock: time.Now shifted by the test
// offset. Nothing that every instance must agree on is decided by it.
func (c *Clock) Wall() time.Time { return time.Now().Add(c.offset) }

// Now is the shared clock's time: the last sample advanced by the
// monotonic time since it was taken. Before the first Sync it is Wall.
func (c *Clock) Now() time.Time {
	a := c.anchor.Load()
	if a == nil {
		return c.Wall()
	}
	return a.at.Add(time.Since(a.mono))
}

// Sync samples the shared clock and anchors Now at the read with the
// shortest round trip, taking its midpoint. It returns how far the
// process's wall clock is from the shared one (positive: ahead).
func (c *Clock) Sync(ctx context.Context) (time.Duration, error) {
	var best *anchor
	var err error
	for range samples {
		before := time.Now()
		var at time.Time
		if at, err = c.src(ctx); err != nil {
			continue
		}
		rtt := time.Since(before)
		if best == nil || rtt < best.rtt {
			// The source read its clock somewhere within the round trip:
			// most likely near its middle.
			best = &anchor{at: at.Round(0), mono: before.Add(rtt / 2), rtt: rtt}
		}
	}
	if best == nil {
		return 0, fmt.Errorf("read the shared clock: %w", err)
	}
	c.anchor.Store(best)
	return c.Wall().Sub(c.Now()), nil
}

// Run samples the shared clock every ResyncEvery until ctx ends. A failed
// sample keeps the last anchor, which the monotonic clock keeps advancing:
// the shared clock being unreachable stops nothing.
func (c *Clock) Run(ctx context.Context, log *slog.Logger) {
	periodic.Every(ctx, ResyncEvery, func(ctx context.Context) {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if skew, err := c.Sync(sctx); err != nil {
			log.Warn("shared clock not sampled; the last sample goes on", "err", err)
		} else if skew > time.Second || skew < -time.Second {
			log.Warn("this process's wall clock is off from the shared clock; sale times follow the shared one",
				"skew", skew.String())
		}
	})
}

// Start returns a clock over src, synced once (a program refuses to start
// without the shared clock), and samples it every ResyncEvery until ctx
// ends. It logs the skew of the process's own clock, and the test offset
// when one is set.
func Start(ctx context.Context, src Source, offset time.Duration, log *slog.Logger) (*Clock, error) {
	if offset != 0 {
		log.Warn("SECKILL_TEST_CLOCK_OFFSET is set: this process's own clock is shifted (only tests set it)",
			"offset", offset.String())
	}
	c := New(src, offset)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	skew, err := c.Sync(sctx)
	if err != nil {
		return nil, err
	}
	log.Info("clock anchored to the shared clock", "skew", skew.String())
	go c.Run(ctx, log)
	return c, nil
}
