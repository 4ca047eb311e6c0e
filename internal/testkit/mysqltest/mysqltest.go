// Package mysqltest gives each test its own MySQL database, migrated from
// the project's schema files, on the running server (scripts/services).
// An unreachable server fails the test; the database is dropped afterwards.
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/pkg/adapter/orderdb"
)

// BaseDSN is the server tests use: SECKILL_MYSQL_DSN or the default.
func BaseDSN() string {
	if d := os.Getenv("SECKILL_MYSQL_DSN"); d != "" {
		return d
	}
	return orderdb.DefaultDSN
}

// DB is a migrated test database.
type DB struct {
	*orderdb.DB
	Name string
	DSN  string
}

// New creates a database named seckill_test_<random>, applies the schema
// and returns it.
func New(t testing.TB) *DB {
	t.Helper()
	return NewOn(t, BaseDSN())
}

// NewOn is New on the server of base, a DSN whose database is ignored.
func NewOn(t testing.TB, base string) *DB {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(base)
	if err != nil {
		t.Fatalf("mysqltest: bad DSN: %v", err)
	}
	admin := *cfg
	admin.DBName = ""
	raw, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := raw.PingContext(ctx); err != nil {
		t.Fatalf("mysqltest: MySQL at %s does not answer (run `scripts/services up`): %v", cfg.Addr, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "seckill_test_" + hex.EncodeToString(b)
	if _, err := raw.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("mysqltest: create database: %v", err)
	}
	own := *cfg
	own.DBName = name
	dsn := own.FormatDSN()
	db, err := orderdb.Open(orderdb.Config{DSN: dsn, MaxOpenConns: 16})
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	t.Cleanup(func() {
		db.Close()
		defer raw.Close()
		if t.Failed() {
			// What the test left is the evidence: kept, and named.
			t.Logf("mysqltest: the failed test's database is kept: %s on %s", name, cfg.Addr)
			return
		}
		raw.Exec("DROP DATABASE IF EXISTS " + name)
	})
	// Fourteen migrations' DDL, each committed with a flush: on a loaded
	// machine (tests in parallel beside a soak) they take seconds.
	mctx, mcancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer mcancel()
	if err := db.Migrate(mctx); err != nil {
		t.Fatalf("mysqltest: migrate: %v", err)
	}
	return &DB{DB: db, Name: name, DSN: dsn}
}
