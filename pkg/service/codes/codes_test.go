package codes_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/codes"
)

// newService is the codes service over a fresh database with one sale
// (running for an hour), writing through to live (nil: none).
func newService(t *testing.T, live codes.Live, log *slog.Logger) (*codes.Service, *mysqltest.DB, activity.Activity) {
	t.Helper()
	db := mysqltest.New(t)
	ctx := context.Background()
	it, err := db.Activities.CreateItem(ctx, "codes", 10)
	if err != nil {
		t.Fatal(err)
	}
	a, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: time.Now().Add(-time.Minute),
		EndsAt: time.Now().Add(time.Hour), PerUserLimit: 1, Access: access.CodeRequired})
	if err != nil {
		t.Fatal(err)
	}
	return &codes.Service{Tx: db, Store: db.Codes, Sales: db.Activities, Audit: db.Audit, Live: live,
		Key: db.Orders.OrderNumberKey, Now: time.Now, Log: log}, db, a
}

// Requests with one key at once (the first answer lost, the client sent it
// again before the first finished) add one batch: every one answers its
// codes, and the audit records it once.
func TestConcurrentGeneratesWithOneKey(t *testing.T) {
	t.Parallel()
	svc, db, sale := newService(t, nil, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	const senders, n = 8, 2000
	answers := make([]codes.Added, senders)
	errs := make([]error, senders)
	var wg sync.WaitGroup
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = svc.Generate(ctx, sale.ID, codes.Generate{Count: n, Uses: 1, Key: "wave-1", By: "ops"})
		}()
	}
	wg.Wait()
	first := 0
	for i := range senders {
		if errs[i] != nil {
			t.Fatalf("sender %d: %v", i, errs[i])
		}
		if !answers[i].Replayed {
			first++
		}
		if len(answers[i].Codes) != n || strings.Join(answers[i].Codes, ",") != strings.Join(answers[0].Codes, ",") {
			t.Fatalf("sender %d answered other codes", i)
		}
	}
	if first != 1 {
		t.Fatalf("%d senders added the batch, want 1", first)
	}
	if s, err := svc.Summary(ctx, sale.ID); err != nil || s.Codes != n {
		t.Fatalf("summary %+v, %v", s, err)
	}
	es, err := db.Audit.Actions(ctx, sale.ID, 0, 50)
	if err != nil || len(es) != 1 || es[0].Action != activity.ActionCodesAdd {
		t.Fatalf("audit %+v, %v", es, err)
	}
}

// A write-through that fails (Redis does not answer) leaves the codes in
// MySQL, answered and logged; the next load puts them in Redis.
func TestWriteThroughFailureHealedByTheLoad(t *testing.T) {
	t.Parallel()
	down := stockredis.New(stockredis.NewClient(stockredis.Config{Addrs: []string{"127.0.0.1:1"}}), "down")
	var logs logstest.Buffer
	svc, db, sale := newService(t, down.Codes, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	added, err := svc.Generate(ctx, sale.ID, codes.Generate{Count: 3, Uses: 2, By: "ops"})
	if err != nil || len(added.Codes) != 3 {
		t.Fatalf("generate with Redis down: %+v, %v", added, err)
	}
	if err := svc.Revoke(ctx, sale.ID, added.Codes[0], "ops"); err != nil {
		t.Fatalf("revoke with Redis down: %v", err)
	}
	if !strings.Contains(logs.String(), "codes added in MySQL, not yet in Redis") || !strings.Contains(logs.String(), "code revoked in MySQL, not yet in Redis") {
		t.Fatalf("the failed write-throughs were not logged:\n%s", logs.String())
	}
	rdb, prefix := redistest.New(t)
	live := stockredis.New(rdb, prefix)
	if n, err := live.Codes.Load(ctx, sale, db.Codes); err != nil || n != 3 {
		t.Fatalf("load: %d, %v", n, err)
	}
	h := rdb.HGetAll(ctx, live.Keys(reservationOf(sale)).Codes(sale.ID)).Val()
	key, err := db.Orders.OrderNumberKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := func(i int) string {
		n, _ := access.Normalize(added.Codes[i])
		return string(access.Hash(key, sale.ID, n))
	}
	if len(h) != 3 || h[access.LoadedField] != "1" || h[d(1)] != "2|" || h[d(2)] != "2|" {
		t.Fatalf("after the load: %v", h)
	}
}

// reservationOf is the item the sale's keys are named by.
func reservationOf(a activity.Activity) reservation.Item { return reservation.One(a.ItemID) }
