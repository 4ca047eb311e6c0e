package webhooks

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/periodic"
)

// Deliveries is the endpoints' deliveries as the dispatcher works on them
// (*orderdb.Webhooks).
type Deliveries interface {
	Endpoint(ctx context.Context, id int64) (hook.Endpoint, error)
	Endpoints(ctx context.Context, enabledOnly bool) ([]hook.Endpoint, error)
	Secrets(ctx context.Context, id int64, now time.Time) ([]hook.Secret, error)
	Lease(ctx context.Context, id int64, owner string, ttl time.Duration) (bool, error)
	Release(ctx context.Context, id int64, owner string) error
	Due(ctx context.Context, id int64, limit int) ([]hook.Delivery, error)
	Record(ctx context.Context, outs []hook.Outcome) error
	Health(ctx context.Context, id int64, answered bool, now time.Time) error
	DisableFailing(ctx context.Context, id int64, cutoff time.Time) (bool, error)
}

// Sender posts one signed delivery and returns the endpoint's status, and
// an error unless it is a 2xx (webhook.Sender). Its client's timeout
// bounds it.
type Sender interface {
	Send(ctx context.Context, endpoint, id string, at time.Time, body []byte, secrets []string) (int, error)
}

// Dispatcher sends the endpoints' deliveries. Each endpoint is served by
// one dispatcher at a time (a lease in MySQL), in a goroutine of its own:
// a slow or dead endpoint holds only its own goroutine, never the relay
// or the other endpoints. A round sends up to Batch due deliveries, at
// most Concurrency at once, each the first pending one of its order's
// stream, and records every outcome; a failed one waits its turn in the
// Schedule (and its stream's later events with it).
type Dispatcher struct {
	Store  Deliveries
	Sender Sender
	// Owner names this process in the leases.
	Owner string
	// Every is the pause between looks for endpoints with work.
	Every time.Duration
	// Lease is how long an endpoint stays this process's without a word
	// from it: longer than a round (the Sender's timeout and the writes).
	Lease       time.Duration
	Batch       int
	Concurrency int
	Schedule    hook.Schedule
	// DisableAfter: an endpoint that failed every delivery for this long
	// is turned off.
	DisableAfter time.Duration
	Metrics      *metrics.Webhooks
	Log          *slog.Logger
	Now          func() time.Time

	mu      sync.Mutex
	serving map[int64]bool
}

// Run serves the endpoints until ctx ends, then gives up its leases.
func (d *Dispatcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	d.mu.Lock()
	d.serving = map[int64]bool{}
	d.mu.Unlock()
	periodic.Every(ctx, d.Every, func(ctx context.Context) {
		eps, err := d.Store.Endpoints(ctx, false)
		if err != nil {
			if ctx.Err() == nil {
				d.Log.Warn("webhook dispatcher: read the endpoints", "err", err)
			}
			return
		}
		d.count(eps)
		for _, ep := range eps {
			if !ep.Enabled || !d.start(ep.ID) {
				continue
			}
			wg.Go(func() {
				defer d.stop(ep.ID)
				d.serve(ctx, ep.ID)
			})
		}
	})
	wg.Wait()
}

func (d *Dispatcher) count(eps []hook.Endpoint) {
	var on, off, failing int
	for _, ep := range eps {
		switch {
		case ep.Enabled:
			on++
		case ep.DisabledReason == hook.Failing:
			failing++
		default:
			off++
		}
	}
	d.Metrics.Endpoints(on, off, failing)
}

func (d *Dispatcher) start(id int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.serving[id] {
		return false
	}
	d.serving[id] = true
	return true
}

func (d *Dispatcher) stop(id int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.serving, id)
}

// serve runs rounds for endpoint id while it holds the lease and finds
// work; the next look starts it again.
func (d *Dispatcher) serve(ctx context.Context, id int64) {
	for ctx.Err() == nil {
		held, err := d.Store.Lease(ctx, id, d.Owner, d.Lease)
		if err != nil || !held {
			return
		}
		n, err := d.Round(ctx, id)
		if err != nil && ctx.Err() == nil {
			d.Log.Warn("webhook round failed; its deliveries are tried again", "webhook_id", id, "err", err)
			return
		}
		if n == 0 {
			return
		}
	}
	// Another dispatcher may take the endpoint at once.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = d.Store.Release(rctx, id, d.Owner)
}

// Round sends endpoint id's due deliveries once and records what came of
// them; it returns how many it sent.
func (d *Dispatcher) Round(ctx context.Context, id int64) (int, error) {
	now := d.Now()
	due, err := d.Store.Due(ctx, id, d.Batch)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	ep, err := d.Store.Endpoint(ctx, id)
	if err != nil {
		return 0, err
	}
	keys, err := d.Store.Secrets(ctx, id, now)
	if err != nil {
		return 0, err
	}
	secrets := make([]string, len(keys))
	for i, k := range keys {
		secrets[i] = k.Value
	}
	outs := make([]hook.Outcome, len(due))
	slots := make(chan struct{}, max(d.Concurrency, 1))
	var wg sync.WaitGroup
	for i, dv := range due {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			outs[i] = d.send(ctx, ep.URL, dv, secrets)
		})
	}
	wg.Wait()
	// What was sent is recorded even when ctx ended meanwhile: an
	// unrecorded delivery is sent again.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.Store.Record(wctx, outs); err != nil {
		return len(due), err
	}
	answered := false
	for _, o := range outs {
		answered = answered || o.State == hook.Delivered
	}
	if err := d.Store.Health(wctx, id, answered, now); err != nil || answered {
		return len(due), err
	}
	off, err := d.Store.DisableFailing(wctx, id, now.Add(-d.DisableAfter))
	if off {
		d.Metrics.Disabled()
		d.Log.Error("webhook endpoint turned off: every delivery failed for a day; turn it on again with PATCH /admin/v1/webhooks/{id} and replay what it missed",
			"webhook_id", id, "url", Redacted(ep.URL), "failing_for", d.DisableAfter.String())
	}
	return len(due), err
}

// send posts one delivery and says what came of it.
func (d *Dispatcher) send(ctx context.Context, endpoint string, dv hook.Delivery, secrets []string) hook.Outcome {
	out := hook.Outcome{Delivery: dv}
	start := d.Now()
	body, err := hook.Body(dv.Event)
	status := 0
	if err == nil {
		status, err = d.Sender.Send(ctx, endpoint, dv.Event.ID, start, body, secrets)
	}
	out.Attempt = hook.Attempt{At: start, Duration: d.Now().Sub(start), Status: status}
	if err == nil {
		out.State = hook.Delivered
		d.Metrics.Sent(metrics.WebhookDelivered, d.Now().Sub(dv.Event.Time))
		return out
	}
	out.Attempt.Error = err.Error()
	wait, again := d.Schedule.After(dv.Attempts + 1)
	if !again {
		out.State = hook.GaveUp
		d.Metrics.Sent(metrics.WebhookGaveUp, 0)
		d.Log.Warn("webhook delivery given up after its last try", "webhook_id", dv.WebhookID, "event_id", dv.Event.ID, "err", err)
		return out
	}
	out.State, out.Wait = hook.Pending, wait
	d.Metrics.Sent(metrics.WebhookRetry, 0)
	return out
}
