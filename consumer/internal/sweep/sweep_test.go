package sweep_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/consumer/internal/sweep"
	"github.com/seckill/seckill/pkg/kafkatest"
	"github.com/seckill/seckill/pkg/lock"
	"github.com/seckill/seckill/pkg/order"
	"github.com/seckill/seckill/pkg/orderdb"
	"github.com/seckill/seckill/pkg/orderevents"
	"github.com/seckill/seckill/pkg/pipelinetest"
	"github.com/seckill/seckill/pkg/stockredis"
)

// TestSweepOnce runs one sweep in-process against real Redis, MySQL and
// Kafka over one reservation in each situation the sweep tells apart, and
// checks what it did, the reservation's state, and what reached the topic;
// a second sweep right after changes nothing.
func TestSweepOnce(t *testing.T) {
	t.Parallel()
	const after = 2 * time.Second
	cases := []struct {
		name string
		ago  time.Duration // how long ago the reservation was made
		// setup brings MySQL and the claim where the case needs them.
		setup     func(t *testing.T, p *pipelinetest.Pipeline, ev order.Event)
		want      sweep.Stats
		state     string
		published int64
		keyFreed  bool // the idempotency key is gone
	}{
		{"young reservation", 0, nil, sweep.Stats{}, stockredis.StateReserved, 0, false},
		{"not in MySQL, reserved", 2 * after, nil,
			sweep.Stats{Republished: 1}, stockredis.StateReserved, 1, false},
		{"not in MySQL, claimed lately", 2 * after, claim,
			sweep.Stats{}, stockredis.StateClaimed, 0, false},
		{"not in MySQL, claimed long ago", 20 * after, claim,
			sweep.Stats{Republished: 1}, stockredis.StateClaimed, 1, false},
		{"created in MySQL, claimed", 2 * after, func(t *testing.T, p *pipelinetest.Pipeline, ev order.Event) {
			claim(t, p, ev)
			if _, err := p.DB.Fulfil(context.Background(), ev.ItemID, []orderdb.Request{{Event: ev, PayDeadline: time.Now().Add(time.Hour)}}); err != nil {
				t.Fatal(err)
			}
		}, sweep.Stats{Confirmed: 1}, stockredis.StateConfirmed, 0, false},
		{"failed in MySQL for a 503, reserved", 2 * after, abandon(order.ReasonPublishFailed),
			sweep.Stats{Released: 1}, stockredis.StateReleased, 0, true},
		{"failed in MySQL, claimed", 2 * after, func(t *testing.T, p *pipelinetest.Pipeline, ev order.Event) {
			claim(t, p, ev)
			abandon(order.ReasonOutOfStock)(t, p, ev)
		}, sweep.Stats{Released: 1}, stockredis.StateReleased, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
			s := p.NewSale(10, 1)
			ev := p.ReserveEventAt(s, 7, 1, "sweep-key", time.Now().Add(-c.ago))
			if c.setup != nil {
				c.setup(t, p, ev)
			}
			pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: p.Topic})
			defer pub.Close()
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			sw := &sweep.Sweeper{Stock: p.Store, DB: p.DB.DB, Publisher: pub, After: after, Log: log,
				Locker: lock.New(p.Store.Client(), lock.Options{Prefix: p.Prefix, InstanceID: "sweep-test"})}

			st, err := sw.SweepOnce(ctx)
			if err != nil || st != c.want {
				t.Fatalf("sweep: %+v %v, want %+v", st, err, c.want)
			}
			if st, err := sw.SweepOnce(ctx); err != nil || st != (sweep.Stats{}) {
				t.Errorf("second sweep: %+v %v, want nothing done", st, err)
			}
			info, err := p.Store.Reservation(ctx, ev.ItemID, ev.OrderNo)
			if err != nil || info.State != c.state {
				t.Errorf("reservation %+v %v, want %s", info, err, c.state)
			}
			end, _, err := kafkatest.Offsets(ctx, p.Topic, "")
			if err != nil || end[0] != c.published {
				t.Errorf("topic holds %v %v, want %d events", end, err, c.published)
			}
			_, err = p.Store.Client().Get(ctx, p.Store.Keys(ev.ItemID).Idem(ev.UserID, ev.IdempotencyKey)).Result()
			if freed := errors.Is(err, redis.Nil); freed != c.keyFreed || (err != nil && !freed) {
				t.Errorf("idempotency key read: %v, want freed %v", err, c.keyFreed)
			}
		})
	}
}

func claim(t *testing.T, p *pipelinetest.Pipeline, ev order.Event) {
	t.Helper()
	if st, err := p.Store.Claim(context.Background(), ev.ItemID, []string{ev.OrderNo}); err != nil || st[0] != stockredis.StateReserved {
		t.Fatalf("claim: %v %v", st, err)
	}
}

func abandon(reason string) func(t *testing.T, p *pipelinetest.Pipeline, ev order.Event) {
	return func(t *testing.T, p *pipelinetest.Pipeline, ev order.Event) {
		t.Helper()
		if o, err := p.DB.Abandon(context.Background(), ev, reason); err != nil || o.Status != order.Failed {
			t.Fatalf("abandon: %+v %v", o, err)
		}
	}
}
