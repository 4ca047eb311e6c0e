package orderevents_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/consume"
)

// handlerFunc adapts a function to orderevents.Handler and records the
// dead-letter calls.
type handlerFunc struct {
	handle func(ctx context.Context, events []order.Event) []consume.Result
	mu     sync.Mutex
	dead   []order.Event
}

func (h *handlerFunc) Handle(ctx context.Context, events []order.Event) []consume.Result {
	return h.handle(ctx, events)
}

func (h *handlerFunc) DeadLettered(_ context.Context, e order.Event) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dead = append(h.dead, e)
	return nil
}

func validEvent(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(order.Event{Version: order.EventVersion, OrderNo: order.NewNumberGenerator().Next(3),
		IdempotencyKey: "k", UserID: "1", ItemID: 3, ActivityID: 1, Quantity: 1, ReservedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startRouter runs a router on topic as group; stop cancels it and returns
// how long Run took to return.
func startRouter(t *testing.T, topic, group string, h orderevents.Handler, drain time.Duration) (stop func() time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := orderevents.NewRouter(orderevents.RouterConfig{Brokers: kafkatest.Brokers(), Topic: topic, GroupID: group,
		DrainTimeout: drain}, h, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var took time.Duration
	stop = func() time.Duration {
		once.Do(func() {
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("Run did not return within 30s of shutdown")
			}
			took = time.Since(start)
		})
		return took
	}
	t.Cleanup(func() { stop() })
	return stop
}

func committed(t *testing.T, topic, group string) (end, done int64) {
	t.Helper()
	e, c, err := kafkatest.Offsets(context.Background(), topic, group)
	if err != nil {
		t.Fatal(err)
	}
	return e[0], c[0]
}

// A poison message and a valid event in one batch: the valid one fails
// three times before it is final. The poison is dead-lettered once, the
// handler told once, only the valid event is retried, and nothing is
// committed until both are final.
func TestRouterRetriesOnlyWhatIsNotFinalAndCommitsAfter(t *testing.T) {
	t.Parallel()
	topic := kafkatest.NewTopic(t, 1)
	kafkatest.Write(t, topic, kafka.Message{Value: []byte("not an event")}, kafka.Message{Value: validEvent(t)})
	group := kafkatest.Name("g")
	var (
		mu      sync.Mutex
		calls   []int   // events per call
		retried []int64 // the committed offset seen at each failed call
	)
	h := &handlerFunc{handle: func(_ context.Context, evs []order.Event) []consume.Result {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, len(evs))
		if len(calls) <= 3 {
			_, c := committed(t, topic, group)
			retried = append(retried, c)
			return []consume.Result{{Outcome: consume.Retry, Err: errors.New("not yet")}}
		}
		return []consume.Result{{Outcome: consume.Done}}
	}}
	startRouter(t, topic, group, h, 5*time.Second)

	waittest.Until(t, 30*time.Second, "both messages committed", func() bool {
		end, done := committed(t, topic, group)
		return end == 2 && done == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 4 || calls[0] != 1 || calls[3] != 1 || len(retried) != 3 {
		t.Errorf("handler calls with %v events, want 4 calls of the valid event alone", calls)
	}
	for i, c := range retried {
		if c != 0 {
			t.Errorf("after failed call %d the committed offset was %d, want 0", i+1, c)
		}
	}
	dlqEnd, _ := committed(t, orderevents.DLQTopic(topic), "")
	if dlqEnd != 1 {
		t.Errorf("dead-letter topic holds %d messages, want 1", dlqEnd)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.dead) != 1 {
		t.Errorf("handler told of %d dead letters, want 1", len(h.dead))
	}
}

// Shutdown while the handler works on a batch: the router waits for it and
// commits it before Run returns.
func TestRouterFinishesTheBatchInHandOnShutdown(t *testing.T) {
	t.Parallel()
	topic := kafkatest.NewTopic(t, 1)
	kafkatest.Write(t, topic, kafka.Message{Value: validEvent(t)})
	started, release := make(chan struct{}), make(chan struct{})
	h := &handlerFunc{handle: func(_ context.Context, evs []order.Event) []consume.Result {
		close(started)
		<-release
		return []consume.Result{{Outcome: consume.Done}}
	}}
	group := kafkatest.Name("g")
	stop := startRouter(t, topic, group, h, 10*time.Second)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never got the event")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Run returned while the handler still held the batch")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	<-stopped
	if end, done := committed(t, topic, group); done != end || end != 1 {
		t.Errorf("committed %d of %d after the drain, want all", done, end)
	}
}

// Shutdown while a batch keeps failing: Run returns once the drain timeout
// passed, and the batch stays uncommitted for the next consumer.
func TestRouterGivesUpAtTheDrainTimeout(t *testing.T) {
	t.Parallel()
	topic := kafkatest.NewTopic(t, 1)
	kafkatest.Write(t, topic, kafka.Message{Value: validEvent(t)})
	var once sync.Once
	started := make(chan struct{})
	h := &handlerFunc{handle: func(context.Context, []order.Event) []consume.Result {
		once.Do(func() { close(started) })
		return []consume.Result{{Outcome: consume.Retry, Err: errors.New("down")}}
	}}
	const drain = 500 * time.Millisecond
	group := kafkatest.Name("g")
	stop := startRouter(t, topic, group, h, drain)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never got the event")
	}
	if took := stop(); took < drain || took > drain+6*time.Second {
		t.Errorf("Run returned %v after shutdown, want the drain timeout %v (plus one backoff at most)", took, drain)
	}
	if _, done := committed(t, topic, group); done != 0 {
		t.Errorf("committed offset %d, want 0", done)
	}
}
