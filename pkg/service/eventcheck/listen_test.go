package eventcheck_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// The outbox's events delivered as signed webhooks to the project's
// receiver (what `api webhook-listen` runs), every stream at once, each in
// seq order and every other event twice: the receiver's output file, read
// back, holds every event once, and the checker finds every promise kept.
func TestAListenersOutputIsChecked(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	committed, _, err := w.db.Outbox.Since(ctx, 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := webhook.NewReceiver([]string{secret}, f, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	client := webhook.NewClient(5*time.Second, true)

	byStream := map[string][]outbox.Event{}
	for _, e := range committed { // in commit order: each stream's in seq order
		byStream[e.Stream()] = append(byStream[e.Stream()], e)
	}
	var wg sync.WaitGroup
	for _, evs := range byStream {
		wg.Go(func() {
			for i, e := range evs {
				body, err := json.Marshal(struct {
					Type      outbox.Type `json:"type"`
					Timestamp time.Time   `json:"timestamp"`
					Data      outbox.Data `json:"data"`
				}{e.Type, e.Time, e.Data})
				if err != nil {
					t.Error(err)
					return
				}
				for range 1 + i%2 {
					if _, err := webhook.Send(ctx, client, srv.URL, e.ID, time.Now(), body, []string{secret}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	got, err := webhook.ReadEvents(out)
	if err != nil {
		t.Fatal(err)
	}
	rep := w.check(t, got)
	if !rep.OK() || rep.Distinct != len(committed) || rep.Arrivals != len(committed) || rep.Orders != 30 || rep.Entries != 5 {
		t.Fatalf("the listener's %d events of the outbox's %d: %s", len(got), len(committed), rep)
	}
}
