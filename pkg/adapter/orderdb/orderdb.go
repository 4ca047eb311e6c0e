// Package orderdb is the MySQL side of the pipeline, through GORM: the
// schema migrations, items, activities, and orders. MySQL is the final
// truth: the conditional stock update and the unique keys decide.
package orderdb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckill/seckill/pkg/domain/order"
	schema "github.com/seckill/seckill/sql"
)

// DefaultDSN works with scripts/services.
const DefaultDSN = "seckill:seckill@tcp(127.0.0.1:3306)/seckill?parseTime=true"

// Config says how to reach MySQL.
type Config struct {
	DSN          string
	MaxOpenConns int
	// NoEvents turns the outbox off: no order change writes its event,
	// so nothing reaches the events' topic or the webhooks (a shop that
	// takes none; docs/events.md).
	NoEvents bool
}

// DB is the connection pool and the stores that share it, one per
// aggregate.
type DB struct {
	gdb *gorm.DB

	Orders       *Orders
	Payments     *Payments
	Activities   *Activities
	Restocks     *Restocks
	Draws        *Draws
	Rooms        *Rooms
	RedisWatches *RedisWatches
	Reconcile    *Reconcile
	Outbox       *Outbox
	Webhooks     *Webhooks
	Streams      *Streams
	Audit        *Audit
	Codes        *Codes
}

// Orders stores the orders: fulfilment of the reserved ones, lookups and
// lists, the idempotency keys, the order numbers' key, and the moves of an
// order's life (pay, close, release, expiry).
type Orders struct{ conn }

// Payments stores the payments of the orders.
type Payments struct {
	conn
	orders *Orders
}

// Activities stores the sales and their items: creation, changes and end,
// the settings of the stock keys, the warm-up marks, and the tallies.
type Activities struct{ conn }

// Restocks stores the items' restocks and reads the stock a warm-up loads.
type Restocks struct{ conn }

// Draws stores the draws: the entries, the run and its record, the picks.
type Draws struct{ conn }

// Rooms stores the waiting rooms' joins and their rebuilds.
type Rooms struct{ conn }

// RedisWatches stores what the consumer saw of Redis' runs and losses.
type RedisWatches struct{ conn }

// Reconcile is the reconciler's read side: the sales to check and the
// stock, orders and keys MySQL holds for them.
type Reconcile struct {
	conn
	restocks *Restocks
}

func newDB(gdb *gorm.DB) *DB {
	c := conn{gdb}
	orders, restocks := &Orders{c}, &Restocks{c}
	return &DB{
		gdb:          gdb,
		Orders:       orders,
		Payments:     &Payments{c, orders},
		Activities:   &Activities{c},
		Restocks:     restocks,
		Draws:        &Draws{c},
		Rooms:        &Rooms{c},
		RedisWatches: &RedisWatches{c},
		Reconcile:    &Reconcile{c, restocks},
		Outbox:       &Outbox{conn: c},
		Webhooks:     &Webhooks{c},
		Streams:      &Streams{c},
		Audit:        &Audit{c},
		Codes:        &Codes{c},
	}
}

// Open connects to MySQL. It does not migrate.
func Open(cfg Config) (*DB, error) {
	dsn := cfg.DSN
	if dsn == "" {
		dsn = DefaultDSN
	}
	mc, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	mc.ParseTime = true
	mc.Loc = time.UTC
	if mc.Params == nil {
		mc.Params = map[string]string{}
	}
	// Times are stored in UTC whatever the server's zone.
	mc.Params["time_zone"] = "'+00:00'"
	gdb, err := gorm.Open(mysql.New(mysql.Config{DSNConfig: mc}), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		PrepareStmt:            false,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w: %w", order.ErrUnavailable, err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, err
	}
	n := cfg.MaxOpenConns
	if n <= 0 {
		n = 32
	}
	sqlDB.SetMaxOpenConns(n)
	sqlDB.SetMaxIdleConns(n)
	sqlDB.SetConnMaxLifetime(30 * time.Minute)
	db := newDB(gdb)
	db.Outbox.off = cfg.NoEvents
	return db, nil
}

// Gorm returns the GORM handle.
func (db *DB) Gorm() *gorm.DB { return db.gdb }

// Close closes the connection pool.
func (db *DB) Close() error {
	sqlDB, err := db.gdb.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks that MySQL answers.
func (db *DB) Ping(ctx context.Context) error {
	sqlDB, err := db.gdb.DB()
	if err != nil {
		return err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("mysql ping: %w: %w", order.ErrUnavailable, err)
	}
	return nil
}

// Now reads MySQL's clock (the session's zone is UTC): the one clock of a
// sale's window, which package clock anchors every process to.
func (db *DB) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := db.gdb.WithContext(ctx).Raw("SELECT NOW(6)").Scan(&now).Error; err != nil {
		return time.Time{}, wrap("read mysql clock", err)
	}
	return now.UTC(), nil
}

// Migrate applies the schema files of package sql that are not applied yet,
// in name order, under a server-wide named lock so programs starting
// together do not race.
func (db *DB) Migrate(ctx context.Context) error {
	conn, err := db.gdb.DB()
	if err != nil {
		return err
	}
	c, err := conn.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w: %w", order.ErrUnavailable, err)
	}
	defer c.Close()
	var got int
	if err := c.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT(DATABASE(), '.migrate'), 60)").Scan(&got); err != nil || got != 1 {
		return fmt.Errorf("migrate: take lock: %v (got %d)", err, got)
	}
	defer c.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(CONCAT(DATABASE(), '.migrate'))")

	if _, err := c.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version VARCHAR(64) NOT NULL PRIMARY KEY,
		applied_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	names, err := fs.Glob(schema.Files, "*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		version := strings.TrimSuffix(name, ".sql")
		var n int
		if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations WHERE version = ?", version).Scan(&n); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if n > 0 {
			continue
		}
		body, err := schema.Files.ReadFile(name)
		if err != nil {
			return err
		}
		for _, stmt := range splitStatements(string(body)) {
			if _, err := c.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migrate %s: %w", name, err)
			}
		}
		if _, err := c.ExecContext(ctx, "INSERT INTO schema_migrations (version) VALUES (?)", version); err != nil {
			return fmt.Errorf("migrate %s: %w", name, err)
		}
	}
	return nil
}

// splitStatements splits a schema file on semicolons that end a line,
// dropping comment lines. A line "DELIMITER x" makes x the end of a
// statement instead, until "DELIMITER ;", as in the mysql client: a
// trigger's body holds semicolons of its own.
func splitStatements(body string) []string {
	var out []string
	var cur strings.Builder
	delim := ";"
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		if d, ok := strings.CutPrefix(t, "DELIMITER "); ok {
			delim = strings.TrimSpace(d)
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, delim) {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), delim))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// isTransient reports whether err means MySQL could not be reached or the
// statement may succeed when retried (deadlock, lock wait timeout).
func isTransient(err error) bool {
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1205, 1213, // lock wait timeout, deadlock
			1040, 1053, 1927: // too many connections, shutdown in progress, connection killed
			return true
		}
		return false
	}
	return err != nil
}

// duplicateKey returns the name of the unique key a MySQL 1062 error names,
// or "" when err is not a duplicate-key error.
func duplicateKey(err error) string {
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) && me.Number == 1062 {
		for _, k := range []string{"uk_orders_order_no", "uk_orders_live", "uk_orders_key", "uk_payments_transaction"} {
			if strings.Contains(me.Message, k) {
				return k
			}
		}
		return "unknown"
	}
	return ""
}
