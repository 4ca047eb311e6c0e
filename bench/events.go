package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/stats"
	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// The events scenario's two runs.
const (
	eventsOffRun = "events (outbox off)"
	eventsOnRun  = "events (outbox on, 1 endpoint)"
)

// eventsScenario measures what the order events cost the pipeline: the
// sustained load with the programs started with SECKILL_OUTBOX=off (no
// events written), then the same load with the outbox on and one webhook
// endpoint registered before the sale, a receiver in the bench that
// verifies each delivery and times it from the event's commit. After the
// second load it waits, up to --events-wait, until the receiver holds
// every event the outbox holds for the sale. The programs are started
// again as they were at the end, so the scenarios after it run as
// before.
func (e *env) eventsScenario(ctx context.Context, sh shape) (runs []*report.Run, ev *report.Events, err error) {
	ev = &report.Events{LastAfterLoad: -1, WaitLimit: e.opts.eventsWait.Seconds()}
	// The relay may still be publishing the events of the sales before
	// (sustained's): neither run should pay for them.
	if ev.EarlierBacklog, err = e.awaitRelay(ctx); err != nil {
		return nil, ev, err
	}
	e.meter.say("events: restarting the programs with SECKILL_OUTBOX=off")
	if err := e.restartPrograms(ctx, true, "SECKILL_OUTBOX=off"); err != nil {
		return nil, ev, fmt.Errorf("restart: %w", err)
	}
	defer func() {
		e.meter.say("events: restarting the programs as they were")
		if rerr := e.restartPrograms(context.WithoutCancel(ctx), true); rerr != nil {
			err = errors.Join(err, fmt.Errorf("restart: %w", rerr))
		}
	}()
	off, offSale, _, err := e.sustainedAs(ctx, eventsOffRun, sh)
	if off != nil {
		runs, ev.Off = append(runs, off), off
	}
	if err != nil {
		return runs, ev, err
	}
	if ev.OffEvents, err = e.outboxEvents(ctx, offSale.item); err != nil {
		return runs, ev, err
	}

	rc, err := startEventReceiver()
	if err != nil {
		return runs, ev, err
	}
	defer rc.close()
	e.meter.say("events: restarting the programs with the outbox on and private webhook addresses allowed")
	if err := e.restartPrograms(ctx, true, "SECKILL_OUTBOX=on", "SECKILL_WEBHOOK_ALLOW_PRIVATE=true"); err != nil {
		return runs, ev, fmt.Errorf("restart: %w", err)
	}
	var hook struct {
		WebhookID int64  `json:"webhook_id"`
		Secret    string `json:"secret"`
	}
	if err := e.adminCall(ctx, http.MethodPost, "/admin/v1/webhooks", map[string]any{
		"url": rc.url, "events": []string{"*"}, "description": "bench " + e.runID,
	}, &hook, http.StatusCreated); err != nil {
		return runs, ev, fmt.Errorf("register the endpoint: %w", err)
	}
	rc.setSecret(hook.Secret)
	var listed struct {
		Webhooks []struct {
			WebhookID int64 `json:"webhook_id"`
			Enabled   bool  `json:"enabled"`
		} `json:"webhooks"`
	}
	if err := e.adminCall(ctx, http.MethodGet, "/admin/v1/webhooks", nil, &listed, http.StatusOK); err != nil {
		return runs, ev, fmt.Errorf("list the endpoints: %w", err)
	}
	for _, w := range listed.Webhooks {
		if w.Enabled && w.WebhookID != hook.WebhookID {
			ev.OtherEndpoints++
		}
	}
	if ev.OtherEndpoints > 0 {
		e.meter.say("events: %d other endpoint(s) registered in this database hear the sale's events too", ev.OtherEndpoints)
	}
	defer func() {
		if derr := e.removeWebhook(context.WithoutCancel(ctx), hook.WebhookID); derr != nil {
			err = errors.Join(err, derr)
		}
	}()

	on, onSale, loadEnd, err := e.sustainedAs(ctx, eventsOnRun, sh)
	if on != nil {
		runs, ev.On = append(runs, on), on
	}
	if err != nil {
		return runs, ev, err
	}
	// An interrupt stops the load, not the counting of what it did.
	ctx = context.WithoutCancel(ctx)
	if ev.Committed, err = e.outboxEvents(ctx, onSale.item); err != nil {
		return runs, ev, err
	}
	e.meter.say("events: waiting up to %s for the endpoint to have the sale's %d events", e.opts.eventsWait, ev.Committed)
	waitStart := time.Now()
	deadline := waitStart.Add(e.opts.eventsWait)
	lastSaid := waitStart
	for {
		got := rc.distinct(onSale.activity)
		if got >= ev.Committed || time.Now().After(deadline) {
			break
		}
		if time.Since(lastSaid) >= 5*time.Second {
			e.meter.say("events: %d of %d delivered", got, ev.Committed)
			lastSaid = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	ev.Waited = time.Since(waitStart).Seconds()
	if err := e.db.Gorm().WithContext(ctx).Raw("SELECT COUNT(*) FROM webhook_deliveries d JOIN orders r ON d.stream = r.order_no "+
		"WHERE d.webhook_id = ? AND d.state = 'pending' AND r.item_id = ?", hook.WebhookID, onSale.item).Scan(&ev.Pending).Error; err != nil {
		return runs, ev, fmt.Errorf("read the pending deliveries: %w", err)
	}
	rc.tally(ev, onSale.activity, loadEnd)
	e.meter.say("events: %d of %d events delivered, commit→delivery P99 %.1f ms, %d duplicates, %d invalid signatures",
		ev.Delivered, ev.Committed, ev.CommitToDelivery.P99Ms, ev.Duplicates, ev.Invalid)
	return runs, ev, nil
}

// removeWebhook removes the endpoint with its deliveries, so nothing is
// sent to the receiver after it stopped. Removing it while its deliveries
// are being sent can meet a MySQL deadlock, which the api answers 503
// ("retry shortly"): it is tried a few times.
func (e *env) removeWebhook(ctx context.Context, id int64) error {
	path := fmt.Sprintf("/admin/v1/webhooks/%d", id)
	var err error
	for range 5 {
		if err = e.adminCall(ctx, http.MethodDelete, path, nil, nil, http.StatusNoContent); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("remove the endpoint: %w", err)
}

// awaitRelay waits, up to --events-wait, until the relay has published
// every event of the bench's sales so far, and returns how many were
// still unpublished when it began.
func (e *env) awaitRelay(ctx context.Context) (int64, error) {
	unpublished := func() (int64, error) {
		var n int64
		if len(e.items) == 0 {
			return 0, nil
		}
		err := e.db.Gorm().WithContext(ctx).Raw("SELECT COUNT(*) FROM outbox_events o JOIN orders r ON o.stream = r.order_no "+
			"WHERE o.published_at IS NULL AND r.item_id IN ?", e.items).Scan(&n).Error
		if err != nil {
			return 0, fmt.Errorf("count the unpublished events: %w", err)
		}
		return n, nil
	}
	first, err := unpublished()
	if err != nil || first == 0 {
		return first, err
	}
	e.meter.say("events: waiting for the relay to publish the %d events of the sales before", first)
	deadline := time.Now().Add(e.opts.eventsWait)
	for n := first; n > 0; {
		if time.Now().After(deadline) {
			return first, fmt.Errorf("the relay left %d events of the sales before unpublished after %s", n, e.opts.eventsWait)
		}
		select {
		case <-ctx.Done():
			return first, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if n, err = unpublished(); err != nil {
			return first, err
		}
	}
	return first, nil
}

// outboxEvents counts the events the outbox holds for the orders of item
// (an order's events are its stream, named by its number).
func (e *env) outboxEvents(ctx context.Context, item int64) (int64, error) {
	var n int64
	err := e.db.Gorm().WithContext(ctx).Raw(
		"SELECT COUNT(*) FROM outbox_events o JOIN orders r ON o.stream = r.order_no WHERE r.item_id = ?", item).Scan(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count the outbox's events of item %d: %w", item, err)
	}
	return n, nil
}

// eventReceiver is the events scenario's webhook endpoint, on loopback:
// it verifies each delivery's signature with the secret the registration
// answered (webhook.Verify), and keeps, per event id, when it first
// arrived and the event's timestamp. It answers 204 to a delivery that
// verifies, 400 to one that does not.
type eventReceiver struct {
	url   string
	srv   *http.Server
	ready chan struct{} // closed once the secret is known
	// secrets is set once, before ready is closed.
	secrets []string

	mu         sync.Mutex
	first      map[string]arrival
	perSale    map[int64]int64 // distinct ids by sale
	deliveries map[int64]int64 // every delivery by sale
	invalid    int64
	unreadable int64
}

// arrival is an event's first delivery.
type arrival struct {
	sale      int64
	at        time.Time // the receiver's clock
	committed time.Time // the event's timestamp: MySQL's clock at the commit
}

func startEventReceiver() (*eventReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	rc := &eventReceiver{url: "http://" + ln.Addr().String() + "/events", ready: make(chan struct{}),
		first: map[string]arrival{}, perSale: map[int64]int64{}, deliveries: map[int64]int64{}}
	rc.srv = &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rc.srv.Serve(ln) }()
	return rc, nil
}

// setSecret gives the receiver the endpoint's secret; deliveries wait
// for it.
func (rc *eventReceiver) setSecret(secret string) {
	rc.secrets = []string{secret}
	close(rc.ready)
}

func (rc *eventReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	select {
	case <-rc.ready:
	case <-r.Context().Done():
		return
	}
	if err := webhook.Verify(rc.secrets, r.Header, body, at); err != nil {
		rc.mu.Lock()
		rc.invalid++
		rc.mu.Unlock()
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	var ev outbox.Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.Time.IsZero() {
		rc.mu.Lock()
		rc.unreadable++
		rc.mu.Unlock()
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	id := r.Header.Get(webhook.HeaderID)
	rc.mu.Lock()
	rc.deliveries[ev.Data.SaleID]++
	if _, seen := rc.first[id]; !seen {
		rc.first[id] = arrival{sale: ev.Data.SaleID, at: at, committed: ev.Time}
		rc.perSale[ev.Data.SaleID]++
	}
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// distinct is how many distinct events of sale arrived.
func (rc *eventReceiver) distinct(sale int64) int64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.perSale[sale]
}

// tally fills ev with what arrived of sale's events, timing the last
// first delivery from loadEnd.
func (rc *eventReceiver) tally(ev *report.Events, sale int64, loadEnd time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	h := stats.NewHistogram()
	var last time.Time
	for _, a := range rc.first {
		if a.sale != sale {
			continue
		}
		// One clock (MySQL's and the bench's run on this machine); a
		// delivery cannot precede its commit, so anything below 0 is
		// the clocks' rounding.
		stats.Record(h, max(a.at.Sub(a.committed), 0))
		if a.at.After(last) {
			last = a.at
		}
	}
	ev.CommitToDelivery = stats.Summarize(h)
	ev.Delivered, ev.Deliveries = rc.perSale[sale], rc.deliveries[sale]
	ev.Duplicates = ev.Deliveries - ev.Delivered
	for s, n := range rc.deliveries {
		if s != sale {
			ev.OtherSales += n
		}
	}
	ev.Invalid, ev.Unreadable = rc.invalid, rc.unreadable
	if !last.IsZero() {
		ev.LastAfterLoad = last.Sub(loadEnd).Seconds()
	}
}

func (rc *eventReceiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = rc.srv.Shutdown(ctx)
}
