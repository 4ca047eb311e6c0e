package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/reconcile"
)

func (ts *testServer) restock(t *testing.T, base string, item int64, key, body string) response {
	t.Helper()
	h := map[string]string{}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return ts.do(t, base, request{method: "POST", path: fmt.Sprintf("/admin/v1/items/%d/restock", item), token: adminToken(t),
		header: h, body: body})
}

func wantRestock(t *testing.T, r response, qty int64, replayed bool, db int64, redis *int64) httpapi.RestockView {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("restock: %d %s, want 200", r.status, r.body)
	}
	var v httpapi.RestockView
	r.decode(t, &v)
	if v.Quantity != qty || v.Replayed != replayed || v.DBStock != db || (v.RedisStock == nil) != (redis == nil) ||
		(redis != nil && *v.RedisStock != *redis) {
		t.Fatalf("restock answered %s, want quantity %d, replayed %v, db_stock %d, redis_stock %v", r.body, qty, replayed, db, ptrString(redis))
	}
	return v
}

func ptrString(p *int64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

func ptr(n int64) *int64 { return &n }

// noDrift runs the reconciler's check on item and fails unless Redis and
// MySQL agree.
func noDrift(t *testing.T, store *stockredis.Store, db *mysqltest.DB, item int64) reconcile.ItemReport {
	t.Helper()
	ctx := context.Background()
	c := &reconcile.Checker{Stock: store.Reconciler, DB: reconcile.DB{Reads: db.Reconcile, Restocks: db.Restocks, OrderLookup: db.Orders,
		Items: db.Activities, Pinger: db.DB}, Log: slog.New(slog.DiscardHandler), Recheck: 50 * time.Millisecond}
	targets, err := c.Targets(ctx, reconcile.Selection{Items: []int64{item}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.Run(ctx, targets, reconcile.CheckOnly, nil)
	if err != nil || len(rep.Items) != 1 {
		t.Fatalf("reconcile: %+v %v", rep, err)
	}
	if it := rep.Items[0]; it.Verdict != reconcile.OK || it.Drift != 0 {
		t.Fatalf("reconciler: %+v, want ok without drift", it)
	}
	return rep.Items[0]
}

// Restock: bad input is refused with the error shape and changes nothing;
// a restock before the warm-up changes MySQL only (the warm-up loads it);
// one during the sale changes both; the same key again adds nothing (and
// another quantity under it is refused); the reconciler agrees throughout.
func TestRestock(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	item := ts.newItem(t, 10)
	for _, c := range []struct {
		name, key, body string
		status          int
		code            string
	}{
		{"no key", "", `{"quantity":5}`, 400, "INVALID_ARGUMENT"},
		{"bad key", "white space", `{"quantity":5}`, 400, "INVALID_ARGUMENT"},
		{"zero", "k", `{"quantity":0}`, 400, "INVALID_ARGUMENT"},
		{"negative", "k", `{"quantity":-3}`, 400, "INVALID_ARGUMENT"},
		{"absurd", "k", fmt.Sprintf(`{"quantity":%d}`, httpapi.MaxRestock+1), 400, "INVALID_ARGUMENT"},
		{"null", "k", `{"quantity":null}`, 400, "INVALID_ARGUMENT"},
		{"missing", "k", `{}`, 400, "INVALID_ARGUMENT"},
		{"string", "k", `{"quantity":"5"}`, 400, "INVALID_ARGUMENT"},
		{"fraction", "k", `{"quantity":1.5}`, 400, "INVALID_ARGUMENT"},
		{"unknown field", "k", `{"quantity":5,"stock":5}`, 400, "INVALID_ARGUMENT"},
	} {
		wantError(t, ts.restock(t, ts.url, item, c.key, c.body), c.status, c.code)
	}
	wantError(t, ts.restock(t, ts.url, 999999, "k", `{"quantity":5}`), 404, "NOT_FOUND")
	wantError(t, ts.do(t, ts.url, request{method: "POST", path: fmt.Sprintf("/admin/v1/items/%d/restock", item),
		token: buyerToken(t, 7), header: map[string]string{"Idempotency-Key": "k"}, body: `{"quantity":5}`}), 403, "FORBIDDEN")
	full := ts.newItem(t, 999_999_999)
	// Past 1,000,000,000: a valid quantity, refused for the stock the item
	// holds now (a 409, as Schemathesis expects of a schema-valid request).
	wantError(t, ts.restock(t, ts.url, full, "k", `{"quantity":2}`), 409, "STOCK_LIMIT")
	if db, _ := ts.db.Activities.ItemStock(context.Background(), full); db != 999_999_999 {
		t.Fatalf("MySQL stock %d after a refused restock, want 999999999", db)
	}
	wantRestock(t, ts.restock(t, ts.url, full, "k", `{"quantity":1}`), 1, false, 1_000_000_000, nil) // the key was not used
	if db, _ := ts.db.Activities.ItemStock(context.Background(), item); db != 10 {
		t.Fatalf("MySQL stock %d after refused restocks, want 10", db)
	}

	// Before the warm-up: MySQL only.
	first := wantRestock(t, ts.restock(t, ts.url, item, "before", `{"quantity":5}`), 5, false, 15, nil)
	again := wantRestock(t, ts.restock(t, ts.url, item, "before", `{"quantity":5}`), 5, true, 15, nil)
	if again.RestockID != first.RestockID {
		t.Fatalf("the same key answered restock %d, then %d", first.RestockID, again.RestockID)
	}
	wantError(t, ts.restock(t, ts.url, item, "before", `{"quantity":6}`), 422, "IDEMPOTENCY_KEY_REUSED")

	act := ts.newActivity(t, item, time.Now().Add(-time.Minute), time.Now().Add(time.Hour), 1)
	ts.warm(t, act)
	if s := ts.stock(t, item); s.Stock != 15 {
		t.Fatalf("Redis stock %d after the warm-up, want 15 (the restock before it included once)", s.Stock)
	}
	// The first key once more, after the warm-up: still nothing added.
	wantRestock(t, ts.restock(t, ts.url, item, "before", `{"quantity":5}`), 5, true, 15, ptr(15))

	// During the sale, with an order in flight.
	ts.mustPlace(t, ts.url, buyerToken(t, 1001), "buy-1", act)
	wantRestock(t, ts.restock(t, ts.url, item, "during", `{"quantity":3}`), 3, false, 18, ptr(17))
	wantRestock(t, ts.restock(t, ts.url, item, "during", `{"quantity":3}`), 3, true, 18, ptr(17))
	if s := ts.stock(t, item); s.Stock != 17 || s.Inflight != 1 {
		t.Fatalf("Redis %+v, want stock 17 with 1 in flight", s)
	}
	var n, pending int64
	ts.db.Gorm().Raw("SELECT COUNT(*), COALESCE(SUM(applied_at IS NULL), 0) FROM restocks WHERE item_id = ?", item).Row().Scan(&n, &pending)
	if n != 2 || pending != 0 {
		t.Fatalf("%d restock rows (%d pending), want 2, none pending", n, pending)
	}
	noDrift(t, ts.store, ts.db, item)
}

// The restock script's answer is lost at the wire after Redis ran it: the
// API answers 503 (it cannot know), MySQL and Redis both have the units
// (the reconciler sees no drift), and the retry with the same key answers
// 200 without adding them again, and records the restock as applied.
func TestRestockLostRedisReply(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	p := redistest.NewProxied(t, false, "restock")
	via := stockredis.New(p.Client(t), p.Prefix)
	direct := stockredis.New(p.Direct, p.Prefix)
	svc := ts.service(t, nil)
	useStore(svc, via)
	url := ts.serve(t, svc, ts.checkers(nil))

	item := ts.newItem(t, 10)
	act := ts.newActivity(t, item, time.Now().Add(-time.Minute), time.Now().Add(time.Hour), 1)
	if r := ts.do(t, url, request{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/warmup", act), token: adminToken(t)}); r.status != 200 {
		t.Fatalf("warmup: %d %s", r.status, r.body)
	}
	p.LoseNext("restock")
	wantError(t, ts.restock(t, url, item, "lost", `{"quantity":4}`), 503, "UNAVAILABLE")
	if p.Lost() != 1 {
		t.Fatalf("%d answers lost, want 1", p.Lost())
	}
	snap, err := direct.Stock.Stock(context.Background(), reservation.One(item))
	if err != nil || snap.Stock != 14 {
		t.Fatalf("Redis %+v %v after the lost answer, want 14 (the script ran once)", snap, err)
	}
	it := noDrift(t, direct, ts.db, item)
	if it.MySQLStock != 14 {
		t.Fatalf("MySQL stock %d, want 14", it.MySQLStock)
	}
	wantRestock(t, ts.restock(t, url, item, "lost", `{"quantity":4}`), 4, true, 14, ptr(14))
	var pending int64
	ts.db.Gorm().Raw("SELECT COUNT(*) FROM restocks WHERE item_id = ? AND applied_at IS NULL", item).Scan(&pending)
	if pending != 0 {
		t.Fatalf("%d restocks pending after the retry, want 0", pending)
	}
	noDrift(t, direct, ts.db, item)
}
