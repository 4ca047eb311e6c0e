package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/bench/internal/procs"
	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// The reconcile scenario builds a sale of many orders that the pipeline
// would have left settled, straight into a MySQL database and a
// redis-server of its own (so it may FLUSHALL and roll Redis back, and no
// other program's periodic pass, nor another reconciler on the shared
// database, ever meets a million orders it did not make), then runs the
// reconciler program against it, as its own process, timing each run and
// reading its peak resident memory.
const (
	// recRollbackOrders is how many orders are placed between the copy of
	// Redis and Redis coming back from it (fewer for a small sale).
	recRollbackOrders = 5000
	// recChunk is the orders of one reserve/INSERT/confirm round;
	// recWorkers rounds run at once.
	recChunk   = 2000
	recWorkers = 4
	// recReserving bounds the reservations of one round in flight (the
	// Store batches them into scripts of up to 64 orders).
	recReserving = 256
	// recPaymentWindow is the activity's payment window.
	recPaymentWindow = 30 * time.Minute
	// recUserBase is the first buyer's id.
	recUserBase = 1_000_000
	// recPrefix is the Redis key prefix in the private redis-server.
	recPrefix = "benchrec"
)

// recSale is the sale being built and the private stores it lives in.
type recSale struct {
	db          *orderdb.DB
	dbName, dsn string
	dropDB      func() error
	redis       *privateRedis
	rdb         redis.UniversalClient
	store       *stockredis.Store
	// admin sends the commands that take long on millions of keys
	// (FLUSHALL, BGSAVE, SHUTDOWN), with no read timeout.
	admin          *redis.Client
	item, activity int64
	endsAt         time.Time
	gen            *order.NumberGenerator

	mu           sync.Mutex
	placed, paid int64
}

