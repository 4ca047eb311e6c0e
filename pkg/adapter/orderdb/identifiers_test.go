package orderdb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/payment"
)

// A provider's transaction ids that differ only in case are two payments:
// `ab1` after `Ab1` (for another order) pays its own order, and a repeat of
// either is still a Duplicate of that one.
func TestPaymentTransactionIDsCompareBytes(t *testing.T) {
	t.Parallel()
	eur := order.Money{Amount: 1500, Currency: "EUR"}
	db, item := setup(t, 10)
	ctx := context.Background()
	var nos []string
	for user := int64(1); user <= 2; user++ {
		r := req(item, user, 1)
		r.UnitPrice = eur
		if _, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{r}); err != nil {
			t.Fatal(err)
		}
		nos = append(nos, r.Event.OrderNo)
	}
	for i, tx := range []string{"Ab1", "ab1"} {
		rec, err := db.Payments.RecordPayment(ctx, payment.Transaction{TransactionID: tx, OrderNo: nos[i], Amount: eur})
		if err != nil {
			t.Fatalf("payment %s: %v", tx, err)
		}
		if rec.Duplicate || rec.Payment.TransactionID != tx || rec.Payment.OrderNo != nos[i] ||
			rec.Payment.Outcome != payment.Paid || rec.Order.Status != order.Paid {
			t.Fatalf("payment %s of %s answered %+v, want a new PAID payment of that order", tx, nos[i], rec)
		}
	}
	for i, tx := range []string{"Ab1", "ab1"} {
		rec, err := db.Payments.RecordPayment(ctx, payment.Transaction{TransactionID: tx, OrderNo: nos[i], Amount: eur})
		if err != nil || !rec.Duplicate || rec.Payment.TransactionID != tx || rec.Payment.OrderNo != nos[i] {
			t.Fatalf("repeat of %s answered %+v (%v), want a Duplicate of itself", tx, rec, err)
		}
	}
	for _, no := range nos {
		if ps, err := db.Payments.PaymentsOf(ctx, no); err != nil || len(ps) != 1 {
			t.Fatalf("payments of %s: %+v (%v), want one", no, ps, err)
		}
	}
}

// Restock keys that differ only in case are two restocks: `r1` after `R1`
// adds its units too; a repeat of either adds nothing.
func TestRestockKeysCompareBytes(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 10)
	ctx := context.Background()
	for _, key := range []string{"R1", "r1"} {
		r, created, err := db.Restocks.Restock(ctx, item, key, 5)
		if err != nil || !created || r.Key != key {
			t.Fatalf("restock %s: %+v created %v (%v), want a new restock under that key", key, r, created, err)
		}
	}
	for _, key := range []string{"R1", "r1"} {
		r, created, err := db.Restocks.Restock(ctx, item, key, 5)
		if err != nil || created || r.Key != key {
			t.Fatalf("repeat of restock %s: %+v created %v (%v), want the first record", key, r, created, err)
		}
	}
	if got, err := db.Activities.ItemStock(ctx, item); err != nil || got != 20 {
		t.Fatalf("item_stock %d (%v), want 20: two restocks of 5", got, err)
	}
}

// Subjects that differ only in case are two buyers, each with a live order
// in one sale; the orders' idempotency keys that differ so are two keys.
func TestUserIDsAndOrderKeysCompareBytes(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 10)
	ctx := context.Background()
	var reqs []order.FulfilRequest
	for _, u := range []struct{ user, key string }{{"Alice", "K1"}, {"alice", "k1"}} {
		r := req(item, 1, 1)
		r.Event.UserID, r.Event.IdempotencyKey = u.user, u.key
		reqs = append(reqs, r)
	}
	out, err := mysqltest.Fulfil(ctx, db.DB, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if got := out[r.Event.OrderNo]; got.Status != order.Created {
			t.Fatalf("order of %s: %+v, want CREATED", r.Event.UserID, got)
		}
		o, err := db.Orders.Order(ctx, r.Event.OrderNo)
		if err != nil || o.UserID != r.Event.UserID || o.IdempotencyKey != r.Event.IdempotencyKey || o.Status != order.Created {
			t.Fatalf("order of %s read back %+v (%v)", r.Event.UserID, o, err)
		}
		listed, _, err := db.Orders.UserOrders(ctx, r.Event.UserID, order.Filter{}, 0, 10)
		if err != nil || len(listed) != 1 || listed[0].Order.OrderNo != r.Event.OrderNo {
			t.Fatalf("orders of %s: %+v (%v), want only its own", r.Event.UserID, listed, err)
		}
	}
	// The live-order key still holds for each of them.
	again := req(item, 1, 1)
	again.Event.UserID = "alice"
	out, err = mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{again})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[again.Event.OrderNo]; got.Status != order.Failed {
		t.Fatalf("a second live order of alice: %+v, want FAILED", got)
	}
}

