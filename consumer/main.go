// Command consumer fulfils flash-sale orders: it reads create-order events
// from Kafka as a consumer group, writes the orders to MySQL with the
// conditional stock update, confirms or releases their reservations in
// Redis, and sweeps stranded reservations. Run as many as the topic has
// partitions.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seckill/seckill/consumer/internal/entries"
	"github.com/seckill/seckill/consumer/internal/fulfil"
	"github.com/seckill/seckill/consumer/internal/redisloss"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/clock"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/tracing"
	"github.com/seckill/seckill/pkg/service/draws"
	"github.com/seckill/seckill/pkg/service/fulfilment"
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
	cfg, err := loadSettings(lookup)
	if err != nil {
		return err
	}
	log = log.With("instance", cfg.instance)
	cfg.logStart(log)

	// The admin listener comes first, so /metrics answers while the
	// consumer waits for its dependencies.
	reg := metrics.NewRegistry()
	stopAdmin, err := metrics.StartAdmin(cfg.admin, reg, log)
	if err != nil {
		return err
	}
	defer stopAdmin()
	tp, err := tracing.Setup(ctx, "seckill-consumer")
	if err != nil {
		return err
	}
	defer tp.Close(log)
	tracer := tp.Tracer()
	log.Info("tracing", "on", tracer.On())

	db, err := openMySQL(ctx, cfg.mysql, log)
	if err != nil {
		return err
	}
	defer db.Close()
	clk, err := clock.Start(ctx, db.Now, cfg.clockOffset, log)
	if err != nil {
		return err
	}
	rdb := stockredis.NewClient(cfg.redis)
	defer rdb.Close()
	store := stockredis.New(rdb, cfg.redis.Prefix).Trace(tracer)
	if err := waitFor(ctx, log, "kafka", func(ctx context.Context) error {
		if err := orderevents.EnsureTopics(ctx, cfg.kafka); err != nil {
			return err
		}
		return orderevents.EnsureEntriesTopic(ctx, cfg.kafka)
	}); err != nil {
		return err
	}
	pub := orderevents.NewPublisher(cfg.kafka)
	defer pub.Close()
	// The shop's events (the outbox) go to their own topic.
	if err := waitFor(ctx, log, "kafka", func(ctx context.Context) error {
		return orderevents.EnsureOutboxTopic(ctx, cfg.kafka, cfg.outboxTopic)
	}); err != nil {
		return err
	}
	events := orderevents.NewOutboxWriter(cfg.kafka, cfg.outboxTopic)
	defer events.Close()

	// The draws' orders are numbered with the key the api signs its
	// numbers with, so the api vouches for them (order.NumberGenerator).
	var numberKey []byte
	if err := waitFor(ctx, log, "order number key", func(ctx context.Context) (err error) {
		numberKey, err = db.Orders.OrderNumberKey(ctx)
		return err
	}); err != nil {
		return err
	}
	numbers, err := order.NewSignedNumberGenerator(numberKey)
	if err != nil {
		return err
	}
	stopPasses := startPasses(ctx, newPasses(cfg, stores{rdb: rdb, store: store, db: db, pub: pub, events: events, clk: clk, numbers: numbers}, reg, log))
	cm := metrics.NewConsumer(reg)
	// An order written to MySQL whose reservation Redis lost is recorded
	// as a loss, so a watch (this consumer's or another's) repairs Redis
	// from MySQL after it: a repair that ran before it counted its unit
	// as unsold (fulfil.Handler.Losses).
	handler := &fulfil.Handler{Stock: store.Reservations, DB: &fulfilment.Service{Tx: db, Orders: db.Orders, Events: db.Outbox, Draws: db.Draws}, Activities: db.Activities, PaymentWindow: cfg.window, Log: log, Metrics: cm, Tracer: tracer,
		Now: clk.Now, Losses: &redisloss.Reporter{Record: db.RedisWatches, Marker: redisloss.MarkerKey(cfg.redis.Prefix)}}
	// The loop drains what it holds before it returns; the passes stop
	// after it, and the stores close after them.
	// The draw entries the api accepted, written to MySQL in batches
	// beside the orders (ADR 7).
	entryLoop := orderevents.NewEventRouter(cfg.entries, orderevents.EntryCodec,
		&entries.Handler{Draws: &draws.Service{Tx: db, Store: db.Draws}, Log: log.With("loop", "entries")}, nil, log.With("loop", "entries"))
	entriesDone := make(chan error, 1)
	go func() { entriesDone <- entryLoop.Run(ctx) }()
	err = orderevents.NewRouter(cfg.loop, handler, cm, log).Run(ctx)
	err = errors.Join(err, <-entriesDone)
	stopPasses()
	log.Info("consumer stopped")
	return err
}

// openMySQL opens the database and waits until it answers and its schema
// is applied.
func openMySQL(ctx context.Context, cfg orderdb.Config, log *slog.Logger) (*orderdb.DB, error) {
	db, err := orderdb.Open(cfg)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, log, "mysql", db.Migrate); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
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
