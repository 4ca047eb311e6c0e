// Package webhooks is the shop's webhook endpoints: their registration by
// an operator (Service), the fan-out of each published event to the
// endpoints that want it (Fanout, run by the relay in the unit that marks
// the event published), and the delivery (Dispatcher): signed POSTs, as
// Standard Webhooks has them, retried on a schedule for more than a day,
// each order's events in seq order, an endpoint that fails for a day
// turned off.
package webhooks

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// Store is the endpoints and their deliveries in MySQL (*orderdb.Webhooks).
type Store interface {
	Create(ctx context.Context, e hook.Endpoint, secret string) (hook.Endpoint, error)
	Endpoint(ctx context.Context, id int64) (hook.Endpoint, error)
	Endpoints(ctx context.Context, enabledOnly bool) ([]hook.Endpoint, error)
	Update(ctx context.Context, e hook.Endpoint) error
	Delete(ctx context.Context, id int64) error
	Rotate(ctx context.Context, id int64, secret string, oldUntil time.Time) error
	Secrets(ctx context.Context, id int64, now time.Time) ([]hook.Secret, error)
	Deliveries(ctx context.Context, id int64, state hook.State, before int64, limit int) ([]hook.Delivery, error)
	EventsSince(ctx context.Context, since time.Time, after int64, limit int) ([]outbox.Event, int64, error)
	Requeue(ctx context.Context, id int64, evs []outbox.Event) error
}

// Service is what an operator does with endpoints.
type Service struct {
	Store Store
	// CheckURL refuses an endpoint deliveries may not reach (a loopback or
	// private address unless the setting allows them; webhook.CheckURL).
	CheckURL func(ctx context.Context, raw string) error
	// NewSecret makes a signing secret (webhook.NewSecret).
	NewSecret func() (string, error)
	Now       func() time.Time
}

// Registration is an endpoint as the operator asks for it.
type Registration struct {
	URL         string
	Events      []string
	Description string
}

func (s *Service) check(ctx context.Context, r Registration) error {
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return order.Errorf(order.ErrInvalidArgument, "url must be an absolute http or https URL")
	}
	if len(r.URL) > 2048 {
		return order.Errorf(order.ErrInvalidArgument, "url is longer than 2048 bytes")
	}
	if len(r.Description) > 255 {
		return order.Errorf(order.ErrInvalidArgument, "description is longer than 255 bytes")
	}
	if err := hook.CheckEvents(r.Events); err != nil {
		return err
	}
	if err := s.CheckURL(ctx, r.URL); err != nil {
		return order.Errorf(order.ErrInvalidArgument, "url: %v", err)
	}
	return nil
}

// Register adds an endpoint, on, with a new secret, and returns both: the
// secret is shown this once.
func (s *Service) Register(ctx context.Context, r Registration) (hook.Endpoint, string, error) {
	if err := s.check(ctx, r); err != nil {
		return hook.Endpoint{}, "", err
	}
	secret, err := s.NewSecret()
	if err != nil {
		return hook.Endpoint{}, "", err
	}
	e, err := s.Store.Create(ctx, hook.Endpoint{URL: r.URL, Events: dedupe(r.Events), Description: r.Description}, secret)
	return e, secret, err
}

