// Command reconciler checks, for every item on sale, that Redis stock, the
// reservations in flight and MySQL stock agree, and that every buyer with a
// live order holds its quota key in Redis. It prints a report (a table, or
// JSON with --json), logs an alert-level line per item that disagrees, and
// with --repair fixes Redis from MySQL, safely, under a distributed lock.
//
// It runs once by default (for system cron or a Kubernetes CronJob), or on
// a cron schedule of its own with --schedule. Exit codes: 0 the stores
// agree, 1 drift found (and not all of it repaired) or an item could not
// be checked or repaired (the report names it with its error; the run went
// on with the other items), 2 it could not run (or a store went down
// during the run), 3 another reconciler holds the lock. See
// docs/reconciler.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/robfig/cron/v3"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/foundation/clock"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/service/reconcile"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "reconciler:", err)
	}
	os.Exit(exitCode(err))
}

// Exit codes.
const (
	exitAgree  = 0 // every item agrees (or was repaired)
	exitDrift  = 1 // drift found and not (all) repaired, or items unchecked (their check or repair failed)
	exitFailed = 2 // could not run: bad flags or configuration, a store down, the lock lost
	exitBusy   = 3 // another reconciler holds the lock
)

// exitError carries the process's exit code with the reason.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func fail(code int, err error) error { return &exitError{code: code, err: err} }

