//go:build soak

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/testkit/hooktest"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/eventcheck"
)

// The shop's side of the run: three webhook endpoints registered for
// every event before the sales, and the run's own events topic. At the end
// the project's checker (pkg/service/eventcheck) holds what each endpoint
// and the topic got to MySQL.

// soakRetrySchedule is the dispatcher's retry schedule in the soak: waits
// of seconds, so that what the faulty endpoint missed is sent again within
// seconds of its coming back, and over three minutes in all, so that a
// delivery first refused when it went down is still tried when it is back
// (TestSoakScheduleIsAPureFunctionOfTheSeed holds it to hookDownFor).
var soakRetrySchedule = "500ms,1s,2s,4s" + strings.Repeat(",8s", 24)

// The endpoints: steady answers 204 at once; flaky answers 500 to about
// half of the deliveries for the whole run (flakyAnswers); hookFaulty is
// down and slow as the schedule says (endpoint-down, endpoint-slow).
var soakHookNames = []string{"steady", "flaky", hookFaulty}

// soakHook is one registered endpoint.
type soakHook struct {
	name  string
	ep    *hooktest.Endpoint
	id    int64
	front *hookFront // flaky and hookFaulty: the address it is registered at
}

// hookFront is the address an endpoint is registered at: a fixed port
// below the ephemeral range (as the api instances'), forwarding to the
// test endpoint, which verifies and records each delivery. Down closes it,
// so connections are refused; Up listens again on the same port, which no
// client connection can have taken meanwhile (a port of hooktest's own,
// from the ephemeral range, could be). fail, when set, turns the
// endpoint's answer to a delivery into a 500 after it was recorded.
type hookFront struct {
	addr string
	to   *url.URL
	fail func(id string) bool

	mu  sync.Mutex
	srv *http.Server
}

func (f *hookFront) up() error {
	var ln net.Listener
	var err error
	// The port may linger a moment after the close.
	if !pollUntil(time.Now().Add(5*time.Second), 100*time.Millisecond, func() bool {
		ln, err = net.Listen("tcp", f.addr)
		return err == nil
	}) {
		return fmt.Errorf("an endpoint's front on %s: %w", f.addr, err)
	}
	px := httputil.NewSingleHostReverseProxy(f.to)
	// A delivery the dispatcher gave up on (endpoint-slow) cancels its
	// forward: no line for it.
	px.ErrorLog = log.New(io.Discard, "", 0)
	px.ModifyResponse = func(r *http.Response) error {
		if f.fail != nil && r.StatusCode/100 == 2 && f.fail(r.Request.Header.Get(webhook.HeaderID)) {
			r.StatusCode, r.Status = http.StatusInternalServerError, "500 Internal Server Error"
		}
		return nil
	}
	srv := &http.Server{Handler: px, ReadHeaderTimeout: 5 * time.Second}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	return nil
}

func (f *hookFront) down() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// flakyAnswers decides which deliveries the flaky endpoint answers 500: a
// seeded coin for each, except that an event already answered 500 three
// times is answered 204 (about 47 % of the answers are 500s). Without the
// cap, the longest run of failures among the run's thousands of events
// (16 in a row in a run) held the drain for a minute of retries; what the
// retries' length must outlast is endpoint-down's to judge.
type flakyAnswers struct {
	mu     sync.Mutex
	r      *rand.Rand
	failed map[string]int
}

func (fa *flakyAnswers) fail(id string) bool {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if fa.failed[id] >= 3 || fa.r.IntN(2) == 0 {
		return false
	}
	fa.failed[id]++
	return true
}

// setupHooks registers the endpoints through api1, each for "*", before
// any sale: an endpoint hears the events published after its registration.
func (s *soak) setupHooks() {
	a := s.apis[0].API()
	for i, name := range soakHookNames {
		h := &soakHook{name: name, ep: hooktest.New(s.t)}
		u := h.ep.URL
		if name != "steady" {
			to, err := url.Parse(h.ep.URL)
			if err != nil {
				s.t.Fatal(err)
			}
			h.front = &hookFront{addr: fmt.Sprintf("127.0.0.1:%d", s.svc.hookPort+i-1), to: &url.URL{Scheme: to.Scheme, Host: to.Host}}
			if name == "flaky" {
				fa := &flakyAnswers{r: rand.New(rand.NewPCG(s.seed, 0xf1a4)), failed: map[string]int{}}
				h.front.fail = fa.fail
			}
			if err := h.front.up(); err != nil {
				s.t.Fatal(err)
			}
			s.t.Cleanup(h.front.down)
			u = "http://" + h.front.addr + "/hooks"
		}
		var out struct {
			WebhookID int64  `json:"webhook_id"`
			Secret    string `json:"secret"`
		}
		code, err := a.Do("POST", "/admin/v1/webhooks", 1, auth.RoleAdmin, nil,
			map[string]any{"url": u, "events": []string{"*"}, "description": "soak " + name}, &out)
		if err != nil || code != 201 {
			s.t.Fatalf("register the %s endpoint: %d %v", name, code, err)
		}
		h.ep.Trust(out.Secret)
		h.id = out.WebhookID
		s.hooks = append(s.hooks, h)
		s.t.Logf("webhook %s: id %d at %s", name, h.id, u)
	}
}

