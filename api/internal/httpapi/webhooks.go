package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/service/webhooks"
)

// WebhookView is an endpoint in the admin's answers (its secrets never).
type WebhookView struct {
	WebhookID      int64      `json:"webhook_id"`
	URL            string     `json:"url"`
	Events         []string   `json:"events"`
	Description    string     `json:"description"`
	Enabled        bool       `json:"enabled"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	FailingSince   *time.Time `json:"failing_since,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
}

func webhookView(e hook.Endpoint) WebhookView {
	return WebhookView{WebhookID: e.ID, URL: e.URL, Events: e.Events, Description: e.Description, Enabled: e.Enabled,
		DisabledReason: e.DisabledReason, DisabledAt: e.DisabledAt, FailingSince: e.FailingSince, CreatedAt: e.CreatedAt}
}

// CreatedWebhookView is a new endpoint with its secret, shown this once.
type CreatedWebhookView struct {
	WebhookView
	Secret string `json:"secret"`
}

type webhookBody struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description"`
}

// createWebhook registers an endpoint (webhooks.Service.Register).
func (s *Server) createWebhook(c *gin.Context) {
	var b webhookBody
	if !s.decodeOr400(c, &b) {
		return
	}
	e, secret, err := s.webhooks.Register(c.Request.Context(), webhooks.Registration{URL: b.URL, Events: b.Events, Description: b.Description})
	if err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("webhook registered", "request_id", c.GetString(ctxRequestID), "webhook_id", e.ID,
		"url", webhooks.Redacted(e.URL), "events", e.Events)
	c.JSON(http.StatusCreated, CreatedWebhookView{WebhookView: webhookView(e), Secret: secret})
}