// exitCode maps run's error to the process's exit code; an error without
// a code means the reconciler could not run.
func exitCode(err error) int {
	if err == nil {
		return exitAgree
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailed
}

// lockName is the lock every reconciler takes; lockTTL is its lease (the
// watchdog renews it while the run lasts).
const (
	lockName = reconcile.LockName
	lockTTL  = 30 * time.Second
)

type options struct {
	items, activities idList
	recheck           time.Duration
	window            time.Duration
	repair, json      bool
	schedule          string
	wait              time.Duration
	timeout           time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("reconciler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&o.items, "item", "check only this item `id` (repeat, or comma-separate)")
	fs.Var(&o.activities, "activity", "check only the item of this activity `id` (repeat, or comma-separate)")
	fs.DurationVar(&o.recheck, "recheck", reconcile.DefaultRecheck, "pause before a mismatch is read again; drift must show in two reads in a row")
	fs.DurationVar(&o.window, "window", reconcile.DefaultWindow, "also check activities that ended less than this long ago")
	fs.BoolVar(&o.repair, "repair", false, "repair drift seen in two reads in a row (Redis is set from MySQL)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON instead of a table")
	fs.StringVar(&o.schedule, "schedule", "", "run on this cron `expression` (e.g. \"0 3 * * *\", \"@every 15m\") until stopped, instead of once")
	fs.DurationVar(&o.wait, "wait", 0, "wait up to this long for another reconciler to finish (default: exit 3 at once)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up a run after this long")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: reconciler [flags]
       reconciler verify-draw (--url URL --activity ID | --file PATH)
       reconciler check-events --activity ID --file PATH

Checks that Redis and MySQL agree on every item with a live activity (or the
ones picked with --item/--activity) and prints a report. Configuration comes
from SECKILL_REDIS_ADDR (or SECKILL_REDIS_ADDRS with SECKILL_REDIS_CLUSTER=true),
SECKILL_REDIS_ADDR_MAP, SECKILL_REDIS_PREFIX, SECKILL_MYSQL_DSN,
SECKILL_MYSQL_MAX_CONNS, SECKILL_PAYMENT_WINDOW, SECKILL_ADMIN_ADDR (/metrics;
127.0.0.1:9101 by default with --schedule, else off), SECKILL_PPROF and
SECKILL_LOG_LEVEL.

Exit codes: 0 agree, 1 drift or items unchecked (named in the report with
their error), 2 could not run, 3 another reconciler is running.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.recheck <= 0:
		return o, errors.New("--recheck must be positive")
	case o.window < 0 || o.wait < 0 || o.timeout <= 0:
		return o, errors.New("--window and --wait must not be negative, --timeout must be positive")
	}
	return o, nil
}

// idList is a flag of positive ids, repeated or comma-separated.
type idList []int64

func (l *idList) String() string {
	s := make([]string, len(*l))
	for i, id := range *l {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}

func (l *idList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || id <= 0 {
			return fmt.Errorf("%q is not a positive id", p)
		}
		*l = append(*l, id)
	}
	return nil
}

// run is the whole program; its error carries the exit code (exitError).
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "verify-draw" {
		return verifyDraw(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "check-events" {
		return checkEvents(ctx, args[1:], lookup, stdout, stderr)
	}
	env := config.New(lookup)
	log := logs.New(stderr, config.LogLevel(env))
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return fail(exitFailed, err)
	}
	rcfg, mcfg := config.Redis(env), config.MySQL(env)
	window := config.PaymentWindow(env)
	adminDefault := ""
	if opts.schedule != "" {
		adminDefault = "127.0.0.1:9101" // a long-running reconciler serves /metrics
	}
	admin := config.Admin(env, adminDefault)
	clockOffset := config.TestClockOffset(env)
	if err := env.Err(); err != nil {
		return fail(exitFailed, err)
	}
	var sched cron.Schedule
	if opts.schedule != "" {
		if sched, err = cron.ParseStandard(opts.schedule); err != nil {
			return fail(exitFailed, fmt.Errorf("--schedule %q: %w", opts.schedule, err))
		}
	}
	log.Info("reconciler starting", "redis", rcfg.Addrs, "redis_cluster", rcfg.Cluster, "prefix", rcfg.Prefix,
		"mysql", maskDSN(mcfg.DSN), "repair", opts.repair, "recheck", opts.recheck.String(),
		"schedule", opts.schedule, "items", opts.items.String(), "activities", opts.activities.String())

	reg := metrics.NewRegistry()
	lm, rm := metrics.NewLock(reg), metrics.NewReconciler(reg)
	if opts.schedule != "" && admin.Addr != "" {
		adm, err := metrics.ListenAdmin(admin.Addr, metrics.AdminHandler(reg, admin.Pprof))
		switch {
		case err != nil && admin.Optional:
			log.Warn("admin listener not started; set SECKILL_ADMIN_ADDR to serve /metrics", "addr", admin.Addr, "err", err)
		case err != nil:
			return fail(exitFailed, err)
		default:
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = adm.Shutdown(sctx)
			}()
		}
	}

	db, err := orderdb.Open(mcfg)
	if err != nil {
		return fail(exitFailed, err)
	}
	defer db.Close()
	rdb := stockredis.NewClient(rcfg)
	defer rdb.Close()
	store := stockredis.New(rdb, rcfg.Prefix)
	// The reconciler's times (which sales are still checked, key TTLs)
	// follow the shared clock; a run that cannot read it yet goes on by its
	// own clock and tries again on schedule.
	clk := clock.New(db.Now, clockOffset)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = clk.Sync(cctx)
	cancel()
	if err != nil {
		log.Warn("shared clock not sampled; this process's own clock serves until it is", "err", err)
	}
	if sched != nil {
		go clk.Run(ctx, log)
	}

	host, _ := os.Hostname()
	r := &reconciler{
		opts:  opts,
		db:    db,
		store: store,
		locker: lock.New(rdb, lock.Options{Prefix: rcfg.Prefix, InstanceID: fmt.Sprintf("reconciler-%s-%d", host, os.Getpid()),
			Logger: log, OnAcquire: lm.Acquired, OnLost: lm.Lost}),
		metrics: rm,
		checker: &reconcile.Checker{
			Stock: store.Reconciler, DB: reconcile.DB{Reads: db.Reconcile, Restocks: db.Restocks, OrderLookup: db.Orders,
				Items: db.Activities, Pinger: db}, Log: log, Progress: newProgress(stderr, log), Warmer: store.Stock,
			Stores:  []reconcile.Pinger{store, db},
			Recheck: opts.recheck, PaymentWindow: window, Window: opts.window, Now: clk.Now,
		},
		log:    log,
		stdout: stdout,
	}
	if sched == nil {
		return r.once(ctx)
	}
	return r.scheduled(ctx, sched)
}