func (s *soak) hook(name string) *soakHook {
	for _, h := range s.hooks {
		if h.name == name {
			return h
		}
	}
	s.t.Fatalf("no webhook endpoint %q", name)
	return nil
}

// startHookFault and endHookFault play the endpoint faults.
func (s *soak) startHookFault(f soakFault) {
	h := s.hook(f.Target)
	switch f.Kind {
	case faultHookDown:
		h.front.down()
	case faultHookSlow:
		h.ep.Answer(func(int) (time.Duration, int) { return hookSlowAnswer, http.StatusNoContent })
	}
}

func (s *soak) endHookFault(f soakFault) {
	h := s.hook(f.Target)
	switch f.Kind {
	case faultHookDown:
		if err := h.front.up(); err != nil {
			s.t.Fatal(err)
		}
	case faultHookSlow:
		h.ep.Answer(nil)
	}
}

// eventsDrain waits (up to 2 minutes) until the outbox is published and
// no delivery to any endpoint is pending: an event still on its way would
// count as missing.
func (s *soak) eventsDrain() (bool, string) {
	ctx := context.Background()
	why := ""
	ok := pollUntil(time.Now().Add(2*time.Minute), 250*time.Millisecond, func() bool {
		s.supervise()
		if shards, err := s.p.DB.Outbox.PendingShards(ctx); err != nil || len(shards) > 0 {
			why = fmt.Sprintf("outbox shards with events not published: %v (%v)", shards, err)
			return false
		}
		for _, h := range s.hooks {
			if ds, err := s.p.DB.Webhooks.Deliveries(ctx, h.id, hook.Pending, 0, 1); err != nil || len(ds) > 0 {
				why = fmt.Sprintf("the %s endpoint has deliveries pending (%v)", h.name, err)
				return false
			}
		}
		return true
	})
	return ok, why
}

// topicEvents reads every event the run's events topic holds, partition by
// partition (an order's events share one).
func (s *soak) topicEvents() ([]outbox.Event, error) {
	var out []outbox.Event
	for part, msgs := range kafkatest.ReadAll(s.t, s.eventsTopic) {
		for _, m := range msgs {
			var e outbox.Event
			if err := json.Unmarshal(m.Value, &e); err != nil {
				return out, fmt.Errorf("partition %d offset %d: not an event: %v", part, m.Offset, err)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// eventPromises checks what each endpoint and the topic got against MySQL
// for the run's sales: every committed event arrived, each stream's in seq
// order, its last stating MySQL's status, each the outbox's; at an
// endpoint, every delivery signed with its secret. A report with a broken
// promise is taken again once after the events drain again: an order the
// closer closed between the arrivals' read and MySQL's (a sale with the
// default window, in a long run) is no finding; what is missing stays
// missing.
func (s *soak) eventPromises(add func(name, detail string, breaches []string)) {
	ctx := context.Background()
	start := time.Now()
	defer func() { s.t.Logf("soak: the events' checks took %v", time.Since(start).Round(time.Millisecond)) }()
	sales := make([]int64, len(s.sales))
	for i, sl := range s.sales {
		sales[i] = sl.ActivityID
	}
	checker := &eventcheck.Checker{Tx: s.p.DB, Store: s.p.DB.Streams}
	check := func(arrivals func() ([]outbox.Event, error)) (eventcheck.Report, error) {
		var rep eventcheck.Report
		var err error
		for try := 0; try < 2; try++ {
			if try > 0 {
				s.eventsDrain()
			}
			var evs []outbox.Event
			if evs, err = arrivals(); err != nil {
				return rep, err
			}
			if rep, err = checker.Check(ctx, sales, evs); err == nil && rep.OK() {
				break
			}
		}
		return rep, err
	}
	breaches := func(rep eventcheck.Report, err error, more ...string) []string {
		br := more
		if err != nil {
			br = append(br, err.Error())
		}
		for _, v := range rep.Violations {
			br = append(br, v.String())
		}
		return br
	}
	for _, h := range s.hooks {
		rep, err := check(func() ([]outbox.Event, error) { return h.ep.Arrivals(), nil })
		var bad []string
		if inv := h.ep.Invalid(); inv != nil {
			for _, line := range strings.Split(inv.Error(), "\n") {
				bad = append(bad, "invalid signature or body: "+line)
			}
		}
		add("events-reach-endpoint-"+h.name, "every committed event reached the endpoint, in order, signed: "+rep.Summary(), breaches(rep, err, bad...))
	}
	rep, err := check(s.topicEvents)
	add("events-reach-topic", "every committed event is on the run's events topic, in order: "+rep.Summary(), breaches(rep, err))
}
