package fulfil_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/order"
)

// retries counts the router's failed attempts; the rest it records is
// dropped.
type retries struct{ n atomic.Int64 }

func (*retries) Batch(int, time.Duration) {}
func (*retries) Events(map[string]int)    {}
func (r *retries) Retry()                 { r.n.Add(1) }
func (*retries) CommitFailed()            {}
func (*retries) FetchFailed()             {}
func (*retries) DeadLettered()            {}
func (*retries) Lag(int, int64)           {}

// TestStuckPartitionDoesNotStallOthers runs the router and the handler
// in-process on a two-partition topic, with one item per partition. The
// first item's item_stock row is held by another transaction, so each
// attempt at its events fails (a lock wait timeout); the second item's
// orders are created and its partition committed meanwhile, also while a
// steady stream of events keeps coming for the stuck item. Once the row is
// free, the first item's orders are created too.
func TestStuckPartitionDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	topic := kafkatest.NewTopic(t, 2)
	group := kafkatest.Name("g")

	partOf := func(item int64) int {
		return (&kafka.Hash{}).Balance(kafka.Message{Key: orderevents.ItemKey(item)}, 0, 1)
	}
	stuck := e.newSale(300, 1)
	healthy := e.newSale(100, 1)
	for partOf(healthy.item) == partOf(stuck.item) {
		healthy = e.newSale(100, 1)
	}
	unlock := e.lockItem(stuck.item)

	pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: topic})
	defer pub.Close()
	const n = 5
	var stuckNos, healthyNos []string
	for u := int64(1); u <= n; u++ {
		for _, s := range []sale{stuck, healthy} {
			ev := e.reserve(s, u, 1)
			if err := pub.Publish(ctx, ev); err != nil {
				t.Fatal(err)
			}
			if s == stuck {
				stuckNos = append(stuckNos, ev.OrderNo)
			} else {
				healthyNos = append(healthyNos, ev.OrderNo)
			}
		}
	}

	m := &retries{}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	router := orderevents.NewRouter(orderevents.RouterConfig{Brokers: kafkatest.Brokers(), Topic: topic, GroupID: group,
		DrainTimeout: 5 * time.Second}, e.handler, m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go func() { done <- router.Run(rctx) }()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("router: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("router did not stop within 30s of shutdown")
		}
	}()

	created := func(nos []string) int {
		got, err := e.db.Orders.Orders(ctx, nos)
		if err != nil {
			t.Fatal(err)
		}
		c := 0
		for _, o := range got {
			if o.Status == order.Created {
				c++
			}
		}
		return c
	}
	// committed reads the group's offsets; a broker that is not yet the
	// group's coordinator (Kafka just started) is asked again.
	committed := func() (end, done map[int]int64) {
		waittest.Until(t, 30*time.Second, "the group's offsets to be readable", func() bool {
			var err error
			end, done, err = kafkatest.Offsets(ctx, topic, group)
			return err == nil
		})
		return end, done
	}
	// The healthy item's orders are created and committed while the stuck
	// item's events fail again and again.
	waittest.Until(t, 30*time.Second, "the healthy item's orders created and its partition committed", func() bool {
		end, done := committed()
		return created(healthyNos) == n && done[partOf(healthy.item)] == end[partOf(healthy.item)]
	})
	waittest.Until(t, 30*time.Second, "the stuck item's events retried twice", func() bool { return m.n.Load() >= 2 })
	if c := created(stuckNos); c != 0 {
		t.Fatalf("%d orders of the locked item created while its row was locked", c)
	}
	if end, done := committed(); done[partOf(stuck.item)] == end[partOf(stuck.item)] {
		t.Fatalf("the stuck partition was committed (%d of %d) before its orders were written", done[partOf(stuck.item)], end[partOf(stuck.item)])
	}

	// A steady stream to the stuck item, one event at a time, with a
	// healthy order now and then: the healthy ones still get through.
	const stream, every = 150, 10
	for u := int64(100); u < 100+stream; u++ {
		ev := e.reserve(stuck, u, 1)
		if err := pub.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
		stuckNos = append(stuckNos, ev.OrderNo)
		if u%every == 0 {
			ev := e.reserve(healthy, u, 1)
			if err := pub.Publish(ctx, ev); err != nil {
				t.Fatal(err)
			}
			healthyNos = append(healthyNos, ev.OrderNo)
		}
	}
	waittest.Until(t, 30*time.Second, "the healthy orders among the stream created", func() bool {
		return created(healthyNos) == len(healthyNos)
	})
	if c := created(stuckNos); c != 0 {
		t.Fatalf("%d orders of the locked item created while its row was locked", c)
	}

	unlock()
	waittest.Until(t, 30*time.Second, "the stuck item's orders created and its partition committed once the row is free", func() bool {
		end, done := committed()
		return created(stuckNos) == len(stuckNos) && done[partOf(stuck.item)] == end[partOf(stuck.item)]
	})
	for s, want := range map[sale]int64{stuck: 300 - int64(len(stuckNos)), healthy: 100 - int64(len(healthyNos))} {
		if st, err := e.db.Activities.ItemStock(ctx, s.item); err != nil || st != want {
			t.Errorf("item %d MySQL stock %d %v, want %d", s.item, st, err, want)
		}
	}
}
