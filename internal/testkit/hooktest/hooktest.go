// Package hooktest is a webhook endpoint for tests: it verifies each
// delivery's signature, records every delivery that reached it (answered or
// not, in arrival order), and plays the faults a shop's endpoint has: down
// (connections refused), failing some answers, slow.
package hooktest

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// Endpoint is one test endpoint.
type Endpoint struct {
	URL  string
	addr string

	mu       sync.Mutex
	secrets  []string
	arrivals []outbox.Event
	invalid  []string
	sigs     []string // the webhook-signature header of each arrival
	answer   func(n int) (time.Duration, int)
	refuse   func(outbox.Event) bool
	calls    int
	ln       net.Listener
	srv      *http.Server
}

// New starts an endpoint on loopback that answers 204 to each delivery
// until told otherwise; it stops with the test.
func New(t testing.TB) *Endpoint {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &Endpoint{addr: ln.Addr().String()}
	e.URL = "http://" + e.addr + "/hooks"
	e.serve(ln)
	t.Cleanup(func() { e.Down() })
	return e
}

// Trust sets the secrets the endpoint verifies with (the registration's).
func (e *Endpoint) Trust(secrets ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.secrets = secrets
}

// Answer makes the endpoint wait, then answer, as f says for the n-th
// delivery (from 1); nil: at once, 204.
func (e *Endpoint) Answer(f func(n int) (wait time.Duration, status int)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer = f
}

// Refuse makes the endpoint answer 500 to every delivery of an event f
// names (nil: none), whatever Answer says.
func (e *Endpoint) Refuse(f func(outbox.Event) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refuse = f
}

// Down stops the endpoint: connections are refused until Up.
func (e *Endpoint) Down() {
	e.mu.Lock()
	srv := e.srv
	e.srv = nil
	e.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Up starts it again on the same address.
func (e *Endpoint) Up(t testing.TB) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port may linger a moment after the close
		if ln, err = net.Listen("tcp", e.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restart the endpoint on %s: %v", e.addr, err)
	}
	e.serve(ln)
}

func (e *Endpoint) serve(ln net.Listener) {
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 5 * time.Second}
	e.mu.Lock()
	e.srv, e.ln = srv, ln
	e.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	secrets, answer, refuse := e.secrets, e.answer, e.refuse
	e.calls++
	n := e.calls
	e.mu.Unlock()
	id := r.Header.Get(webhook.HeaderID)
	if err := webhook.Verify(secrets, r.Header, body, time.Now()); err != nil {
		e.mu.Lock()
		e.invalid = append(e.invalid, id+": "+err.Error())
		e.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ev outbox.Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.Type == "" {
		e.mu.Lock()
		e.invalid = append(e.invalid, id+": the body is not an event: "+string(body))
		e.mu.Unlock()
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	ev.ID = id
	e.mu.Lock()
	e.arrivals = append(e.arrivals, ev)
	e.sigs = append(e.sigs, r.Header.Get(webhook.HeaderSignature))
	e.mu.Unlock()
	wait, status := time.Duration(0), http.StatusNoContent
	if answer != nil {
		wait, status = answer(n)
	}
	if refuse != nil && refuse(ev) {
		status = http.StatusInternalServerError
	}
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
	}
	w.WriteHeader(status)
}

// Arrivals is every delivery that reached the endpoint with a valid
// signature, in arrival order, duplicates included.
func (e *Endpoint) Arrivals() []outbox.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]outbox.Event(nil), e.arrivals...)
}

// Signatures is the webhook-signature header of each arrival.
func (e *Endpoint) Signatures() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.sigs...)
}

// Invalid is every delivery refused for its signature or body.
func (e *Endpoint) Invalid() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, s := range e.invalid {
		errs = append(errs, errors.New(s))
	}
	return errors.Join(errs...)
}

// Unique is the arrivals, each id once (its first arrival), in arrival
// order.
func (e *Endpoint) Unique() []outbox.Event {
	seen := map[string]bool{}
	var out []outbox.Event
	for _, ev := range e.Arrivals() {
		if !seen[ev.ID] {
			seen[ev.ID] = true
			out = append(out, ev)
		}
	}
	return out
}
