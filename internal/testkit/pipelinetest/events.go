package pipelinetest

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/hooktest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/hook"
)

// HookSettings are the api's and consumer's webhook settings in tests:
// endpoints on loopback, retries a second or two apart for over four
// minutes, the shop's events on topic.
func HookSettings(topic string) []string {
	schedule := "200ms,500ms"
	for range 20 {
		schedule += ",1s"
	}
	for range 15 {
		schedule += ",15s"
	}
	return []string{"SECKILL_WEBHOOK_ALLOW_PRIVATE=true", "SECKILL_OUTBOX_TOPIC=" + topic,
		"SECKILL_WEBHOOK_RETRY_SCHEDULE=" + schedule}
}

// RegisterHook registers endpoint e through the admin API for events and
// has it trust the secret the answer shows.
func (a *API) RegisterHook(t testing.TB, e *hooktest.Endpoint, events ...string) hook.Endpoint {
	t.Helper()
	var out struct {
		WebhookID int64  `json:"webhook_id"`
		Secret    string `json:"secret"`
	}
	code, err := a.Do("POST", "/admin/v1/webhooks", 0, "admin", nil, map[string]any{"url": e.URL, "events": events}, &out)
	if err != nil || code != 201 {
		t.Fatalf("register webhook: %d %v", code, err)
	}
	e.Trust(out.Secret)
	return hook.Endpoint{ID: out.WebhookID, URL: e.URL, Events: events, Enabled: true}
}

// WaitEventsDrained waits until the outbox is published and no delivery
// to the endpoints eps is pending.
func (p *Pipeline) WaitEventsDrained(t testing.TB, within time.Duration, eps ...hook.Endpoint) {
	t.Helper()
	ctx := context.Background()
	waittest.Until(t, within, "every event published and delivered", func() bool {
		if shards, err := p.DB.Outbox.PendingShards(ctx); err != nil || len(shards) > 0 {
			return false
		}
		for _, ep := range eps {
			if ds, err := p.DB.Webhooks.Deliveries(ctx, ep.ID, hook.Pending, 0, 1); err != nil || len(ds) > 0 {
				return false
			}
		}
		return true
	})
}