// A database of the previous release (identifiers under the default,
// case-insensitive collation) with rows in it is migrated by 0007: every
// row keeps its identifiers, every identifier column compares bytes, and
// the unique keys stay.
func TestMigrationToByteIdentifiersKeepsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, item := setup(t, 10)
	g := db.Gorm().WithContext(ctx)
	// Back to the schema before 0007.
	for _, q := range []string{
		"ALTER TABLE orders MODIFY order_no VARCHAR(48) NOT NULL, MODIFY idempotency_key VARCHAR(64) NOT NULL",
		"ALTER TABLE payments MODIFY transaction_id VARCHAR(128) NOT NULL, MODIFY order_no VARCHAR(48) NOT NULL",
		"ALTER TABLE restocks MODIFY idempotency_key VARCHAR(64) NOT NULL",
		"DROP TABLE redis_watches",
		"DELETE FROM schema_migrations WHERE version = '0007_identifiers_and_heal_watch'",
	} {
		if err := g.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	eur := order.Money{Amount: 1500, Currency: "EUR"}
	r := req(item, 1, 1)
	r.UnitPrice = eur
	r.Event.UserID, r.Event.IdempotencyKey = "Alice", "Key-1"
	if _, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{r}); err != nil {
		t.Fatal(err)
	}
	no := r.Event.OrderNo
	if _, err := db.Payments.RecordPayment(ctx, payment.Transaction{TransactionID: "Tx-1", OrderNo: no, Amount: eur}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Restocks.Restock(ctx, item, "Restock-1", 5); err != nil {
		t.Fatal(err)
	}

	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	var cols []struct {
		TableName  string
		ColumnName string
		DataType   string
	}
	// Aliased: MySQL 8 names information_schema's columns in upper case.
	if err := g.Raw(`SELECT table_name AS table_name, column_name AS column_name, data_type AS data_type
		FROM information_schema.columns
		WHERE table_schema = DATABASE() AND column_name IN ('order_no', 'user_id', 'idempotency_key', 'transaction_id')
		ORDER BY table_name, column_name`).Scan(&cols).Error; err != nil {
		t.Fatal(err)
	}
	want := []string{"draw_entries.user_id", "draw_results.order_no", "draw_results.user_id", "orders.idempotency_key", "orders.order_no",
		"orders.user_id", "payments.order_no", "payments.transaction_id", "restocks.idempotency_key", "room_joins.user_id"}
	if len(cols) != len(want) {
		t.Fatalf("identifier columns %+v, want %v", cols, want)
	}
	for i, c := range cols {
		if got := c.TableName + "." + c.ColumnName; got != want[i] || c.DataType != "varbinary" {
			t.Fatalf("column %s is %s, want %s as varbinary (bytes, no collation)", got, c.DataType, want[i])
		}
	}
	var keys []string
	if err := g.Raw(`SELECT DISTINCT index_name FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND non_unique = 0 AND index_name LIKE 'uk\_%' ORDER BY index_name`).
		Scan(&keys).Error; err != nil {
		t.Fatal(err)
	}
	// uk_orders_key (0008, on key_once, which follows idempotency_key) is
	// not taken back above and stays too.
	wantKeys := "[uk_activity_items_position uk_draw_entries_buyer uk_draw_results_entry uk_draw_results_order uk_orders_key uk_orders_live uk_orders_order_no uk_outbox_stream uk_payments_transaction uk_restocks_key uk_room_joins_place uk_webhook_delivery]"
	if got := fmt.Sprint(keys); got != wantKeys {
		t.Fatalf("unique keys %s after the migration, want %s", got, wantKeys)
	}

	// The rows kept their identifiers, and the code reads them back.
	o, err := db.Orders.Order(ctx, no)
	if err != nil || o.UserID != "Alice" || o.IdempotencyKey != "Key-1" || o.Status != order.Paid {
		t.Fatalf("order after the migration %+v (%v)", o, err)
	}
	ps, err := db.Payments.PaymentsOf(ctx, no)
	if err != nil || len(ps) != 1 || ps[0].TransactionID != "Tx-1" || ps[0].OrderNo != no {
		t.Fatalf("payments after the migration %+v (%v)", ps, err)
	}
	if rs, created, err := db.Restocks.Restock(ctx, item, "Restock-1", 5); err != nil || created || rs.Key != "Restock-1" {
		t.Fatalf("repeat of the old restock after the migration: %+v created %v (%v), want the first record", rs, created, err)
	}
	// ... and the old identifiers' other cases are new ones now.
	if rs, created, err := db.Restocks.Restock(ctx, item, "restock-1", 5); err != nil || !created || rs.Key != "restock-1" {
		t.Fatalf("restock-1 after Restock-1: %+v created %v (%v), want a new restock", rs, created, err)
	}
}
