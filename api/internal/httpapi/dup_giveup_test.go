package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/unit"
	"github.com/seckill/seckill/pkg/service/fulfilment"
)

// gatedPublisher holds each publish until release is closed, then fails it
// as a broker connection cut mid-request does (the outcome unknown).
type gatedPublisher struct {
	entered chan struct{}
	release chan struct{}
}

func (p *gatedPublisher) Publish(ctx context.Context, e order.Event) error {
	p.entered <- struct{}{}
	<-p.release
	return errors.Join(order.ErrUnavailable, errors.New("unexpected EOF"))
}

// downTx is a MySQL that cannot start a transaction: the primary crashed.
type downTx struct{}

func (downTx) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return errors.Join(order.ErrUnavailable, errors.New("driver: bad connection"))
}

// The replicated soak's seed 2 (docs/soak.md): a request repeats an
// Idempotency-Key while the first request with it is still publishing its
// order; that publish then fails while MySQL cannot be written, so the
// first request releases the reservation and answers 503 with no FAILED
// row. The repeat must not have been promised the order (202): on the
// same instance it waits for the first's answer and gets the same 503; on
// another instance it is answered 409 IN_PROGRESS while the first may
// still be placing it. Either way nothing is left reserved and the key buys
// again.
func TestDuplicateWhilePublishingKeepsItsPromise(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	item, act := ts.openSale(t, 5, 1)
	pub := &gatedPublisher{entered: make(chan struct{}, 2), release: make(chan struct{})}
	svc := ts.service(t, pub)
	svc.Tx = downTx{}
	url := ts.serve(t, svc, nil)
	other := ts.serve(t, ts.service(t, pub), nil)
	tok := buyerToken(t, 9)

	first := make(chan response, 1)
	go func() { first <- ts.place(t, url, tok, "k", act) }()
	<-pub.entered
	repeat := make(chan response, 1)
	go func() { repeat <- ts.place(t, url, tok, "k", act) }()
	elsewhere := ts.place(t, other, tok, "k", act)
	time.Sleep(200 * time.Millisecond) // the repeat on the first's instance waits for its answer
	close(pub.release)
	r, same := <-first, <-repeat
	t.Logf("first: %d %s; repeat: %d %s; on another instance: %d %s", r.status, r.body, same.status, same.body, elsewhere.status, elsewhere.body)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("the first request: %d %s, want 503 (its publish failed)", r.status, r.body)
	}
	if same.status != http.StatusServiceUnavailable {
		t.Fatalf("the repeat on the first's instance: %d %s, want the first's 503", same.status, same.body)
	}
	if elsewhere.status != http.StatusConflict || !strings.Contains(string(elsewhere.body), `"IN_PROGRESS"`) {
		t.Fatalf("the repeat on another instance: %d %s, want 409 IN_PROGRESS", elsewhere.status, elsewhere.body)
	}
	if snap := ts.stock(t, item); snap.Stock != 5 || snap.Inflight != 0 {
		t.Fatalf("after the 503: %+v, want nothing reserved", snap)
	}
}

// failingPublisher fails every publish as a broker connection cut
// mid-request does (the outcome unknown: Kafka may have the event), and
// keeps the events it was given.
type failingPublisher struct {
	mu     sync.Mutex
	events []order.Event
}

func (p *failingPublisher) Publish(ctx context.Context, e order.Event) error {
	p.mu.Lock()
	p.events = append(p.events, e)
	p.mu.Unlock()
	return errors.Join(order.ErrUnavailable, errors.New("i/o timeout"))
}

// flakyTx is a MySQL whose next fails transactions fail as a connection
// the server dropped fails them (a restart, the standby taking the
// primary's address): the ones after run on w.
type flakyTx struct {
	w     unit.Work
	fails atomic.Int32
}

func (f *flakyTx) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if f.fails.Add(-1) >= 0 {
		return errors.Join(order.ErrUnavailable, errors.New("driver: bad connection"))
	}
	return f.w.InTx(ctx, fn)
}

// The replicated soak's seed 1 in the fresh-clone CI (docs/soak.md): a
// publish whose outcome is unknown, MySQL's connection dropped by a switch
// of primary when the api records the give-up, the release done in Redis
// only, and the 503 later became an order: Redis lost the release (a
// flush) before a consumer read the event Kafka did have, found no
// reservation and wrote it. The give-up now tries MySQL again: the FAILED
// row is there, and the consumer's MySQL step refuses the event even with
// the reservation gone from Redis.
func TestGiveUpRecordsFailedThroughADroppedConnection(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	item, act := ts.openSale(t, 5, 1)
	pub := &failingPublisher{}
	svc := ts.service(t, pub)
	tx := &flakyTx{w: ts.db}
	tx.fails.Store(2)
	svc.Tx = tx
	url := ts.serve(t, svc, nil)

	r := ts.place(t, url, buyerToken(t, 9), "k", act)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("publish failed: %d %s, want 503", r.status, r.body)
	}
	pub.mu.Lock()
	evs := pub.events
	pub.mu.Unlock()
	if len(evs) != 1 {
		t.Fatalf("%d events published, want 1", len(evs))
	}
	ev := evs[0]
	ctx := context.Background()
	o, err := ts.db.Orders.Order(ctx, ev.OrderNo)
	if errors.Is(err, order.ErrNotFound) {
		t.Errorf("order %s is not in MySQL after the 503: only Redis's release says it was given up", ev.OrderNo)
	} else if err != nil || o.Status != order.Failed || o.FailureReason != "PUBLISH_FAILED" {
		t.Fatalf("order %s in MySQL after the 503: %+v %v, want FAILED PUBLISH_FAILED", ev.OrderNo, o, err)
	}
	if snap := ts.stock(t, item); snap.Stock != 5 || snap.Inflight != 0 {
		t.Fatalf("after the 503: %+v, want nothing reserved", snap)
	}

	// Redis loses the release; Kafka had the event, and a consumer writes it.
	if err := ts.rdb.Del(ctx, ts.store.Keys(reservation.One(item)).Reservation(ev.OrderNo)).Err(); err != nil {
		t.Fatal(err)
	}
	f := &fulfilment.Service{Tx: ts.db, Orders: ts.db.Orders, Events: ts.db.Outbox, Draws: ts.db.Draws}
	out, err := f.Fulfil(ctx, []order.FulfilRequest{{Event: ev, PayDeadline: time.Now().Add(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[ev.OrderNo]; got.Status != order.Failed {
		t.Fatalf("the consumer's write of the 503's event: %+v, want it refused as FAILED", got)
	}
	if _, err := ts.db.Orders.OrderOfKey(ctx, act, "9", "k"); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("the key's order after the event was written: %v, want none", err)
	}
	if st, err := ts.db.Activities.ItemStock(ctx, item); err != nil || st != 5 {
		t.Fatalf("MySQL stock %d %v, want 5", st, err)
	}
	if n := tx.fails.Load(); n != -1 { // two dropped, then the give-up's (the consumer read the order as it was)
		t.Fatalf("%d transactions after the dropped ones, want 1", -n)
	}
}
