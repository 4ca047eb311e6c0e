// Command consumer fulfils flash-sale orders: it reads create-order events
// from Kafka as a consumer group, writes the orders to MySQL with the
// conditional stock update, confirms or releases their reservations in
// Redis, and sweeps stranded reservations. Run as many as the topic has
// partitions.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seckill/seckill/consumer/internal/backoff"
	"github.com/seckill/seckill/consumer/internal/closer"
	"github.com/seckill/seckill/consumer/internal/fulfil"
	"github.com/seckill/seckill/consumer/internal/heal"
	"github.com/seckill/seckill/consumer/internal/sweep"
	"github.com/seckill/seckill/consumer/internal/warmup"
	"github.com/seckill/seckill/pkg/clock"
	"github.com/seckill/seckill/pkg/config"
	"github.com/seckill/seckill/pkg/lifecycle"
	"github.com/seckill/seckill/pkg/lock"
	"github.com/seckill/seckill/pkg/logs"
	"github.com/seckill/seckill/pkg/metrics"
	"github.com/seckill/seckill/pkg/orderdb"
	"github.com/seckill/seckill/pkg/orderevents"
	"github.com/seckill/seckill/pkg/reconcile"
	"github.com/seckill/seckill/pkg/stockredis"
	"github.com/seckill/seckill/pkg/tracing"
)

