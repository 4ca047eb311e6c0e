package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/webhook"
)

// listening runs `api webhook-listen` with args until the test ends and
// returns its address and what it writes.
func listening(t *testing.T, args []string, env map[string]string) (string, *logstest.Buffer, *logstest.Buffer) {
	t.Helper()
	var stdout, stderr logstest.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	go func() {
		done <- run(ctx, append([]string{"webhook-listen", "--port", "0"}, args...), lookup, &stdout, &stderr, nil)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook-listen stopped: %v", err)
		}
	})
	addr := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)
	waittest.Until(t, 10*time.Second, "webhook-listen listening", func() bool { return addr.MatchString(stderr.String()) })
	return addr.FindStringSubmatch(stderr.String())[1], &stdout, &stderr
}

func TestWebhookListen(t *testing.T) {
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	url, stdout, stderr := listening(t, nil, map[string]string{"SECKILL_WEBHOOK_SECRET": secret})
	client := webhook.NewClient(5*time.Second, true)
	body := []byte(`{"type":"order.created","timestamp":"2026-12-03T21:00:00.5Z","data":{"order_no":"A-1"}}`)
	send := func(id string, secrets ...string) int {
		status, _ := webhook.Send(t.Context(), client, url, id, time.Now(), body, secrets)
		return status
	}
	if got := send("msg_1", secret); got != http.StatusNoContent {
		t.Fatalf("delivery: %d; stderr %q", got, stderr)
	}
	var line struct {
		ID, Type, Timestamp string
		Data                map[string]string
	}
	if err := json.Unmarshal([]byte(stdout.String()), &line); err != nil || line.ID != "msg_1" || line.Type != "order.created" ||
		line.Timestamp != "2026-12-03T21:00:00.5Z" || line.Data["order_no"] != "A-1" {
		t.Fatalf("stdout %q: %+v, %v", stdout, line, err)
	}
	if got := send("msg_1", secret); got != http.StatusNoContent || !strings.Contains(stderr.String(), "duplicate msg_1\n") {
		t.Fatalf("redelivery: %d; stderr %q", got, stderr)
	}
	other, _ := webhook.NewSecret()
	if got := send("msg_2", other); got != http.StatusBadRequest || !strings.Contains(stderr.String(), `refused "msg_2"`) {
		t.Fatalf("wrong secret: %d; stderr %q", got, stderr)
	}
	if n := strings.Count(stdout.String(), "\n"); n != 1 {
		t.Fatalf("%d events written, want 1:\n%s", n, stdout)
	}
}

// Two --secret flags: either verifies; the flags win over the environment.
func TestWebhookListenTwoSecrets(t *testing.T) {
	oldS, _ := webhook.NewSecret()
	newS, _ := webhook.NewSecret()
	envS, _ := webhook.NewSecret()
	url, stdout, _ := listening(t, []string{"--secret", oldS, "--secret", newS}, map[string]string{"SECKILL_WEBHOOK_SECRET": envS})
	client := webhook.NewClient(5*time.Second, true)
	for id, s := range map[string]string{"msg_old": oldS, "msg_new": newS} {
		if status, err := webhook.Send(t.Context(), client, url, id, time.Now(), []byte(`{"type":"t"}`), []string{s}); err != nil {
			t.Fatalf("signed with the %s secret: %d, %v", id, status, err)
		}
	}
	if status, _ := webhook.Send(t.Context(), client, url, "msg_env", time.Now(), []byte(`{}`), []string{envS}); status != http.StatusBadRequest {
		t.Fatalf("signed with the environment's secret: %d, want 400", status)
	}
	if n := strings.Count(stdout.String(), "\n"); n != 2 {
		t.Fatalf("%d events written, want 2:\n%s", n, stdout)
	}
}

func TestWebhookListenRefusesToStart(t *testing.T) {
	tests := []struct {
		name string
		args []string
		says string
	}{
		{"no secret", nil, "give --secret or set SECKILL_WEBHOOK_SECRET"},
		{"bad secret", []string{"--secret", "hunter2"}, "webhook secret"},
		{"bad port", []string{"--port", "70000", "--secret", "whsec_" + strings.Repeat("A", 44)}, "invalid port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out logstest.Buffer
			err := run(t.Context(), append([]string{"webhook-listen"}, tt.args...), func(string) (string, bool) { return "", false }, &out, &out, nil)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("run: %v, want an error saying %q", err, tt.says)
			}
		})
	}
}