func dedupe(patterns []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range patterns {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// List returns every endpoint.
func (s *Service) List(ctx context.Context) ([]hook.Endpoint, error) {
	return s.Store.Endpoints(ctx, false)
}

// Get returns endpoint id.
func (s *Service) Get(ctx context.Context, id int64) (hook.Endpoint, error) {
	return s.Store.Endpoint(ctx, id)
}

// Change is a change to an endpoint: each field that is set.
type Change struct {
	URL         *string
	Events      []string
	Description *string
	Enabled     *bool
}

// Update changes endpoint id. Turning it on clears its failures (its
// deliveries pending go on from where they were); turning it off stops
// its deliveries, and events published while it is off are not queued
// for it (a replay sends them).
func (s *Service) Update(ctx context.Context, id int64, c Change) (hook.Endpoint, error) {
	if c.URL == nil && c.Events == nil && c.Description == nil && c.Enabled == nil {
		return hook.Endpoint{}, order.Errorf(order.ErrInvalidArgument, "give at least one of url, events, description, enabled")
	}
	e, err := s.Store.Endpoint(ctx, id)
	if err != nil {
		return e, err
	}
	r := Registration{URL: e.URL, Events: e.Events, Description: e.Description}
	if c.URL != nil {
		r.URL = *c.URL
	}
	if c.Events != nil {
		r.Events = c.Events
	}
	if c.Description != nil {
		r.Description = *c.Description
	}
	if c.URL != nil || c.Events != nil || c.Description != nil {
		if err := s.check(ctx, r); err != nil {
			return e, err
		}
	}
	e.URL, e.Events, e.Description = r.URL, dedupe(r.Events), r.Description
	if c.Enabled != nil && *c.Enabled != e.Enabled {
		e.Enabled = *c.Enabled
		e.FailingSince = nil
		if e.Enabled {
			e.DisabledReason, e.DisabledAt = "", nil
		} else {
			now := s.Now().UTC()
			e.DisabledReason, e.DisabledAt = hook.ByOperator, &now
		}
	}
	if err := s.Store.Update(ctx, e); err != nil {
		return e, err
	}
	return s.Store.Endpoint(ctx, id)
}

// Delete removes endpoint id and its deliveries.
func (s *Service) Delete(ctx context.Context, id int64) error {
	return s.Store.Delete(ctx, id)
}

// MaxOverlap bounds how long a rotated-out secret may go on signing.
const MaxOverlap = 7 * 24 * time.Hour

// Rotate gives endpoint id a new secret and returns it; the secrets it
// had sign beside it for overlap, then stop (0: they stop now).
func (s *Service) Rotate(ctx context.Context, id int64, overlap time.Duration) (string, time.Time, error) {
	if overlap < 0 || overlap > MaxOverlap {
		return "", time.Time{}, order.Errorf(order.ErrInvalidArgument, "the overlap is between 0 and %s", MaxOverlap)
	}
	secret, err := s.NewSecret()
	if err != nil {
		return "", time.Time{}, err
	}
	until := s.Now().UTC().Add(overlap)
	return secret, until, s.Store.Rotate(ctx, id, secret, until)
}

// MaxList bounds a page of deliveries.
const MaxList = 200

// Deliveries lists endpoint id's deliveries, newest first, with their
// attempts: those in state ("" any) before the delivery before (0: from
// the newest), at most limit.
func (s *Service) Deliveries(ctx context.Context, id int64, state hook.State, before int64, limit int) ([]hook.Delivery, error) {
	switch state {
	case "", hook.Pending, hook.Delivered, hook.GaveUp:
	default:
		return nil, order.Errorf(order.ErrInvalidArgument, "state is pending, delivered or failed")
	}
	if limit < 1 || limit > MaxList {
		return nil, order.Errorf(order.ErrInvalidArgument, "limit is between 1 and %d", MaxList)
	}
	if _, err := s.Store.Endpoint(ctx, id); err != nil {
		return nil, err
	}
	return s.Store.Deliveries(ctx, id, state, before, limit)
}

// replayPage is how many events a replay queues in one write.
const replayPage = 1000

// Replay queues again, for endpoint id, every event it wants written at
// or after since (delivered or not, and those published before it was
// registered or while it was off), and returns how many. Each is sent
// again with its id; the endpoint deduplicates.
func (s *Service) Replay(ctx context.Context, id int64, since time.Time) (int, error) {
	if since.IsZero() {
		return 0, order.Errorf(order.ErrInvalidArgument, "since is required")
	}
	if since.After(s.Now()) {
		return 0, order.Errorf(order.ErrInvalidArgument, "since is in the future")
	}
	e, err := s.Store.Endpoint(ctx, id)
	if err != nil {
		return 0, err
	}
	total := 0
	var after int64
	for {
		evs, last, err := s.Store.EventsSince(ctx, since, after, replayPage)
		if err != nil {
			return total, err
		}
		var wanted []outbox.Event
		for _, ev := range evs {
			if e.Wants(ev.Type) {
				wanted = append(wanted, ev)
			}
		}
		if err := s.Store.Requeue(ctx, id, wanted); err != nil {
			return total, err
		}
		total += len(wanted)
		if len(evs) < replayPage {
			return total, nil
		}
		after = last
	}
}

// Redacted is u with its query and user info left out (they may carry the
// shop's tokens), for logs.
func Redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a bad URL)"
	}
	return strings.TrimSuffix((&url.URL{Scheme: p.Scheme, Host: p.Host, Path: p.Path}).String(), "/")
}