func main() {
	log := logs.New(os.Stderr, os.Getenv("SECKILL_LOG_LEVEL"))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.LookupEnv, os.Stdout, log); err != nil {
		log.Error("consumer stopped", "err", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, lookup func(string) (string, bool), _ io.Writer, log *slog.Logger) error {
	env := config.New(lookup)
	config.GC(env)
	level := config.LogLevel(env)
	rcfg, mcfg, kcfg := config.Redis(env), config.MySQL(env), config.Kafka(env)
	group := env.String("SECKILL_CONSUMER_GROUP", "seckill-consumer")
	window := config.PaymentWindow(env)
	loop := orderevents.RouterConfig{
		Brokers:      kcfg.Brokers,
		Topic:        kcfg.Topic,
		GroupID:      group,
		MaxBatch:     env.Int("SECKILL_CONSUMER_BATCH", 2000, 1, 4000),
		Linger:       env.Duration("SECKILL_CONSUMER_LINGER", 5*time.Millisecond),
		DrainTimeout: env.Duration("SECKILL_CONSUMER_DRAIN_TIMEOUT", 30*time.Second),
	}
	sweepAfter := env.Duration("SECKILL_SWEEP_AFTER", 10*time.Second)
	sweepEvery := env.Duration("SECKILL_SWEEP_EVERY", 2*time.Second)
	closeEvery := env.Duration("SECKILL_CLOSER_EVERY", time.Second)
	healEvery := config.HealEvery(env)
	warmupLead := config.WarmupLead(env)
	admin := config.Admin(env, "127.0.0.1:9100")
	clockOffset := config.TestClockOffset(env)
	if err := env.Err(); err != nil {
		return err
	}
	if err := tracing.Check(os.Getenv); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	instance := fmt.Sprintf("consumer-%d", os.Getpid())
	log = log.With("instance", instance)
	log.Info("consumer starting", "redis", rcfg.Addrs, "kafka", kcfg.Brokers, "topic", kcfg.Topic,
		"group", group, "batch", loop.MaxBatch, "sweep_after", sweepAfter.String(),
		"heal_every", healEvery.String(), "warmup_lead", warmupLead.String(),
		"admin_addr", admin.Addr, "pprof", admin.Pprof, "log_level", level)

	// The admin listener comes first, so /metrics answers while the
	// consumer waits for its dependencies.
	reg := metrics.NewRegistry()
	if admin.Addr != "" {
		adm, err := metrics.ListenAdmin(admin.Addr, metrics.AdminHandler(reg, admin.Pprof))
		switch {
		case err != nil && admin.Optional:
			// The default port is taken (another consumer on this host):
			// fulfilment matters more than this one's metrics.
			log.Warn("admin listener not started; set SECKILL_ADMIN_ADDR to serve /metrics", "addr", admin.Addr, "err", err)
		case err != nil:
			return err
		default:
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = adm.Shutdown(sctx)
			}()
			log.Info("admin listening", "addr", adm.Addr(), "pprof", admin.Pprof)
		}
	}

	tp, err := tracing.Setup(ctx, "seckill-consumer")
	if err != nil {
		return err
	}
	defer tp.Close(log)
	tracer := tp.Tracer()
	log.Info("tracing", "on", tracer.On())

	db, err := orderdb.Open(mcfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := waitFor(ctx, log, "mysql", db.Migrate); err != nil {
		return err
	}
	clk, err := clock.Start(ctx, db.Now, clockOffset, log)
	if err != nil {
		return err
	}
	rdb := stockredis.NewClient(rcfg)
	defer rdb.Close()
	store := stockredis.New(rdb, rcfg.Prefix).Trace(tracer)
	if err := waitFor(ctx, log, "kafka", func(ctx context.Context) error { return orderevents.EnsureTopics(ctx, kcfg) }); err != nil {
		return err
	}
	pub := orderevents.NewPublisher(kcfg)
	defer pub.Close()

	lockMetrics := metrics.NewLock(reg)
	locker := lock.New(rdb, lock.Options{Prefix: rcfg.Prefix, InstanceID: instance, Logger: log,
		OnAcquire: lockMetrics.Acquired, OnLost: lockMetrics.Lost})
	// A record a periodic pass fails on is reported and skipped for a while;
	// the pass goes on with the others.
	passes := metrics.NewPasses(reg)
	sw := &sweep.Sweeper{Stock: store, DB: db, Publisher: pub, After: sweepAfter, Every: sweepEvery, Log: log, Locker: locker,
		Metrics: metrics.NewSweep(reg), Backoff: backoff.New(metrics.PassSweep, log, passes)}
	cl := &closer.Closer{
		Lifecycle: &lifecycle.Service{DB: db, Stock: store, Log: log},
		Locker:    locker, Every: closeEvery, Log: log, Metrics: metrics.NewCloser(reg),
		Backoff: backoff.New(metrics.PassCloser, log, passes),
	}
	// The watch repairs Redis from MySQL as soon as it sees that Redis
	// lost data (a restart, a failover, its marker gone or behind), under
	// the reconciler's lock; it judges against what it recorded in MySQL,
	// so a loss while no consumer ran is repaired at start.
	var watch *heal.Watch
	if healEvery > 0 {
		repairer := &heal.Repairer{Locker: locker, Checker: &reconcile.Checker{
			Stock: store.Reconciler(), DB: db, Log: log.With("component", "heal"), Warmer: store, PaymentWindow: window,
			Stores: []reconcile.Pinger{store, db}, Now: clk.Now}}
		watch = &heal.Watch{Redis: rdb, Marker: heal.MarkerKey(rcfg.Prefix), Record: db, Repair: repairer.Repair,
			Every: healEvery, Log: log, Metrics: metrics.NewHeal(reg)}
	}
	// Activities warm themselves up SECKILL_WARMUP_LEAD before they start.
	var warm *warmup.Scheduler
	if warmupLead > 0 {
		warm = &warmup.Scheduler{DB: db, Stock: store, Locker: locker, Lead: warmupLead, PaymentWindow: window, Log: log,
			Now: clk.Now, Backoff: backoff.New(metrics.PassWarmup, log, passes)}
	}
	// The sweep, the closer and the warm-up run beside the fulfilment loop;
	// each acts only while it holds its lock, so one process in the group
	// does it.
	sctx, stopSweep := context.WithCancel(ctx)
	done := make(chan struct{}, 4)
	go func() { defer func() { done <- struct{}{} }(); sw.Run(sctx) }()
	go func() { defer func() { done <- struct{}{} }(); cl.Run(sctx) }()
	go func() {
		defer func() { done <- struct{}{} }()
		if watch != nil {
			watch.Run(sctx)
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		if warm != nil {
			warm.Run(sctx)
		}
	}()

	cm := metrics.NewConsumer(reg)
	handler := &fulfil.Handler{Stock: store, DB: db, PaymentWindow: window, Log: log, Metrics: cm, Tracer: tracer,
		Now: clk.Now}
	err = orderevents.NewRouter(loop, handler, cm, log).Run(ctx)
	stopSweep()
	for range cap(done) {
		<-done
	}
	log.Info("consumer stopped")
	return err
}

// waitFor retries f until it succeeds or ctx ends, so a consumer started
// before its dependencies waits for them.
func waitFor(ctx context.Context, log *slog.Logger, what string, f func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		err := f(ctx)
		if err == nil {
			return nil
		}
		if attempt%10 == 0 {
			log.Warn("waiting for "+what, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
