package webhooks

import (
	"context"

	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// Queue is where the fan-out writes deliveries (*orderdb.Webhooks).
type Queue interface {
	Endpoints(ctx context.Context, enabledOnly bool) ([]hook.Endpoint, error)
	Enqueue(ctx context.Context, evs []outbox.Event, targets [][]int64) error
}

// Fanout queues each event the relay publishes for every endpoint on
// that wants it. The relay calls it in the unit that marks the events
// published, so an event is queued exactly when it is marked: a relay
// that dies before the mark publishes and queues again, and a delivery
// already queued stays as it is. An endpoint registered before an event
// committed is in the unit's view of the endpoints, so it gets the event.
type Fanout struct{ Queue Queue }

// Fan queues evs.
func (f *Fanout) Fan(ctx context.Context, evs []outbox.Event) error {
	eps, err := f.Queue.Endpoints(ctx, true)
	if err != nil || len(eps) == 0 {
		return err
	}
	targets := make([][]int64, len(evs))
	for i, e := range evs {
		for _, ep := range eps {
			if ep.Wants(e.Type) {
				targets[i] = append(targets[i], ep.ID)
			}
		}
	}
	return f.Queue.Enqueue(ctx, evs, targets)
}
