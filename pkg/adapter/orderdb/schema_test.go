package orderdb_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/order"
)

// row is one raw orders row; only what the unique keys look at varies.
type row struct {
	no     string
	user   int64
	status order.Status
}

// insertRow writes r into activity straight through SQL, bypassing every
// check of the Go code: only the schema decides. Each order number has its
// own idempotency key.
func insertRow(ctx context.Context, db *mysqltest.DB, activity int64, r row) error {
	return db.Gorm().WithContext(ctx).Exec(`INSERT INTO orders
		(order_no, user_id, item_id, activity_id, quantity, status, idempotency_key, reserved_at)
		VALUES (?, ?, 1, ?, 1, ?, ?, ?)`, r.no, r.user, activity, string(r.status), "k-"+r.no, time.Now().UTC()).Error
}

// refusedBy returns the unique key a MySQL duplicate-key error names, ""
// for no error, and fails the test for any other error.
func refusedBy(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var me *mysqldrv.MySQLError
	if !errors.As(err, &me) || me.Number != 1062 {
		t.Fatalf("insert failed with %v, want nil or a duplicate-key error (1062)", err)
	}
	for _, k := range []string{"uk_orders_order_no", "uk_orders_live"} {
		if strings.Contains(me.Message, k) {
			return k
		}
	}
	t.Fatalf("duplicate-key error names no known key: %v", err)
	return ""
}

// The schema alone refuses a second row with an order number already used
// and a second live (CREATED or PAID) order of one user in one activity,
// and lets FAILED and CLOSED orders stand beside the user's next attempt.
func TestSchemaOrderKeys(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	const user = 7
	cases := []struct {
		name  string
		prior []row
		// next is inserted after prior, into the same activity.
		next row
		// refused is the unique key that must refuse next ("" for none).
		refused string
	}{
		{name: "order_no reused by another user", prior: []row{{"A", user, order.Created}},
			next: row{"A", user + 1, order.Created}, refused: "uk_orders_order_no"},
		{name: "order_no reused by two FAILED orders", prior: []row{{"A", user, order.Failed}},
			next: row{"A", user, order.Failed}, refused: "uk_orders_order_no"},
		{name: "CREATED then CREATED", prior: []row{{"A", user, order.Created}},
			next: row{"B", user, order.Created}, refused: "uk_orders_live"},
		{name: "CREATED then PAID", prior: []row{{"A", user, order.Created}},
			next: row{"B", user, order.Paid}, refused: "uk_orders_live"},
		{name: "PAID then CREATED", prior: []row{{"A", user, order.Paid}},
			next: row{"B", user, order.Created}, refused: "uk_orders_live"},
		{name: "FAILED then CREATED", prior: []row{{"A", user, order.Failed}},
			next: row{"B", user, order.Created}},
		{name: "CLOSED then CREATED", prior: []row{{"A", user, order.Closed}},
			next: row{"B", user, order.Created}},
		{name: "FAILED, CLOSED, FAILED then PAID", prior: []row{{"A", user, order.Failed}, {"B", user, order.Closed}, {"C", user, order.Failed}},
			next: row{"D", user, order.Paid}},
		{name: "CREATED by another user", prior: []row{{"A", user, order.Created}},
			next: row{"B", user + 1, order.Created}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			activity := int64(100 + i) // one activity a case, in one database
			no := func(s string) string { return fmt.Sprintf("%s-%d", s, activity) }
			prior := make([]row, len(c.prior))
			for j, r := range c.prior {
				r.no = no(r.no)
				prior[j] = r
				if err := insertRow(ctx, db, activity, r); err != nil {
					t.Fatalf("prior row %+v: %v", r, err)
				}
			}
			next := c.next
			next.no = no(next.no)
			if got := refusedBy(t, insertRow(ctx, db, activity, next)); got != c.refused {
				t.Fatalf("insert %+v after %+v: refused by %q, want %q", next, prior, got, c.refused)
			}
			var n int64
			if err := db.Gorm().Raw("SELECT COUNT(*) FROM orders WHERE activity_id = ?", activity).Scan(&n).Error; err != nil {
				t.Fatal(err)
			}
			want := int64(len(c.prior))
			if c.refused == "" {
				want++
			}
			if n != want {
				t.Fatalf("%d rows in the activity, want %d", n, want)
			}
		})
	}
}

// A CLOSED or FAILED row cannot be turned live again beside the user's
// newer live order: the key is on the stored live column, which follows
// status on UPDATE too.
func TestSchemaRefusesRevivingAnOrder(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	const activity, user = 1, 7
	for _, r := range []row{{"old-closed", user, order.Closed}, {"old-failed", user, order.Failed}, {"new", user, order.Created}} {
		if err := insertRow(ctx, db, activity, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, no := range []string{"old-closed", "old-failed"} {
		for _, st := range []order.Status{order.Created, order.Paid} {
			err := db.Gorm().WithContext(ctx).Exec("UPDATE orders SET status = ? WHERE order_no = ?", string(st), no).Error
			if got := refusedBy(t, err); got != "uk_orders_live" {
				t.Fatalf("%s set to %s: refused by %q, want uk_orders_live", no, st, got)
			}
		}
	}
	var live int64
	if err := db.Gorm().Raw("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND user_id = ? AND status IN ('CREATED','PAID')",
		activity, user).Scan(&live).Error; err != nil {
		t.Fatal(err)
	}
	if live != 1 {
		t.Fatalf("%d live orders, want 1", live)
	}
}
