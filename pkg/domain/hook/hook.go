// Package hook is the shop's webhook endpoints and the deliveries of the
// outbox's events to them (docs/events.md): what an endpoint wants, the
// body it is sent, and when a failed delivery is tried again.
package hook

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// Why an endpoint is off (Endpoint.DisabledReason).
const (
	// ByOperator: an operator turned it off.
	ByOperator = "operator"
	// Failing: it failed every delivery for DisableAfter.
	Failing = "failing"
)

// Endpoint is a registered webhook.
type Endpoint struct {
	ID  int64
	URL string
	// Events are the patterns of the types it wants: "*", a family
	// ("order.*") or a type ("order.paid").
	Events      []string
	Description string
	Enabled     bool
	// DisabledReason is ByOperator or Failing while it is off.
	DisabledReason string
	DisabledAt     *time.Time
	// FailingSince is when its current run of failed deliveries began.
	FailingSince *time.Time
	CreatedAt    time.Time
}

// Wants tells whether the endpoint is sent events of type t.
func (e Endpoint) Wants(t outbox.Type) bool {
	for _, p := range e.Events {
		if Match(p, t) {
			return true
		}
	}
	return false
}

// Match tells whether pattern p names type t.
func Match(p string, t outbox.Type) bool {
	if p == "*" || p == string(t) {
		return true
	}
	family, ok := strings.CutSuffix(p, ".*")
	return ok && strings.HasPrefix(string(t), family+".")
}

// families are the first words of the events' types.
var families = []string{"order", "refund", "entry"}

// CheckEvents refuses a list of patterns that names no event or one the
// outbox never writes (a typo would make an endpoint that hears nothing).
func CheckEvents(patterns []string) error {
	if len(patterns) == 0 {
		return order.Errorf(order.ErrInvalidArgument, "events must name at least one pattern, such as \"order.*\" or \"*\"")
	}
	for _, p := range patterns {
		if p == "*" {
			continue
		}
		if family, ok := strings.CutSuffix(p, ".*"); ok {
			if !known(family) {
				return order.Errorf(order.ErrInvalidArgument, "events: %q names no family of events (%s)", p, strings.Join(families, ", "))
			}
			continue
		}
		if !outbox.Type(p).Known() {
			return order.Errorf(order.ErrInvalidArgument, "events: %q is not an event type (docs/events.md lists them)", p)
		}
	}
	return nil
}

func known(family string) bool {
	for _, f := range families {
		if f == family {
			return true
		}
	}
	return false
}

// Body is what a delivery of e posts: its type, time and data (its id
// travels in the webhook-id header, as Standard Webhooks has it).
func Body(e outbox.Event) ([]byte, error) {
	return json.Marshal(struct {
		Type outbox.Type `json:"type"`
		Time time.Time   `json:"timestamp"`
		Data outbox.Data `json:"data"`
	}{e.Type, e.Time.UTC(), e.Data})
}

// Secret is one of an endpoint's signing secrets; ExpiresAt is set on the
// old one while a rotation overlaps.
type Secret struct {
	Value     string
	ExpiresAt *time.Time
}

// State is where a delivery is.
type State string

// The states of a delivery.
const (
	Pending   State = "pending"
	Delivered State = "delivered"
	// GaveUp: every try of the schedule failed; a replay sends it again.
	GaveUp State = "failed"
)

// Delivery is one event on its way to one endpoint.
type Delivery struct {
	ID        int64
	WebhookID int64
	Event     outbox.Event
	Stream    string
	Seq       int
	State     State
	// Attempts is how many times it was sent since it was queued or
	// replayed (a replay starts the retry schedule again).
	Attempts    int
	NextAt      time.Time
	LastStatus  int
	LastError   string
	CreatedAt   time.Time
	DeliveredAt *time.Time
	// Tries are its attempts, oldest first, when read with them.
	Tries []Attempt
}

// Attempt is one send of a delivery: the endpoint's status (0: it gave no
// answer) and the error.
type Attempt struct {
	At       time.Time
	Duration time.Duration
	Status   int
	Error    string
}

// Outcome is what one send of a delivery came to, as the dispatcher
// records it.
type Outcome struct {
	Delivery Delivery
	Attempt  Attempt
	// Wait is how long until it is tried again (when State is Pending).
	Wait  time.Duration
	State State
}

// Schedule is the waits between a delivery's attempts: after the n-th
// failed attempt the next is Schedule[n-1] later; after the last it is
// given up.
type Schedule []time.Duration

// DefaultSchedule tries at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h
// and 10 h later: eight attempts over about 27.6 hours.
var DefaultSchedule = Schedule{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// After returns the wait after attempts failed attempts, with jitter (the
// wait times a factor between 0.8 and 1.2, so endpoints that failed
// together are not all tried again at one instant), and false once the
// schedule is spent.
func (s Schedule) After(attempts int) (time.Duration, bool) {
	if attempts < 1 || attempts > len(s) {
		return 0, false
	}
	d := s[attempts-1]
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64())), true
}

// Span is how long the schedule keeps trying, jitter aside.
func (s Schedule) Span() time.Duration {
	var total time.Duration
	for _, d := range s {
		total += d
	}
	return total
}

// ParseSchedule reads a schedule written as durations with commas
// ("5s,5m,30m").
func ParseSchedule(v string) (Schedule, error) {
	var s Schedule
	for _, part := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("a retry schedule is positive durations with commas (5s,5m,30m): %q", part)
		}
		s = append(s, d)
	}
	return s, nil
}