// reconcile runs the scenario: build, then the reconciler's steps.
func (e *env) reconcile(ctx context.Context) (*report.Reconcile, error) {
	n := e.opts.orders
	stock := n + n/5
	if e.opts.stock > 0 {
		stock = e.opts.stock
	}
	if stock < n {
		return nil, fmt.Errorf("--stock %d is less than --orders %d", stock, n)
	}
	bin, err := os.MkdirTemp("", "seckill-bench-reconciler-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bin)
	e.meter.say("reconcile: building the reconciler")
	if err := procs.Build(ctx, e.root, bin, "./reconciler"); err != nil {
		return nil, err
	}
	s, err := e.newRecSale(ctx)
	if s != nil {
		defer func() {
			if cerr := s.close(e.opts.keepData); cerr != nil {
				e.meter.say("reconcile: cleanup: %v", cerr)
			}
		}()
	}
	if err != nil {
		return nil, err
	}
	rc := &report.Reconcile{Orders: n, Buyers: n, Stock: stock, ItemID: s.item, ActivityID: s.activity,
		Database: s.dbName, RedisAddr: s.redis.addr}

	e.meter.say("reconcile: building a settled sale of %d orders (stock %d) in database %s and redis-server %s", n, stock, s.dbName, s.redis.addr)
	start := time.Now()
	if err := s.create(ctx, stock); err != nil {
		return rc, err
	}
	if err := s.place(ctx, n, e.meter); err != nil {
		return rc, fmt.Errorf("build the sale: %w", err)
	}
	rc.BuildSeconds = time.Since(start).Seconds()
	rc.Paid = s.paid
	rc.RedisKeys, rc.RedisMemoryMiB = s.redisSize(ctx)
	e.meter.say("reconcile: built in %.1f s (%.0f orders/s); Redis holds %d keys, %.0f MiB", rc.BuildSeconds,
		float64(n)/rc.BuildSeconds, rc.RedisKeys, rc.RedisMemoryMiB)
	// A copy of the settled state: when a repair does not finish, Redis
	// comes back from it so that the next step starts settled again.
	built := filepath.Join(s.redis.dir, "built.rdb")
	if err := s.redis.snapshot(ctx, s.admin, built); err != nil {
		return rc, err
	}

	// step runs the reconciler once, after before (if any) changed the
	// stores.
	step := func(name, beforeName string, before func() error, args ...string) error {
		st := report.ReconcileStep{Name: name, Before: beforeName, Args: "reconciler " + strings.Join(args, " ")}
		if before != nil {
			t0 := time.Now()
			if err := before(); err != nil {
				return fmt.Errorf("%s: %s: %w", name, beforeName, err)
			}
			st.BeforeSeconds = time.Since(t0).Seconds()
		}
		file := "reconcile-" + strconv.Itoa(len(rc.Steps)+1)
		st.Stdout, st.Stderr = file+".out", file+".err"
		e.meter.say("reconcile: %s: %s", name, st.Args)
		o, err := procs.RunToEnd(ctx, filepath.Join(bin, "reconciler"), args, s.reconcilerEnv(),
			filepath.Join(e.dir, st.Stdout), filepath.Join(e.dir, st.Stderr))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		st.ExitCode, st.Seconds, st.MaxRSSMiB = o.Code, o.Took.Seconds(), float64(o.MaxRSS)/(1<<20)
		st.Summary = lastLine(filepath.Join(e.dir, st.Stdout))
		if !st.OK() {
			st.StderrTail = tailLines(filepath.Join(e.dir, st.Stderr), 6)
		}
		e.meter.say("reconcile: %s: exit %d (want %d) in %.2f s, max RSS %.0f MiB: %s", name, st.ExitCode, st.WantExit,
			st.Seconds, st.MaxRSSMiB, st.Summary)
		rc.Steps = append(rc.Steps, st)
		return nil
	}
	item := "--item=" + strconv.FormatInt(s.item, 10)
	if err := step("clean check", "", nil, item); err != nil {
		return rc, err
	}
	if err := step("repair after FLUSHALL", "FLUSHALL", func() error { return s.admin.FlushAll(ctx).Err() }, item, "--repair"); err != nil {
		return rc, err
	}
	if err := step("check after the FLUSHALL repair", "", nil, item); err != nil {
		return rc, err
	}
	more := min(recRollbackOrders, max(n/10, 1))
	var rollback string
	unsettled := !rc.Steps[len(rc.Steps)-1].OK()
	restore := func() error {
		if unsettled {
			// The repair after FLUSHALL did not finish: MySQL is as
			// built (the repair writes only Redis here: the sale has no
			// restocks to mark applied), Redis is not.
			if err := s.redis.restartFrom(ctx, s.admin, built); err != nil {
				return err
			}
		}
		copyPath := filepath.Join(s.redis.dir, "copy.rdb")
		if err := s.redis.snapshot(ctx, s.admin, copyPath); err != nil {
			return err
		}
		taken := time.Now()
		if err := s.place(ctx, more, nil); err != nil {
			return err
		}
		if err := s.redis.restartFrom(ctx, s.admin, copyPath); err != nil {
			return err
		}
		rollback = fmt.Sprintf("%d more orders, then Redis restarted from a copy taken %.1f s before", more, time.Since(taken).Seconds())
		if unsettled {
			rollback = "Redis first brought back from a copy of the built sale (the repair after FLUSHALL left it unrepaired); " + rollback
		}
		return nil
	}
	if err := step("repair after a rollback", "copy of Redis, more orders, Redis back from the copy", restore, item, "--repair"); err != nil {
		return rc, err
	}
	rc.Steps[len(rc.Steps)-1].Before = rollback
	if err := step("check after the rollback repair", "", nil, item); err != nil {
		return rc, err
	}
	rc.RollbackOrders = more
	rc.Paid = s.paid
	if rc.FinalMySQLStock, err = s.db.Activities.ItemStock(ctx, s.item); err != nil {
		return rc, err
	}
	snap, err := s.store.Stock.Stock(ctx, reservation.One(s.item))
	if err != nil {
		return rc, err
	}
	rc.FinalRedisStock, rc.FinalInflight = snap.Stock, snap.Inflight
	rc.Completed = true
	return rc, nil
}

// newRecSale makes the private database (migrated) and starts the private
// redis-server. On an error it returns what it made, for close.
func (e *env) newRecSale(ctx context.Context) (*recSale, error) {
	s := &recSale{gen: order.NewNumberGenerator(), item: 1, activity: 1}
	dir, err := os.MkdirTemp("", "seckill-bench-redis-")
	if err != nil {
		return nil, err
	}
	s.redis = &privateRedis{dir: dir, log: filepath.Join(e.dir, "redis-reconcile.log")}
	if err := s.redis.start(ctx); err != nil {
		return s, err
	}
	s.rdb = stockredis.NewClient(stockredis.Config{Addrs: []string{s.redis.addr}, Prefix: recPrefix})
	s.store = stockredis.New(s.rdb, recPrefix)
	s.admin = redis.NewClient(&redis.Options{Addr: s.redis.addr, ReadTimeout: -1, MaxRetries: -1})
	// The run's id and a suffix of its own: with --topology both, each
	// session makes its own.
	s.dbName = "seckill_bench_" + strings.ToLower(strings.ReplaceAll(e.runID, "-", "_")) + "_" + newDBName()
	if s.dsn, s.dropDB, err = createDatabase(ctx, e.opts.mysqlDSN, s.dbName); err != nil {
		return s, err
	}
	if s.db, err = orderdb.Open(orderdb.Config{DSN: s.dsn, MaxOpenConns: 2 * recWorkers}); err != nil {
		return s, err
	}
	if err := s.db.Migrate(ctx); err != nil {
		return s, fmt.Errorf("migrate %s: %w", s.dbName, err)
	}
	return s, nil
}

// close stops the private Redis and drops the private database (kept with
// --keep-data).
func (s *recSale) close(keep bool) error {
	var errs []error
	if s.rdb != nil {
		s.rdb.Close()
	}
	if s.admin != nil {
		s.admin.Close()
	}
	if s.redis != nil {
		errs = append(errs, s.redis.stop())
		os.RemoveAll(s.redis.dir)
	}
	if s.db != nil {
		s.db.Close()
	}
	if s.dropDB != nil && !keep {
		errs = append(errs, s.dropDB())
	}
	return errors.Join(errs...)
}

// reconcilerEnv points the reconciler at the private stores.
func (s *recSale) reconcilerEnv() []string {
	return []string{
		"SECKILL_REDIS_ADDR=" + s.redis.addr,
		"SECKILL_REDIS_ADDRS=" + s.redis.addr,
		"SECKILL_REDIS_CLUSTER=false",
		"SECKILL_REDIS_PREFIX=" + recPrefix,
		"SECKILL_MYSQL_DSN=" + s.dsn,
		"SECKILL_LOG_LEVEL=info",
	}
}

// create writes the item, its stock and a running activity already warmed
// up (warmed_at set, as the warm-up leaves it) to MySQL, and warms the
// item's stock into Redis with the warm-up's own script.
func (s *recSale) create(ctx context.Context, stock int64) error {
	now := time.Now().UTC()
	s.endsAt = now.Add(3 * time.Hour)
	g := s.db.Gorm().WithContext(ctx)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO items (id, name) VALUES (?, ?)", []any{s.item, "bench reconcile"}},
		{"INSERT INTO item_stock (item_id, stock) VALUES (?, ?)", []any{s.item, stock}},
		{`INSERT INTO activities (id, item_id, starts_at, ends_at, per_user_limit, payment_window_seconds, stock_buckets, warmed_at)
			VALUES (?, ?, ?, ?, 1, ?, 1, NOW(3))`, []any{s.activity, s.item, now.Add(-time.Minute), s.endsAt, int(recPaymentWindow.Seconds())}},
	} {
		if err := g.Exec(q.sql, q.args...).Error; err != nil {
			return fmt.Errorf("create the sale: %w", err)
		}
	}
	ttl := s.endsAt.Sub(now) + recPaymentWindow + order.KeyMargin
	if _, err := s.store.Stock.WarmupFrom(ctx, reservation.One(s.item), 1, ttl, s.db.Restocks); err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	return nil
}

