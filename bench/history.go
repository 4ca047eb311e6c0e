package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
)

// withHistory moves the bench onto a database of its own on the server of
// e.opts.mysqlDSN, migrates it and loads opts.history historical orders
// into it (mysqltest.LoadHistory), then waits for InnoDB to write the load
// out, so that what the idle scenario measures next is the programs, not
// the load's aftermath. e.opts.mysqlDSN names the new database from then
// on (the programs get it); close drops it unless --keep-data.
func (e *env) withHistory(ctx context.Context) error {
	cfg, err := mysqldrv.ParseDSN(e.opts.mysqlDSN)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "seckill_bench_" + hex.EncodeToString(b)
	if err := e.db.Gorm().WithContext(ctx).Exec("CREATE DATABASE " + name).Error; err != nil {
		return fmt.Errorf("history: create database: %w", err)
	}
	e.historyDB = name
	cfg.DBName = name
	e.opts.mysqlDSN = cfg.FormatDSN()
	e.db.Close()
	e.db, err = orderdb.Open(orderdb.Config{DSN: e.opts.mysqlDSN, MaxOpenConns: 64})
	if err != nil {
		return err
	}
	if err := e.db.Migrate(ctx); err != nil {
		return fmt.Errorf("history: migrate: %w", err)
	}
	e.meter.say("history: loading %d orders into database %s", e.opts.history, name)
	start := time.Now()
	l, err := mysqltest.LoadHistory(ctx, e.db, mysqltest.History{Orders: e.opts.history})
	if err != nil {
		return err
	}
	e.meter.say("history: %d orders of %d sales (%d paid, %d closed, %d failed, %d created and not due) in %s",
		l.Orders, len(l.Activities), l.Paid, l.Closed, l.Failed, l.Created, time.Since(start).Round(time.Second))
	// InnoDB flushes the pages the load dirtied for a while after it; wait
	// until few are left, or their number stops falling for 5 s (other
	// work on the server keeps some dirty), at most two minutes, so that
	// the services' idle figure is theirs and not the load's aftermath.
	deadline := time.Now().Add(2 * time.Minute)
	low, lowAt := int64(-1), time.Now()
	for {
		var row struct {
			Name  string `gorm:"column:Variable_name"`
			Value int64  `gorm:"column:Value"`
		}
		if err := e.db.Gorm().WithContext(ctx).Raw("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'").Scan(&row).Error; err != nil {
			return fmt.Errorf("history: %w", err)
		}
		if low < 0 || row.Value < low {
			low, lowAt = row.Value, time.Now()
		}
		if row.Value < 200 || time.Since(lowAt) > 5*time.Second || time.Now().After(deadline) {
			e.meter.say("history: written out (%d dirty pages left)", row.Value)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// dropHistory drops the bench's own database, if it made one.
func (e *env) dropHistory(ctx context.Context) error {
	if e.historyDB == "" || e.db == nil {
		return nil
	}
	if err := e.db.Gorm().WithContext(ctx).Exec("DROP DATABASE IF EXISTS " + e.historyDB).Error; err != nil {
		return fmt.Errorf("drop database %s: %w", e.historyDB, err)
	}
	return nil
}
