package activity

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// cacheRefreshAt is the age at which a request that finds a good copy
// starts reading the activity again in the background (one read at a
// time), still answering from the copy: under steady traffic the copy is
// replaced before it expires, and no request waits for MySQL. Waiting for
// the re-read of an expired copy put a MySQL round trip (milliseconds on a
// busy box) in the way of every request of that moment, once a second.
const cacheRefreshAt = CopyTTL / 2

// Cache is a process's copies of the activities it reads from MySQL (the
// api's intake, the consumer's fulfilment), by id, each trusted for
// CopyTTL. A copy older than cacheRefreshAt is re-read in the background
// while it still answers. Requests for an activity whose copy is missing
// or expired wait for one load between them, so a process reads an
// activity at most about twice a second whatever its request rate. When a
// re-read fails (MySQL down or slow past ReloadTimeout) the last copy is
// kept for another CopyTTL, so a blip of MySQL does not stop the sale, but
// never past MaxStale from the read that gave it: then Get fails with
// order.ErrUnavailable, so a sale ended meanwhile is not sold on. The zero
// value is ready.
type Cache struct {
	m  sync.Map // id -> *cacheEntry
	mu sync.Mutex
}

type cacheEntry struct {
	done chan struct{} // closed when the load ended
	a    Activity
	err  error
	// loaded is when the read that gave a started: the copy is at least
	// that fresh. expires is when a request must read it again.
	loaded, expires time.Time
	refreshing      atomic.Bool // a background re-read of this copy started
}

// fresh reports whether e holds a good copy that has not expired; it waits
// for nothing.
func (e *cacheEntry) fresh(now time.Time) bool {
	select {
	case <-e.done:
		return e.err == nil && now.Before(e.expires)
	default:
		return false
	}
}

// expiry is when a copy read at loaded, and last checked at checked, must
// be read again: CopyTTL after the check, MaxStale
// after the read at the latest.
func expiry(loaded, checked time.Time) time.Time {
	e := checked.Add(CopyTTL)
	if m := loaded.Add(MaxStale); m.Before(e) {
		return m
	}
	return e
}

// Get returns activity id, calling load when no fresh copy is held (a
// failed first load is not remembered; once a copy was held, every read is
// bounded by ReloadTimeout).
func (c *Cache) Get(ctx context.Context, id int64, load func(context.Context, int64) (Activity, error)) (Activity, error) {
	if v, ok := c.m.Load(id); ok {
		e, now := v.(*cacheEntry), time.Now()
		if e.fresh(now) {
			if now.Sub(e.loaded) >= cacheRefreshAt && e.refreshing.CompareAndSwap(false, true) {
				go c.refresh(id, e, load)
			}
			return e.a, nil
		}
	}
	c.mu.Lock()
	var prev *cacheEntry
	if v, ok := c.m.Load(id); ok {
		e := v.(*cacheEntry)
		if e.fresh(time.Now()) {
			c.mu.Unlock()
			return e.a, nil
		}
		select {
		case <-e.done: // expired: load anew below, keeping it in case that fails
			prev = e
		default: // another request is loading it: wait for that load
			c.mu.Unlock()
			select {
			case <-e.done:
				return e.a, e.err
			case <-ctx.Done():
				return Activity{}, ctx.Err()
			}
		}
	}
	e := &cacheEntry{done: make(chan struct{})}
	c.m.Store(id, e)
	c.mu.Unlock()
	lctx, cancel := ctx, context.CancelFunc(func() {})
	if prev != nil {
		// Others wait on this load: the caller going away must not fail it.
		lctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), ReloadTimeout)
	}
	started := time.Now()
	e.a, e.err = load(lctx, id)
	if e.err != nil && lctx.Err() != nil && ctx.Err() == nil {
		// The re-read ran out of its own time: MySQL is slow.
		e.err = fmt.Errorf("read activity %d: %w: %w", id, order.ErrUnavailable, e.err)
	}
	cancel()
	e.loaded, e.expires = started, expiry(started, time.Now())
	if e.err != nil && prev != nil && prev.err == nil {
		// Keep the last copy, as old as it was: it expires for good
		// MaxStale after its own read.
		now := time.Now()
		if now.Sub(prev.loaded) < MaxStale {
			e.a, e.err, e.loaded, e.expires = prev.a, nil, prev.loaded, expiry(prev.loaded, now)
		} else {
			// Too old to sell on. The entry stays (failed), so the next
			// request's read is bounded by ReloadTimeout too.
			e.a, e.err = Activity{}, tooOld(id, prev.loaded, e.err)
		}
		close(e.done)
		return e.a, e.err
	}
	close(e.done)
	if e.err != nil {
		if prev == nil {
			c.m.CompareAndDelete(id, e)
		} // else the failed entry stays, so the next read is bounded too
		return Activity{}, e.err
	}
	return e.a, nil
}

// tooOld is the error of a copy read at loaded, past MaxStale,
// whose re-read failed with cause.
func tooOld(id int64, loaded time.Time, cause error) error {
	return fmt.Errorf("activity %d: its last read is %v old, past %v (re-read: %v): %w",
		id, time.Since(loaded).Round(time.Millisecond), MaxStale, cause, order.ErrUnavailable)
}

// refresh re-reads activity id in the background and puts the new copy in
// place of old, unless something replaced old meanwhile. A failed re-read
// leaves old to expire: the next request then loads as usual, keeping old
// if that fails too.
func (c *Cache) refresh(id int64, old *cacheEntry, load func(context.Context, int64) (Activity, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), ReloadTimeout)
	defer cancel()
	started := time.Now()
	a, err := load(ctx, id)
	if err != nil {
		return
	}
	e := &cacheEntry{done: make(chan struct{}), a: a, loaded: started, expires: expiry(started, time.Now())}
	close(e.done)
	c.m.CompareAndSwap(id, old, e)
}