// place places n more orders, each of a new buyer, as the pipeline would
// settle them: the reserve script (through the Store, which batches
// concurrent reservations into one script run), the MySQL commit (one
// multi-row INSERT and the stock's UPDATE in one transaction per round),
// then the confirm script. m, if not nil, shows the progress.
func (s *recSale) place(ctx context.Context, n int64, m *meter) error {
	s.mu.Lock()
	from := s.placed
	s.mu.Unlock()
	update, done := func(time.Duration, int64) {}, func() {}
	if m != nil {
		update, done = m.track("reconcile build", 0, n)
	}
	defer done()
	start := time.Now()
	rounds := make(chan [2]int64)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		placed   int64
		mu       sync.Mutex
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range recWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				paid, err := s.round(ctx, r[0], r[1])
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					continue
				}
				mu.Lock()
				placed += r[1]
				s.paid += paid
				p := placed
				mu.Unlock()
				update(time.Since(start), p)
			}
		}()
	}
feed:
	for i := int64(0); i < n; i += recChunk {
		select {
		case rounds <- [2]int64{from + i, min(recChunk, n-i)}:
		case <-ctx.Done():
			break feed
		}
	}
	close(rounds)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	s.placed += n
	s.mu.Unlock()
	return nil
}

// round places the orders of buyers from..from+n-1 and returns how many of
// them it wrote PAID (every fifth buyer).
func (s *recSale) round(ctx context.Context, from, n int64) (int64, error) {
	now := time.Now().UTC()
	rs := make([]reservation.Reservation, n)
	for i := range rs {
		b := from + int64(i)
		rs[i] = reservation.Reservation{OrderNo: s.gen.Next(s.item), UserID: strconv.FormatInt(recUserBase+b, 10),
			ItemID: s.item, ActivityID: s.activity, Quantity: 1, IdempotencyKey: "rc" + strconv.FormatInt(b, 36), At: now,
			QuotaTTL: s.endsAt.Sub(now) + order.KeyMargin, ReservationTTL: s.endsAt.Sub(now) + recPaymentWindow + order.KeyMargin}
	}
	errs := make([]error, n)
	sem := make(chan struct{}, recReserving)
	var wg sync.WaitGroup
	for i := range rs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			res, err := s.store.Reservations.Reserve(ctx, rs[i])
			if err == nil && (res.Duplicate || res.OrderNo != rs[i].OrderNo) {
				err = fmt.Errorf("reserve %s: answered as a duplicate of %s", rs[i].OrderNo, res.OrderNo)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if failed := slices.DeleteFunc(errs, func(err error) bool { return err == nil }); len(failed) > 0 {
		return 0, fmt.Errorf("reserve: %d of %d orders failed, the first: %w", len(failed), n, failed[0])
	}

	// One statement of literal values (no placeholders: a round's
	// thousands of values would pass MySQL's limit of 65,535). Every value
	// is made here: numbers, base-36 keys, order numbers and times.
	var q strings.Builder
	q.Grow(int(n) * 200)
	q.WriteString("INSERT INTO orders (order_no, user_id, item_id, activity_id, quantity, status, idempotency_key, pay_deadline, reserved_at, created_at) VALUES ")
	const layout = "2006-01-02 15:04:05.000"
	at, deadline := now.Format(layout), now.Add(recPaymentWindow).Format(layout)
	var paid int64
	for i, r := range rs {
		status := order.Created
		if (from+int64(i))%5 == 4 {
			status, paid = order.Paid, paid+1
		}
		if i > 0 {
			q.WriteByte(',')
		}
		fmt.Fprintf(&q, "('%s','%s',%d,%d,1,'%s','%s','%s','%s','%s')", r.OrderNo, r.UserID, s.item, s.activity, status,
			r.IdempotencyKey, deadline, at, at)
	}
	err := s.db.Gorm().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(q.String()).Error; err != nil {
			return fmt.Errorf("insert orders: %w", err)
		}
		res := tx.Exec("UPDATE item_stock SET stock = stock - ? WHERE item_id = ? AND stock >= ?", n, s.item, n)
		if res.Error != nil {
			return fmt.Errorf("take stock: %w", res.Error)
		}
		if res.RowsAffected != 1 {
			return fmt.Errorf("take stock: MySQL has less than %d units left", n)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for i := 0; i < len(rs); i += 1000 {
		nos := make([]string, 0, 1000)
		for _, r := range rs[i:min(i+1000, len(rs))] {
			nos = append(nos, r.OrderNo)
		}
		moved, err := s.store.Reservations.Confirm(ctx, reservation.One(s.item), nos)
		if err != nil {
			return 0, err
		}
		if moved != int64(len(nos)) {
			return 0, fmt.Errorf("confirm: %d of %d reservations moved to CONFIRMED", moved, len(nos))
		}
	}
	return paid, nil
}

// redisSize is the private Redis's key count and used memory in MiB.
func (s *recSale) redisSize(ctx context.Context) (int64, float64) {
	keys, _ := s.rdb.DBSize(ctx).Result()
	info, _ := s.rdb.Info(ctx, "memory").Result()
	used, _ := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
	return keys, float64(used) / (1 << 20)
}

// infoField is one field of an INFO answer ("" when absent).
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// createDatabase creates database name on the server of base (a DSN whose
// database is ignored) and returns its DSN and a function dropping it.
func createDatabase(ctx context.Context, base, name string) (string, func() error, error) {
	cfg, err := mysqldrv.ParseDSN(base)
	if err != nil {
		return "", nil, fmt.Errorf("mysql dsn: %w", err)
	}
	admin := *cfg
	admin.DBName = ""
	raw, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	if _, err := raw.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		raw.Close()
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func() error {
		defer raw.Close()
		if _, err := raw.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	own := *cfg
	own.DBName = name
	return own.FormatDSN(), drop, nil
}

// privateRedis is a redis-server the bench starts for itself, without
// persistence but for the snapshots it asks for.
type privateRedis struct {
	dir, log, addr string
	proc           *procs.Process
}

// start runs redis-server (on a free port the first time, the same one
// after) from the dump.rdb in dir, if any, and waits until it answers.
func (r *privateRedis) start(ctx context.Context) error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("the reconcile scenario runs a redis-server of its own: %w", err)
	}
	if r.addr == "" {
		port, err := procs.FreePort()
		if err != nil {
			return err
		}
		r.addr = "127.0.0.1:" + strconv.Itoa(port)
	}
	_, port, _ := strings.Cut(r.addr, ":")
	args := []string{"--port", port, "--bind", "127.0.0.1", "--dir", r.dir, "--dbfilename", "dump.rdb",
		"--save", "", "--appendonly", "no", "--daemonize", "no"}
	if r.proc, err = procs.StartArgs("redis-reconcile", bin, args, nil, r.log); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(2 * time.Minute) // loading a large RDB takes a while
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if exited, werr := r.proc.Exited(); exited {
			return fmt.Errorf("redis-server exited while starting (%v); see %s", werr, r.log)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server at %s not ready: %w; see %s", r.addr, err, r.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// snapshot makes Redis write its data (BGSAVE), waits for it, and copies
// the file to path.
func (r *privateRedis) snapshot(ctx context.Context, rdb redis.UniversalClient, path string) error {
	if err := rdb.BgSave(ctx).Err(); err != nil {
		return fmt.Errorf("bgsave: %w", err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		info, err := rdb.Info(ctx, "persistence").Result()
		if err != nil {
			return err
		}
		if infoField(info, "rdb_bgsave_in_progress") == "0" {
			if st := infoField(info, "rdb_last_bgsave_status"); st != "ok" {
				return fmt.Errorf("bgsave: status %q; see %s", st, r.log)
			}
			break
		}
		if time.Now().After(deadline) {
			return errors.New("bgsave did not finish within 5 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return copyFile(filepath.Join(r.dir, "dump.rdb"), path)
}

// restartFrom stops Redis without saving and starts it again from the
// copy at path: Redis comes back from an older state, as after a restore
// from a backup or a failover to a replica that lagged.
func (r *privateRedis) restartFrom(ctx context.Context, rdb redis.UniversalClient, path string) error {
	_ = rdb.ShutdownNoSave(ctx).Err() // the connection closes: no answer
	if err := r.proc.Stop(30 * time.Second); err != nil {
		return err
	}
	if err := copyFile(path, filepath.Join(r.dir, "dump.rdb")); err != nil {
		return err
	}
	return r.start(ctx)
}

// stop stops Redis without saving.
func (r *privateRedis) stop() error {
	if r.proc == nil {
		return nil
	}
	return r.proc.Stop(10 * time.Second)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// lastLine is the last non-empty line of the file at path (read from its
// last 8 KiB: a repair of a million orders prints a line each).
func lastLine(path string) string {
	lines := strings.Split(strings.TrimRight(tail(path, 8<<10), "\n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// tailLines is the last n lines of the file at path.
func tailLines(path string, n int) string {
	lines := strings.Split(strings.TrimRight(tail(path, 16<<10), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// tail is the last size bytes of the file at path, starting at a line.
func tail(path string, size int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-size, 0)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	if off > 0 {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// newDBName is a random suffix for names that must not collide.
func newDBName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
