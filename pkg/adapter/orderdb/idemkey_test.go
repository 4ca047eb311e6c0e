package orderdb_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/order"
)

// keyOrders counts the user's orders in activity 1 by status.
func keyOrders(t *testing.T, db *mysqltest.DB, user string) map[order.Status]int64 {
	t.Helper()
	var rows []struct {
		Status string
		N      int64
	}
	if err := db.Gorm().Raw("SELECT status, COUNT(*) AS n FROM orders WHERE activity_id = 1 AND user_id = ? GROUP BY status",
		user).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[order.Status]int64{}
	for _, r := range rows {
		out[order.Status(r.Status)] = r.N
	}
	return out
}

// firstOrder fulfils an order of user 1 with key and moves it to st the way
// the programs do (pay, or close with its units back to stock).
func firstOrder(t *testing.T, db *mysqltest.DB, item int64, key string, st order.Status) order.FulfilRequest {
	t.Helper()
	ctx := context.Background()
	first := reqKey(item, 1, 1, key)
	out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{first})
	if err != nil || out[first.Event.OrderNo].Status != order.Created {
		t.Fatalf("first order: %+v, %v", out, err)
	}
	switch st {
	case order.Paid:
		if tr, err := db.Orders.Pay(ctx, "1", first.Event.OrderNo); err != nil || !tr.Won {
			t.Fatalf("pay: %+v, %v", tr, err)
		}
	case order.Closed:
		if tr, err := db.Orders.CloseOrder(ctx, "1", first.Event.OrderNo, order.ReasonCancelled); err != nil || !tr.Won {
			t.Fatalf("close: %+v, %v", tr, err)
		}
	}
	return first
}

// A retry with the key of an order MySQL holds (Redis lost the key's
// record, so the retry reserved a new order number) never makes a second
// order, whatever became of the first: it ends FAILED DUPLICATE_REQUEST
// and takes no stock.
func TestFulfilRetriedKeyIsRefused(t *testing.T) {
	t.Parallel()
	for _, st := range []order.Status{order.Created, order.Paid, order.Closed} {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			db, item := setup(t, 10)
			ctx := context.Background()
			firstOrder(t, db, item, "retry", st)
			before, err := db.Activities.ItemStock(ctx, item)
			if err != nil {
				t.Fatal(err)
			}
			// Alone, and beside an order of another user in one batch (the
			// batch falls back to order by order).
			retry, other := reqKey(item, 1, 1, "retry"), reqKey(item, 2, 1, "retry")
			out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{retry, other})
			if err != nil {
				t.Fatal(err)
			}
			if o := out[retry.Event.OrderNo]; o.Status != order.Failed || o.Reason != order.ReasonDuplicateRequest {
				t.Fatalf("retry of a key whose order is %s: %+v, want FAILED %s", st, o, order.ReasonDuplicateRequest)
			}
			if o := out[other.Event.OrderNo]; o.Status != order.Created {
				t.Fatalf("another user's order with the same key: %+v, want CREATED", o)
			}
			if s, err := db.Activities.ItemStock(ctx, item); err != nil || s != before-1 {
				t.Fatalf("stock %d %v, want %d (only the other user's unit taken)", s, err, before-1)
			}
			got, err := db.Orders.Order(ctx, retry.Event.OrderNo)
			if err != nil || got.Status != order.Failed || got.FailureReason != order.ReasonDuplicateRequest {
				t.Fatalf("MySQL holds %+v, %v", got, err)
			}
			if n := keyOrders(t, db, "1"); n[order.Failed] != 1 || n[st] != 1 || len(n) != 2 {
				t.Fatalf("user's orders by status: %v, want one %s and the refused retry", n, st)
			}
		})
	}
}

// A key whose only order is FAILED for a 503 answer (the API's record: the
// answer promised the key may buy again) makes a new order.
func TestFulfilKeyOfUnavailableOrderBuysAgain(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 10)
	ctx := context.Background()
	first := reqKey(item, 1, 1, "again")
	if o, _, err := db.Orders.Abandon(ctx, first.Event, order.ReasonPublishFailed); err != nil || o.Status != order.Failed {
		t.Fatalf("abandon: %+v, %v", o, err)
	}
	retry := reqKey(item, 1, 1, "again")
	out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{retry})
	if err != nil || out[retry.Event.OrderNo].Status != order.Created {
		t.Fatalf("retry after a 503: %+v, %v, want CREATED", out, err)
	}
	if s, err := db.Activities.ItemStock(ctx, item); err != nil || s != 9 {
		t.Fatalf("stock %d %v, want 9", s, err)
	}
}

