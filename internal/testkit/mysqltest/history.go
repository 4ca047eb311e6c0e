package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/adapter/orderdb"
)

// History is the past a database holds: sales long over and their orders,
// almost all final. The periodic passes of the consumer (sweep, closer,
// warm-up, heal) must cost what is due, not what such a past holds.
type History struct {
	// Orders is how many orders to write (spread over Sales).
	Orders int
	// Sales is how many sales (an item, its stock row and an activity
	// each) the orders belong to (default 40).
	Sales int
}

// HistoryLoaded is what LoadHistory wrote.
type HistoryLoaded struct {
	Items, Activities []int64
	Orders            int
	// By status, over Orders.
	Paid, Closed, Failed, Created int
}

// LoadHistory writes h straight into MySQL, in bulk (INSERT ... SELECT,
// 100,000 rows a statement), about 1,000,000 orders a minute here. The
// sales ended days ago, one after the other; most were warmed up, some never
// were (they ended while no consumer ran) and one was cancelled. Of every
// 20 orders 10 are PAID, 5 CLOSED with their release recorded, 4 FAILED and
// 1 CREATED with its payment window open for a year (an order nobody closes
// yet): none is due to any pass. Each order has a buyer of its own. Rows are
// tagged with a random mark, so a database can take several loads.
func LoadHistory(ctx context.Context, db *orderdb.DB, h History) (HistoryLoaded, error) {
	var out HistoryLoaded
	sales := h.Sales
	if sales <= 0 {
		sales = 40
	}
	sqlDB, err := db.Gorm().DB()
	if err != nil {
		return out, err
	}
	// One session: the temporary tables below belong to it.
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return out, fmt.Errorf("history: %w", err)
	}
	defer conn.Close()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	mark := strings.ToUpper(hex.EncodeToString(b))
	exec := func(q string, args ...any) (sql.Result, error) {
		res, err := conn.ExecContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		return res, nil
	}
	for _, q := range []string{
		"DROP TEMPORARY TABLE IF EXISTS history_seq",
		"DROP TEMPORARY TABLE IF EXISTS history_sales",
		"CREATE TEMPORARY TABLE history_seq (n INT NOT NULL PRIMARY KEY)",
		"CREATE TEMPORARY TABLE history_sales (idx INT NOT NULL PRIMARY KEY, item_id BIGINT NOT NULL, activity_id BIGINT NOT NULL, starts_at DATETIME(3) NOT NULL, cancelled BOOL NOT NULL)",
	} {
		if _, err := exec(q); err != nil {
			return out, err
		}
	}
	vals := make([]string, 1000)
	for i := range vals {
		vals[i] = fmt.Sprintf("(%d)", i)
	}
	if _, err := exec("INSERT INTO history_seq (n) VALUES " + strings.Join(vals, ",")); err != nil {
		return out, err
	}
	now := time.Now().UTC().Truncate(time.Second)
	for i := range sales {
		res, err := exec("INSERT INTO items (name) VALUES (?)", fmt.Sprintf("history %s sale %d", mark, i))
		if err != nil {
			return out, err
		}
		item, _ := res.LastInsertId()
		if _, err := exec("INSERT INTO item_stock (item_id, stock) VALUES (?, 0)", item); err != nil {
			return out, err
		}
		// A sale a day, the last one ended a day ago.
		starts := now.Add(-time.Duration(sales-i+1) * 24 * time.Hour)
		var warmed, cancelled any
		if i%8 != 7 { // every 8th ended while no consumer ran
			warmed = starts.Add(-5 * time.Minute)
		}
		if i == sales/2 {
			cancelled = starts.Add(10 * time.Minute)
		}
		res, err = exec(`INSERT INTO activities (item_id, starts_at, ends_at, per_user_limit, warmed_at, cancelled_at)
			VALUES (?, ?, ?, 1, ?, ?)`, item, starts, starts.Add(30*time.Minute), warmed, cancelled)
		if err != nil {
			return out, err
		}
		act, _ := res.LastInsertId()
		if _, err := exec("INSERT INTO history_sales (idx, item_id, activity_id, starts_at, cancelled) VALUES (?, ?, ?, ?, ?)",
			i, item, act, starts, cancelled != nil); err != nil {
			return out, err
		}
		out.Items, out.Activities = append(out.Items, item), append(out.Activities, act)
	}
	// r is the order's number in the history; its sale is r mod sales, its
	// status r mod 20.
	// st is the order's status slot: (r div sales) mod 20; a cancelled
	// sale's unpaid orders were all closed.
	q := strings.Replace(`INSERT INTO orders (order_no, user_id, item_id, activity_id, quantity, status, failure_reason,
			idempotency_key, pay_deadline, released_at, reserved_at, created_at, updated_at)
		SELECT CONCAT('H', ?, LPAD(r, 19, '0'), '-', item_id), CONCAT('h', ?, '-', r), item_id, activity_id, 1,
			CASE WHEN st < 10 THEN 'PAID' WHEN st < 15 OR (st = 19 AND cancelled) THEN 'CLOSED'
				WHEN st < 19 THEN 'FAILED' ELSE 'CREATED' END,
			CASE WHEN st < 10 THEN NULL WHEN st < 15 THEN 'PAYMENT_TIMEOUT' WHEN st < 19 THEN 'OUT_OF_STOCK'
				WHEN cancelled THEN 'SALE_CANCELLED' END,
			CONCAT('k', r),
			CASE WHEN st = 19 AND NOT cancelled THEN ? WHEN st < 15 OR st = 19 THEN t + INTERVAL 15 MINUTE END,
			CASE WHEN st BETWEEN 10 AND 14 OR (st = 19 AND cancelled) THEN t + INTERVAL 16 MINUTE END,
			t, t, t + INTERVAL 16 MINUTE
		FROM (SELECT r, (r DIV SALES) % 20 AS st, s.item_id, s.activity_id, s.cancelled,
		             s.starts_at + INTERVAL (r DIV SALES) % 1800 SECOND AS t
		      FROM (SELECT ? + a.n * 1000 + b.n AS r FROM history_seq a JOIN history_seq b
		            WHERE a.n < 100 AND a.n * 1000 + b.n < ?) q
		      JOIN history_sales s ON s.idx = q.r % SALES) o`, "SALES", fmt.Sprint(sales), -1)
	open := now.Add(365 * 24 * time.Hour)
	for base := 0; base < h.Orders; base += 100_000 {
		n := min(100_000, h.Orders-base)
		if _, err := exec(q, mark, mark, open, base, n); err != nil {
			return out, err
		}
	}
	out.Orders = h.Orders
	rows, err := conn.QueryContext(ctx, `SELECT o.status, COUNT(*) FROM orders o JOIN history_sales s ON s.activity_id = o.activity_id
		GROUP BY o.status`)
	if err != nil {
		return out, fmt.Errorf("history: count: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return out, fmt.Errorf("history: count: %w", err)
		}
		switch st {
		case "PAID":
			out.Paid = n
		case "CLOSED":
			out.Closed = n
		case "FAILED":
			out.Failed = n
		case "CREATED":
			out.Created = n
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("history: count: %w", err)
	}
	// Fresh statistics, as a database that grew to this size has.
	if _, err := exec("ANALYZE TABLE orders, activities"); err != nil {
		return out, err
	}
	return out, nil
}