// listWebhooks lists the endpoints.
func (s *Server) listWebhooks(c *gin.Context) {
	eps, err := s.webhooks.List(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	out := make([]WebhookView, len(eps))
	for i, e := range eps {
		out[i] = webhookView(e)
	}
	c.JSON(http.StatusOK, gin.H{"webhooks": out})
}

// getWebhook shows one endpoint.
func (s *Server) getWebhook(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	e, err := s.webhooks.Get(c.Request.Context(), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, webhookView(e))
}

type patchWebhookBody struct {
	URL         optional[string]   `json:"url"`
	Events      optional[[]string] `json:"events"`
	Description optional[string]   `json:"description"`
	Enabled     optional[bool]     `json:"enabled"`
}

// patchWebhook changes an endpoint: its URL, events, description, or
// whether it is on (webhooks.Service.Update).
func (s *Server) patchWebhook(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	var b patchWebhookBody
	if !s.decodeOr400(c, &b) {
		return
	}
	if err := refuseNull(field{"url", b.URL}, field{"events", b.Events}, field{"description", b.Description}, field{"enabled", b.Enabled}); err != nil {
		s.fail(c, err)
		return
	}
	var events []string
	if b.Events.Set {
		// Given, even as [], it is checked (an empty list is refused).
		events = append([]string{}, b.Events.Value...)
	}
	e, err := s.webhooks.Update(c.Request.Context(), id, webhooks.Change{URL: b.URL.ptr(), Events: events,
		Description: b.Description.ptr(), Enabled: b.Enabled.ptr()})
	if err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("webhook changed", "request_id", c.GetString(ctxRequestID), "webhook_id", id, "enabled", e.Enabled,
		"url", webhooks.Redacted(e.URL), "events", e.Events)
	c.JSON(http.StatusOK, webhookView(e))
}

// deleteWebhook removes an endpoint and its deliveries.
func (s *Server) deleteWebhook(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	if err := s.webhooks.Delete(c.Request.Context(), id); err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("webhook deleted", "request_id", c.GetString(ctxRequestID), "webhook_id", id)
	c.Status(http.StatusNoContent)
}

type rotateBody struct {
	// OverlapSeconds is how long the secrets it had go on signing
	// (default a day).
	OverlapSeconds optional[int64] `json:"overlap_seconds"`
}

// RotatedView is an endpoint's new secret, shown this once, and until
// when the old one signs beside it.
type RotatedView struct {
	WebhookID      int64     `json:"webhook_id"`
	Secret         string    `json:"secret"`
	PreviousUntil  time.Time `json:"previous_secret_expires_at"`
	OverlapSeconds int64     `json:"overlap_seconds"`
}

// defaultOverlap is how long a rotated-out secret signs unless the
// operator says.
const defaultOverlap = 24 * time.Hour

// rotateWebhook gives an endpoint a new secret (webhooks.Service.Rotate).
func (s *Server) rotateWebhook(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	var b rotateBody
	if c.Request.ContentLength != 0 && !s.decodeOr400(c, &b) {
		return
	}
	if err := refuseNull(field{"overlap_seconds", b.OverlapSeconds}); err != nil {
		s.fail(c, err)
		return
	}
	overlap := defaultOverlap
	if b.OverlapSeconds.Set {
		if b.OverlapSeconds.Value < 0 || b.OverlapSeconds.Value > int64(webhooks.MaxOverlap/time.Second) {
			s.fail(c, order.Errorf(order.ErrInvalidArgument, "overlap_seconds is between 0 and %d", int64(webhooks.MaxOverlap/time.Second)))
			return
		}
		overlap = time.Duration(b.OverlapSeconds.Value) * time.Second
	}
	secret, until, err := s.webhooks.Rotate(c.Request.Context(), id, overlap)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("webhook secret rotated", "request_id", c.GetString(ctxRequestID), "webhook_id", id, "previous_until", until)
	c.JSON(http.StatusOK, RotatedView{WebhookID: id, Secret: secret, PreviousUntil: until, OverlapSeconds: int64(overlap / time.Second)})
}

// AttemptView is one send of a delivery.
type AttemptView struct {
	At         time.Time `json:"at"`
	DurationMs int64     `json:"duration_ms"`
	Status     int       `json:"status"`
	Error      string    `json:"error,omitempty"`
}

// DeliveryView is one event on its way to an endpoint.
type DeliveryView struct {
	DeliveryID    int64         `json:"delivery_id"`
	EventID       string        `json:"event_id"`
	Type          string        `json:"type"`
	Stream        string        `json:"stream"`
	Seq           int           `json:"seq"`
	State         string        `json:"state"`
	Attempts      int           `json:"attempts"`
	NextAttemptAt *time.Time    `json:"next_attempt_at,omitempty"`
	LastStatus    int           `json:"last_status"`
	LastError     string        `json:"last_error,omitempty"`
	CreatedAt     time.Time     `json:"created_at"`
	DeliveredAt   *time.Time    `json:"delivered_at,omitempty"`
	Tries         []AttemptView `json:"attempt_log"`
}

// listDeliveries lists an endpoint's deliveries, newest first, with
// their attempts: ?state=pending|delivered|failed, ?limit (default 50),
// ?before (a delivery_id, for the next page).
func (s *Server) listDeliveries(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	limit, before, ok := s.pageOr400(c, webhooks.MaxList, "a delivery_id")
	if !ok {
		return
	}
	state, named := c.GetQuery("state")
	if named && state == "" {
		s.fail(c, order.Errorf(order.ErrInvalidArgument, "state is pending, delivered or failed"))
		return
	}
	ds, err := s.webhooks.Deliveries(c.Request.Context(), id, hook.State(state), before, limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := make([]DeliveryView, len(ds))
	for i, d := range ds {
		v := DeliveryView{DeliveryID: d.ID, EventID: d.Event.ID, Type: string(d.Event.Type), Stream: d.Stream, Seq: d.Seq,
			State: string(d.State), Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError,
			CreatedAt: d.CreatedAt, DeliveredAt: d.DeliveredAt, Tries: make([]AttemptView, len(d.Tries))}
		if d.State == hook.Pending {
			at := d.NextAt
			v.NextAttemptAt = &at
		}
		for j, a := range d.Tries {
			v.Tries[j] = AttemptView{At: a.At, DurationMs: a.Duration.Milliseconds(), Status: a.Status, Error: a.Error}
		}
		out[i] = v
	}
	page := gin.H{"deliveries": out}
	if len(ds) == limit {
		page["next_before"] = ds[len(ds)-1].ID
	}
	c.JSON(http.StatusOK, page)
}

type replayBody struct {
	Since time.Time `json:"since"`
}

// replayWebhook queues again every event since a time for an endpoint
// (webhooks.Service.Replay).
func (s *Server) replayWebhook(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	var b replayBody
	if !s.decodeOr400(c, &b) {
		return
	}
	n, err := s.webhooks.Replay(c.Request.Context(), id, b.Since)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("webhook replay queued", "request_id", c.GetString(ctxRequestID), "webhook_id", id, "since", b.Since, "events", n)
	c.JSON(http.StatusAccepted, gin.H{"webhook_id": id, "since": b.Since.UTC(), "queued": n})
}
