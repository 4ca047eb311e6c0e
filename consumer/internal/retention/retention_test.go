package retention_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/consumer/internal/retention"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Events published long ago and their deliveries go, in batches, while two
// purgers run at once; those still unpublished, and everything recent,
// stay.
func TestOldEventsAndDeliveriesGoTheRestStays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := mysqltest.New(t)
	rdb, prefix := redistest.New(t)
	a := db.OpenSale(t, 100, order.Money{})
	gen := order.NewNumberGenerator()
	var reqs []order.FulfilRequest
	for u := 1; u <= 30; u++ {
		reqs = append(reqs, order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: gen.Next(a.ItemID), IdempotencyKey: "k",
			UserID: strconv.Itoa(u), ItemID: a.ItemID, ActivityID: a.ID, Quantity: 1, ReservedAt: time.Now()}, PayDeadline: time.Now().Add(time.Hour)})
	}
	if _, err := mysqltest.Fulfil(ctx, db.DB, reqs); err != nil {
		t.Fatal(err)
	}
	ep, err := db.Webhooks.Create(ctx, hook.Endpoint{URL: "http://127.0.0.1:1/", Events: []string{"*"}}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	evs, _, err := db.Outbox.Since(ctx, 0, 100)
	if err != nil || len(evs) != 30 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	if err := db.Webhooks.Requeue(ctx, ep.ID, evs); err != nil {
		t.Fatal(err)
	}
	ds, err := db.Webhooks.Due(ctx, ep.ID, 100)
	if err != nil || len(ds) != 30 {
		t.Fatalf("%d due, %v", len(ds), err)
	}
	outs := make([]hook.Outcome, len(ds))
	for i, d := range ds {
		// Failed tries: those, not a success, leave an attempt row.
		outs[i] = hook.Outcome{Delivery: d, State: hook.Pending, Wait: time.Hour, Attempt: hook.Attempt{At: time.Now(), Status: 503, Error: "down"}}
	}
	if err := db.Webhooks.Record(ctx, outs); err != nil {
		t.Fatal(err)
	}
	// The first 20 events were published and, with their deliveries, are
	// ten days old; events 21-25 are as old but not published.
	g := db.Gorm()
	ids := func(from, to int) []string {
		var out []string
		for _, e := range evs[from:to] {
			out = append(out, e.ID)
		}
		return out
	}
	old := time.Now().Add(-240 * time.Hour)
	exec := func(q string, args ...any) {
		if err := g.Exec(q, args...).Error; err != nil {
			t.Fatal(err)
		}
	}
	exec("UPDATE outbox_events SET created_at = ?, published_at = ? WHERE event_id IN ?", old, old, ids(0, 20))
	exec("UPDATE outbox_events SET created_at = ? WHERE event_id IN ?", old, ids(20, 25))
	exec("UPDATE outbox_events SET published_at = NOW(6) WHERE event_id IN ?", ids(25, 30))
	exec("UPDATE webhook_deliveries SET created_at = ? WHERE event_id IN ?", old, ids(0, 20))

	var wg sync.WaitGroup
	for i := range 2 {
		p := &retention.Purger{Store: db.Outbox, Locker: lock.New(rdb, lock.Options{Prefix: prefix, InstanceID: "purger-" + strconv.Itoa(i)}),
			Keep: 7 * 24 * time.Hour, Batch: 3, Log: slog.New(slog.DiscardHandler), Now: time.Now}
		wg.Go(func() {
			for range 3 {
				_, _ = p.Once(ctx) // one of two at a time holds the lock
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	count := func(q string) (n int64) {
		if err := g.Raw(q).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count("SELECT COUNT(*) FROM outbox_events"); n != 10 {
		t.Fatalf("%d events left, want the 5 unpublished and the 5 recent", n)
	}
	if n := count("SELECT COUNT(*) FROM outbox_events WHERE published_at IS NULL"); n != 5 {
		t.Fatalf("%d unpublished events left, want 5", n)
	}
	if n := count("SELECT COUNT(*) FROM webhook_deliveries"); n != 10 {
		t.Fatalf("%d deliveries left, want the 10 recent", n)
	}
	if n := count("SELECT COUNT(*) FROM webhook_attempts"); n != 10 {
		t.Fatalf("%d attempts left, want the 10 recent deliveries'", n)
	}
}