// reconciler runs checks, once or on a schedule.
type reconciler struct {
	opts    options
	db      *orderdb.DB
	store   *stockredis.Store
	locker  *lock.Locker
	checker *reconcile.Checker
	log     *slog.Logger
	stdout  io.Writer
	metrics *metrics.Reconciler
}

// once runs one check (and repair) and records its verdict in the metrics.
func (r *reconciler) once(ctx context.Context) error {
	start := time.Now()
	err := r.check(ctx)
	verdict := metrics.RunFailed
	switch exitCode(err) {
	case exitAgree:
		verdict = metrics.RunAgree
	case exitDrift:
		verdict = metrics.RunDrift
	case exitBusy:
		verdict = metrics.RunBusy
	}
	r.metrics.Run(verdict, time.Since(start), time.Now())
	return err
}

// check runs one check (and repair) under the lock and prints its report.
func (r *reconciler) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.timeout)
	defer cancel()
	if err := r.ping(ctx); err != nil {
		return fail(exitFailed, err)
	}

	l, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer l.Release(context.WithoutCancel(ctx))
	// Work stops (and repairs with it) as soon as the lock is lost.
	lctx, stop := l.Context(ctx)
	defer stop()
	r.log.Info("reconcile started", "fence", l.Fence(), "repair", r.opts.repair)

	rep, err := r.runChecker(lctx, l)
	if err != nil {
		return fail(exitFailed, r.why(l, err))
	}
	unchecked := r.record(ctx, rep)
	draws, err := r.checkDraws(lctx)
	if err != nil {
		return fail(exitFailed, r.why(l, fmt.Errorf("check draws: %w", err)))
	}
	if err := r.writeReport(rep, draws); err != nil {
		return fail(exitFailed, fmt.Errorf("write report: %w", err))
	}
	return r.verdict(ctx, l, rep, unchecked, draws)
}

// lock takes the reconcilers' lock, waiting for it up to --wait; exitBusy
// when another reconciler holds it.
func (r *reconciler) lock(ctx context.Context) (*lock.Lock, error) {
	var l *lock.Lock
	var err error
	if r.opts.wait > 0 {
		l, err = r.locker.Acquire(ctx, lockName, lock.WithTTL(lockTTL), lock.WithWait(r.opts.wait))
	} else {
		l, err = r.locker.TryLock(ctx, lockName, lock.WithTTL(lockTTL))
	}
	switch {
	case errors.Is(err, lock.ErrNotAcquired), errors.Is(err, lock.ErrTimeout):
		r.log.Info("another reconciler is running; not checking", "lock", lockName, "waited", r.opts.wait.String())
		return nil, fail(exitBusy, fmt.Errorf("another reconciler is running (lock %q is held); try later or pass --wait", lockName))
	case err != nil:
		return nil, fail(exitFailed, fmt.Errorf("take the %q lock: %w", lockName, err))
	}
	return l, nil
}

// runChecker checks (and, with --repair, repairs) the items the flags
// select, under l.
func (r *reconciler) runChecker(ctx context.Context, l *lock.Lock) (reconcile.Report, error) {
	targets, err := r.checker.Targets(ctx, reconcile.Selection{Items: r.opts.items, Activities: r.opts.activities})
	if err != nil {
		return reconcile.Report{}, err
	}
	mode := reconcile.CheckOnly
	if r.opts.repair {
		mode = reconcile.CheckAndRepair
	}
	return r.checker.Run(ctx, targets, mode, l)
}

// record sets the metrics of a run's report and alerts on each item it
// could not check or repair, which it returns.
func (r *reconciler) record(ctx context.Context, rep reconcile.Report) []reconcile.ItemReport {
	counts := map[string]int{}
	for v, n := range rep.Count() {
		counts[string(v)] = n
	}
	r.metrics.Items(counts)
	unchecked := rep.UncheckedItems()
	r.metrics.Unchecked(len(unchecked))
	for _, it := range unchecked {
		r.log.Log(ctx, logs.Alert, "item could not be checked or repaired; the run went on with the other items",
			"item_id", it.ItemID, "err", it.Error)
	}
	drift := map[int64]int64{}
	for _, it := range rep.Items {
		d := it.Drift
		switch it.Verdict {
		case reconcile.Repaired:
			d = 0 // fixed: the gauge shows what is left
		case reconcile.Unchecked:
			continue // not known: the unchecked gauge counts it
		}
		drift[it.ItemID] = d
	}
	r.metrics.Drift(drift)
	return unchecked
}