// OneSession opens d's database again with a single connection, so the
// statements sent through it share one session, whose status counters
// RowsRead reads. Closed at the end of the test.
func (d *DB) OneSession(t testing.TB) *orderdb.DB {
	t.Helper()
	db, err := orderdb.Open(orderdb.Config{DSN: d.DSN, MaxOpenConns: 1})
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// RowsRead runs f and returns how many index entries and rows the
// statements it sent through session (from OneSession) read: the change
// of the session's Handler_read_* counters, plus the entries index
// condition pushdown read and threw away inside the engine (MariaDB's
// Handler_icp_attempts less Handler_icp_match; Handler_read_* counts only
// what the engine returns), less what reading them costs. It is the
// figure EXPLAIN's "rows" estimates, counted.
func RowsRead(t testing.TB, session *orderdb.DB, f func()) int64 {
	t.Helper()
	read := func() int64 {
		var rows []struct {
			Name  string `gorm:"column:Variable_name"`
			Value int64  `gorm:"column:Value"`
		}
		if err := session.Gorm().Raw("SHOW SESSION STATUS LIKE 'Handler_%'").Scan(&rows).Error; err != nil {
			t.Fatalf("mysqltest: read the session's status: %v", err)
		}
		var n int64
		for _, r := range rows {
			switch {
			case strings.HasPrefix(r.Name, "Handler_read_"), r.Name == "Handler_icp_attempts":
				n += r.Value
			case r.Name == "Handler_icp_match":
				n -= r.Value
			}
		}
		return n
	}
	a := read()
	b := read() // what a read costs
	f()
	c := read()
	return c - b - (b - a)
}