// Retries of one key race into MySQL after the first order was closed: in
// one batch, and in batches of their own at once. None becomes an order.
func TestFulfilConcurrentRetriesOfAKey(t *testing.T) {
	t.Parallel()
	const retries = 4
	// check asserts that every retry ended FAILED DUPLICATE_REQUEST, the
	// user holds the closed order and the refusals only, and stock is want.
	check := func(t *testing.T, db *mysqltest.DB, item int64, reqs []order.FulfilRequest, outs []map[string]order.FulfilOutcome, want int64) {
		t.Helper()
		for _, r := range reqs {
			var o order.FulfilOutcome
			for _, out := range outs {
				if x, ok := out[r.Event.OrderNo]; ok {
					o = x
				}
			}
			if o.Status != order.Failed || o.Reason != order.ReasonDuplicateRequest {
				t.Fatalf("retry %s: %+v, want FAILED %s", r.Event.OrderNo, o, order.ReasonDuplicateRequest)
			}
		}
		if s, err := db.Activities.ItemStock(context.Background(), item); err != nil || s != want {
			t.Fatalf("stock %d %v, want %d (the closed order's unit back, no retry took one)", s, err, want)
		}
		if n := keyOrders(t, db, "1"); n[order.Closed] != 1 || n[order.Failed] != retries || len(n) != 2 {
			t.Fatalf("user's orders by status: %v, want the CLOSED one and %d refused", n, retries)
		}
	}
	t.Run("one batch", func(t *testing.T) {
		t.Parallel()
		db, item := setup(t, 10)
		firstOrder(t, db, item, "race", order.Closed)
		reqs := make([]order.FulfilRequest, retries)
		for i := range reqs {
			reqs[i] = reqKey(item, 1, 1, "race")
		}
		out, err := mysqltest.Fulfil(context.Background(), db.DB, reqs)
		if err != nil {
			t.Fatal(err)
		}
		check(t, db, item, reqs, []map[string]order.FulfilOutcome{out}, 10)
	})
	t.Run("batches at once", func(t *testing.T) {
		t.Parallel()
		db, item := setup(t, 10)
		firstOrder(t, db, item, "race", order.Closed)
		reqs := make([]order.FulfilRequest, retries)
		outs := make([]map[string]order.FulfilOutcome, retries)
		var wg sync.WaitGroup
		for i := range reqs {
			reqs[i] = reqKey(item, 1, 1, "race")
		}
		errs := make([]error, retries)
		for i := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each batch also carries another user's order, so each
				// goes order by order after its batch insert is refused.
				outs[i], errs[i] = mysqltest.Fulfil(context.Background(), db.DB, []order.FulfilRequest{reqs[i], reqKey(item, int64(10+i), 1, "race")})
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		for i := range reqs {
			for no, o := range outs[i] {
				if no != reqs[i].Event.OrderNo && o.Status != order.Created {
					t.Fatalf("another user's order: %+v, want CREATED", o)
				}
			}
		}
		check(t, db, item, reqs, outs, 10-retries)
	})
}

// 0008 on a database of the previous release keeps every row; one that
// already holds two orders of one key (a retry after Redis lost the key's
// record) is refused whole, as the migration's comment says, and changes
// nothing.
func TestMigrationKeyOnce(t *testing.T) {
	t.Parallel()
	for _, dup := range []bool{false, true} {
		t.Run(map[bool]string{false: "kept", true: "duplicates refused"}[dup], func(t *testing.T) {
			t.Parallel()
			db, item := setup(t, 10)
			ctx := context.Background()
			g := db.Gorm().WithContext(ctx)
			for _, q := range []string{ // back to the schema before 0008
				"ALTER TABLE orders DROP KEY uk_orders_key, DROP COLUMN key_once",
				"DELETE FROM schema_migrations WHERE version = '0008_orders_key_once'",
			} {
				if err := g.Exec(q).Error; err != nil {
					t.Fatal(err)
				}
			}
			first := firstOrder(t, db, item, "old", order.Closed)
			if _, _, err := db.Orders.Abandon(ctx, reqKey(item, 1, 1, "old").Event, order.ReasonPublishFailed); err != nil {
				t.Fatal(err)
			}
			if dup {
				if out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{reqKey(item, 1, 1, "old")}); err != nil || len(out) != 1 {
					t.Fatalf("second order of the key before 0008: %+v, %v", out, err)
				}
			}
			var before int64
			if err := g.Raw("SELECT COUNT(*) FROM orders").Scan(&before).Error; err != nil {
				t.Fatal(err)
			}
			err := db.Migrate(ctx)
			var after, applied int64
			if err := g.Raw("SELECT COUNT(*) FROM orders").Scan(&after).Error; err != nil {
				t.Fatal(err)
			}
			if err := g.Raw("SELECT COUNT(*) FROM schema_migrations WHERE version = '0008_orders_key_once'").Scan(&applied).Error; err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Fatalf("%d orders after the migration, %d before", after, before)
			}
			if dup {
				if err == nil || !strings.Contains(err.Error(), "uk_orders_key") || applied != 0 {
					t.Fatalf("migrate over two orders of one key: %v (recorded %d), want refused on uk_orders_key", err, applied)
				}
				return
			}
			if err != nil || applied != 1 {
				t.Fatalf("migrate: %v (recorded %d)", err, applied)
			}
			// The closed order holds its key; the 503 record does not.
			retry := reqKey(item, 1, 1, "old")
			out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{retry})
			if err != nil || out[retry.Event.OrderNo].Reason != order.ReasonDuplicateRequest {
				t.Fatalf("retry of %s's key after the migration: %+v, %v", first.Event.OrderNo, out, err)
			}
		})
	}
}