// writeReport prints the report: JSON with --json, else the items' table
// and the draws'.
func (r *reconciler) writeReport(rep reconcile.Report, draws []drawCheck) error {
	if r.opts.json {
		return rep.WriteJSON(r.stdout)
	}
	if err := rep.WriteTable(r.stdout); err != nil {
		return err
	}
	return writeDraws(r.stdout, draws)
}

// verdict alerts on each draw that does not hold, logs the run's end and
// returns its outcome: nil when everything agrees, else an error with the
// exit code and what did not.
func (r *reconciler) verdict(ctx context.Context, l *lock.Lock, rep reconcile.Report, unchecked []reconcile.ItemReport, draws []drawCheck) error {
	code := rep.ExitCode()
	for _, d := range draws {
		for _, p := range d.problems {
			r.log.Log(ctx, logs.Alert, "draw does not hold", "activity_id", d.activity, "problem", p)
			code = max(code, exitDrift)
		}
	}
	r.log.Info("reconcile finished", "summary", rep.Summary(), "exit_code", code, "fence", l.Fence(),
		"took", rep.FinishedAt.Sub(rep.StartedAt).Round(time.Millisecond).String())
	if code == exitAgree {
		return nil
	}
	msg := rep.Summary()
	for _, it := range unchecked {
		msg += fmt.Sprintf("; item %d unchecked: %s", it.ItemID, it.Error)
	}
	for _, d := range draws {
		if len(d.problems) > 0 {
			msg += fmt.Sprintf("; the draw of activity %d does not hold", d.activity)
		}
	}
	return fail(code, errors.New(msg))
}

// why explains an error of a run under l: a lost lock is the reason when
// it was lost.
func (r *reconciler) why(l *lock.Lock, err error) error {
	if lerr := l.Err(); lerr != nil {
		return fmt.Errorf("%w (%w): %w", reconcile.ErrLockLost, lerr, err)
	}
	return err
}

func (r *reconciler) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.store.Ping(ctx); err != nil {
		return err
	}
	return r.db.Ping(ctx)
}

// scheduled runs once at every time sched names until ctx ends. A run that
// is still going when the next one is due makes that one skip.
func (r *reconciler) scheduled(ctx context.Context, sched cron.Schedule) error {
	cl := cronLogger{r.log}
	c := cron.New(cron.WithChain(cron.SkipIfStillRunning(cl)), cron.WithLogger(cl))
	c.Schedule(sched, cron.FuncJob(func() {
		err := r.once(ctx)
		switch code := exitCode(err); code {
		case exitAgree:
		case exitDrift:
			r.log.Warn("scheduled run found drift", "exit_code", code, "err", err)
		case exitBusy:
			r.log.Info("scheduled run skipped: another reconciler is running", "exit_code", code)
		default:
			r.log.Error("scheduled run failed", "exit_code", code, "err", err)
		}
		r.log.Info("next run", "at", sched.Next(time.Now()).Format(time.RFC3339))
	}))
	c.Start()
	r.log.Info("reconciler scheduled", "schedule", r.opts.schedule, "next", sched.Next(time.Now()).Format(time.RFC3339))
	<-ctx.Done()
	<-c.Stop().Done() // waits for a run in progress
	r.log.Info("reconciler stopped")
	return nil
}

// cronLogger sends the cron library's log lines to slog.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug("cron: "+msg, kv...) }
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append(kv, "err", err)...)
}

// maskDSN hides the password of a MySQL DSN for the log.
func maskDSN(dsn string) string {
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "xxxxx"
	}
	return cfg.FormatDSN()
}
