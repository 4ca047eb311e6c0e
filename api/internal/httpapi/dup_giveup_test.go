package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
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
