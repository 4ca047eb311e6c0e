package orderdb_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/domain/order"
	schema "github.com/seckill/seckill/sql"
)

// A database made before prices (0001 and 0002 applied, with an item, a
// sale and orders in it) migrates to prices, and its rows read as having
// none; new orders of that sale still write.
func TestMigrateKeepsRowsWithoutPrices(t *testing.T) {
	t.Parallel()
	cfg, err := mysqldrv.ParseDSN(mysqltest.BaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = ""
	raw, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "seckill_test_" + hex.EncodeToString(b)
	if _, err := raw.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Exec("DROP DATABASE IF EXISTS " + name) })
	cfg.DBName = name
	cfg.ParseTime = true
	old, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	old.SetMaxOpenConns(1)

	// The schema as it stood, recorded as applied the way Migrate records it.
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := old.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version VARCHAR(64) NOT NULL PRIMARY KEY,
		applied_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))`)
	for _, v := range []string{"0001_init", "0002_stock_buckets"} {
		body, err := schema.Files.ReadFile(v + ".sql")
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(body), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				lines = append(lines, l)
			}
		}
		for _, stmt := range strings.Split(strings.Join(lines, "\n"), ";\n") {
			if strings.TrimSpace(stmt) != "" {
				exec(strings.TrimSuffix(strings.TrimSpace(stmt), ";"))
			}
		}
		exec("INSERT INTO schema_migrations (version) VALUES (?)", v)
	}
	now := time.Now().UTC()
	exec("INSERT INTO items (id, name) VALUES (1, 'old sneaker')")
	exec("INSERT INTO item_stock (item_id, stock) VALUES (1, 10)")
	exec("INSERT INTO activities (id, item_id, starts_at, ends_at, per_user_limit) VALUES (1, 1, ?, ?, 2)", now.Add(-time.Hour), now.Add(time.Hour))
	oldNo := gen.Next(1)
	exec(`INSERT INTO orders (order_no, user_id, item_id, activity_id, quantity, status, idempotency_key, reserved_at)
		VALUES (?, 7, 1, 1, 2, 'PAID', 'k', ?)`, oldNo, now)

	db, err := orderdb.Open(orderdb.Config{DSN: cfg.FormatDSN()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate a database from before prices: %v", err)
	}
	o, err := db.Orders.Order(ctx, oldNo)
	if err != nil || o.Status != order.Paid || o.Quantity != 2 || o.UnitPrice.Priced() || o.Amount.Priced() {
		t.Fatalf("old order after the migration: %+v %v", o, err)
	}
	a, err := db.Activities.Activity(ctx, 1)
	if err != nil || a.SalePrice.Priced() {
		t.Fatalf("old activity: %+v %v", a, err)
	}
	it, err := db.Activities.Item(ctx, 1)
	if err != nil || it.Price.Priced() || it.Stock != 10 {
		t.Fatalf("old item: %+v %v", it, err)
	}
	r := order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: gen.Next(1), IdempotencyKey: "k2", UserID: "8",
		ItemID: 1, ActivityID: 1, Quantity: 1, ReservedAt: now}, UnitPrice: a.SalePrice}
	out, err := mysqltest.Fulfil(ctx, db, []order.FulfilRequest{r})
	if err != nil || out[r.Event.OrderNo].Status != order.Created {
		t.Fatalf("a new order of the old sale: %+v %v", out, err)
	}
}

// The schema alone keeps a price whole: an amount is always the unit price
// times the quantity, a price never goes without its currency, and never
// below zero.
func TestSchemaKeepsPricesWhole(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	insert := func(unit, amount any, currency any) error {
		return db.Gorm().WithContext(ctx).Exec(`INSERT INTO orders
			(order_no, user_id, item_id, activity_id, quantity, status, idempotency_key, reserved_at, unit_price, amount, currency)
			VALUES (?, 1, 1, 1, 3, 'FAILED', 'k', ?, ?, ?, ?)`, gen.Next(1), time.Now().UTC(), unit, amount, currency).Error
	}
	for _, c := range []struct {
		name                   string
		unit, amount, currency any
		ok                     bool
	}{
		{"whole", 100, 300, "EUR", true},
		{"free", 0, 0, "EUR", true},
		{"no price", nil, nil, nil, true},
		{"amount is not unit × quantity", 100, 200, "EUR", false},
		{"no currency", 100, 300, nil, false},
		{"amount without unit price", nil, 300, "EUR", false},
		{"negative", -100, -300, "EUR", false},
	} {
		if err := insert(c.unit, c.amount, c.currency); (err == nil) != c.ok {
			t.Errorf("%s: insert error %v, want accepted %v", c.name, err, c.ok)
		}
	}
	for _, q := range []string{
		"INSERT INTO items (name, price, currency) VALUES ('x', 5, NULL)",
		"INSERT INTO items (name, price, currency) VALUES ('x', -5, 'EUR')",
	} {
		if err := db.Gorm().Exec(q).Error; err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
}

// The buyer's list is served by idx_orders_user: MySQL walks the user's
// rows by id, not the table.
func TestUserOrdersUsesItsIndex(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 1000)
	ctx := context.Background()
	for u := range int64(50) {
		for range 4 {
			r := req(item, u+1, 1)
			if _, _, err := db.Orders.Abandon(ctx, r.Event, order.ReasonPublishFailed); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Gorm().Exec("ANALYZE TABLE orders").Error; err != nil {
		t.Fatal(err)
	}
	// user_id is a string (VARBINARY) the code always passes as one: a
	// number there would compare by conversion and miss the index.
	for _, where := range []string{"user_id = '7'", "user_id = '7' AND id < 100", "user_id = '7' AND status = 'FAILED' AND id < 100"} {
		var plan []map[string]any
		q := fmt.Sprintf("EXPLAIN SELECT * FROM orders WHERE %s ORDER BY id DESC LIMIT 21", where)
		if err := db.Gorm().Raw(q).Scan(&plan).Error; err != nil {
			t.Fatal(err)
		}
		if len(plan) != 1 || fmt.Sprint(plan[0]["key"]) != "idx_orders_user" {
			t.Errorf("%s: plan %v, want the key idx_orders_user", q, plan)
		}
	}
	rows, more, err := db.Orders.UserOrders(ctx, "7", order.Filter{}, 0, 3)
	if err != nil || len(rows) != 3 || !more || rows[0].ID <= rows[1].ID || rows[1].ID <= rows[2].ID {
		t.Fatalf("first page: %+v %v %v", rows, more, err)
	}
	rows, more, err = db.Orders.UserOrders(ctx, "7", order.Filter{}, rows[2].ID, 3)
	if err != nil || len(rows) != 1 || more {
		t.Fatalf("last page: %+v %v %v", rows, more, err)
	}
}
