package orderdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/order"
)

// A database of the previous release (user_id BIGINT) with orders in it is
// migrated by 0006: every order stays, each numeric user id becomes its
// decimal string (what the same buyer's token carries), the buyer's list
// and live-order key still hold, and string subjects are users from then on.
func TestMigrationToStringUserIDsKeepsOrders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := mysqltest.New(t)
	g := db.Gorm().WithContext(ctx)
	// Back to the schema before 0006.
	for _, q := range []string{
		"ALTER TABLE orders MODIFY user_id BIGINT NOT NULL",
		"DELETE FROM schema_migrations WHERE version = '0006_string_user_ids'",
	} {
		if err := g.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	const activity = 1
	for _, r := range []row{{"A-1", 1001, order.Created}, {"B-1", 1001, order.Failed}, {"C-1", 7, order.Paid}, {"D-1", 9223372036854775807, order.Closed}} {
		if err := insertRow(ctx, db, activity, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	var got []struct {
		OrderNo string
		UserID  string
	}
	if err := g.Raw("SELECT order_no, user_id FROM orders ORDER BY order_no").Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	want := []string{"A-1 1001", "B-1 1001", "C-1 7", "D-1 9223372036854775807"}
	if len(got) != len(want) {
		t.Fatalf("%d orders after the migration, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if g := got[i].OrderNo + " " + got[i].UserID; g != w {
			t.Fatalf("order %d is %q after the migration, want %q", i, g, w)
		}
	}
	listed, _, err := db.Orders.UserOrders(ctx, "1001", order.Filter{}, 0, 10)
	if err != nil || len(listed) != 2 {
		t.Fatalf("user 1001's orders after the migration: %d, %v", len(listed), err)
	}
	// The live-order key still holds for the migrated buyer...
	if k := refusedBy(t, insertStringRow(ctx, db, activity, "E-1", "1001", order.Created)); k != "uk_orders_live" {
		t.Fatalf("a second live order of user 1001: refused by %q", k)
	}
	// ...and for string subjects, compared byte for byte: case and
	// trailing spaces make other users, never the same one.
	for i, u := range []string{"auth0|65ab{i1}:q", "Auth0|65ab{i1}:q", "auth0|65ab{i1}:q ", "1001 "} {
		no := string(rune('F'+i)) + "-1"
		if k := refusedBy(t, insertStringRow(ctx, db, activity, no, u, order.Created)); k != "" {
			t.Fatalf("first live order of %q refused by %s", u, k)
		}
	}
	if k := refusedBy(t, insertStringRow(ctx, db, activity, "Z-1", "auth0|65ab{i1}:q", order.Paid)); k != "uk_orders_live" {
		t.Fatalf("a second live order of a string subject: refused by %q", k)
	}
}

func insertStringRow(ctx context.Context, db *mysqltest.DB, activity int64, no, user string, st order.Status) error {
	return db.Gorm().WithContext(ctx).Exec(`INSERT INTO orders
		(order_no, user_id, item_id, activity_id, quantity, status, idempotency_key, reserved_at)
		VALUES (?, ?, 1, ?, 1, ?, 'k', ?)`, no, user, activity, string(st), time.Now().UTC()).Error
}
