// Command api is the flash-sale front end: it authenticates buyers, reserves
// stock in Redis with one Lua script, publishes create-order events to Kafka
// and answers status polls. `api token` mints development tokens,
// `api sign-payment` signs a payment notification for local testing and
// `api webhook-listen` receives the events' webhook deliveries.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/api/wiring"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/clock"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/tracing"
	"github.com/seckill/seckill/pkg/service/draws"
	"github.com/seckill/seckill/pkg/service/placing"
)

func main() {
	log := logs.New(os.Stderr, os.Getenv("SECKILL_LOG_LEVEL"))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr, log); err != nil {
		log.Error("api stopped", "err", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer, log *slog.Logger) error {
	if len(args) > 0 && args[0] == "token" {
		return mintToken(args[1:], lookup, stdout)
	}
	if len(args) > 0 && args[0] == "sign-payment" {
		return signPayment(args[1:], lookup, stdout, time.Now())
	}
	if len(args) > 0 && args[0] == "webhook-listen" {
		return listenWebhooks(ctx, args[1:], lookup, stdout, stderr)
	}
	cfg, err := loadSettings(lookup)
	if err != nil {
		return err
	}
	cfg.logStart(log)

	reg := metrics.NewRegistry()
	stopAdmin, err := metrics.StartAdmin(cfg.admin, reg, log)
	if err != nil {
		return err
	}
	defer stopAdmin()
	tp, err := tracing.Setup(ctx, "seckill-api")
	if err != nil {
		return err
	}
	defer tp.Close(log)
	tracer := tp.Tracer()
	log.Info("tracing", "on", tracer.On())

	db, err := orderdb.Open(cfg.mysql)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	numbers, numberKey, err := orderNumbers(ctx, db, log)
	if err != nil {
		return err
	}
	clk, err := clock.Start(ctx, db.Now, cfg.clockOffset, log)
	if err != nil {
		return err
	}
	rdb := stockredis.NewClient(cfg.redis)
	defer rdb.Close()
	store := stockredis.New(rdb, cfg.redis.Prefix).Trace(tracer)
	cfg.kafka.Tracer = tracer
	pub, err := startPublisher(ctx, cfg.kafka, log)
	if err != nil {
		return err
	}
	defer pub.Close()
	entryPub, err := startEntryPublisher(ctx, cfg.kafka, log)
	if err != nil {
		return err
	}
	defer entryPub.Close()

	handler, err := newHandler(ctx, cfg, backends{store: store, db: db, pub: pub, entryPub: entryPub, numbers: numbers, numberKey: numberKey,
		now: clk.Now, tracer: tracer}, reg, log)
	if err != nil {
		return err
	}
	return serve(ctx, cfg.addr, handler, log)
}

// backends are what the api's handlers work on.
type backends struct {
	store *stockredis.Store
	db    *orderdb.DB
	pub   *orderevents.Publisher
	// entryPub publishes draw entries to their own topic (ADR 7).
	entryPub  *orderevents.Publisher
	numbers   *order.NumberGenerator
	numberKey []byte
	now       func() time.Time // the shared clock
	tracer    *tracing.Tracer
}

// newHandler builds the placing service, the readiness checks and the
// token verifier, and the HTTP handler over them.
func newHandler(ctx context.Context, cfg settings, b backends, reg *prometheus.Registry, log *slog.Logger) (http.Handler, error) {
	svc := &placing.Service{
		Reservations: b.store.Reservations, Stock: b.store.Stock, Rooms: b.store.Rooms, Publisher: b.pub, Activities: b.db.Activities, Orders: b.db.Orders, Tx: b.db, Events: b.db.Outbox,
		Numbers: b.numbers, PaymentWindow: cfg.window, Log: log, Now: b.now,
		Metrics: metrics.NewIntake(reg),
		Codes: placing.Codes{Key: b.numberKey, Guesses: b.store.Reservations,
			PerBuyer: cfg.guessesPerBuyer, PerAddr: cfg.guessesPerAddr},
	}
	ready := []httpapi.Checker{
		{Name: "redis", Check: b.store.Ping},
		{Name: "mysql", Check: b.db.Ping},
		{Name: "kafka", Check: func(ctx context.Context) error { return orderevents.Ping(ctx, cfg.kafka.Brokers) }},
	}
	cfg.auth.Log = log
	verifier, err := auth.New(ctx, cfg.auth)
	if err != nil {
		return nil, err
	}
	entries := &draws.Accepting{Taking: b.store.Entries, Publisher: b.entryPub, Key: b.numberKey, Grace: cfg.drawGrace,
		KeysFor: func(a activity.Activity) time.Time { return a.KeysLiveUntil(cfg.window) },
		Guesses: b.store.Reservations, PerBuyer: cfg.guessesPerBuyer, PerAddr: cfg.guessesPerAddr, Log: log,
		Metrics: metrics.NewEntries(reg)}
	handler := httpapi.New(svc, wiring.Services(svc, b.db, log, cfg.privateHooks, entries), verifier, ready, log, httpapi.WithRateLimits(cfg.limits),
		httpapi.WithAddresses(cfg.addrs),
		httpapi.WithMetrics(metrics.NewHTTP(reg), metrics.Handler(reg)),
		httpapi.WithPayments(cfg.paySecret, metrics.NewPayments(reg)), httpapi.WithBuyerPay(cfg.buyerPay),
		httpapi.WithTracer(b.tracer), httpapi.WithConsole(cfg.console))
	if cfg.paySecret == nil {
		log.Warn("SECKILL_PAYMENT_SECRET is not set: payment notifications are refused (503)")
	}
	return handler, nil
}

// orderNumbers is the generator of order numbers, signed with the key
// every instance shares, so any of them tells an order it accepted from a
// number never issued. Asking again after a lost answer is safe: it reads
// the key that won.
// The key also makes the draw entries' ids (draw.EntryIDFor), the same on
// every instance.
func orderNumbers(ctx context.Context, db *orderdb.DB, log *slog.Logger) (*order.NumberGenerator, []byte, error) {
	numberKey, err := db.Orders.OrderNumberKey(ctx)
	for attempt := 1; err != nil && attempt < 3 && ctx.Err() == nil; attempt++ {
		log.Warn("order number key not read; retrying", "err", err)
		select {
		case <-time.After(time.Duration(attempt) * time.Second):
		case <-ctx.Done():
		}
		numberKey, err = db.Orders.OrderNumberKey(ctx)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("order number key: %w", err)
	}
	gen, err := order.NewSignedNumberGenerator(numberKey)
	return gen, numberKey, err
}

// startPublisher makes sure the topics exist and returns a publisher that
// is warm before the api listens (so before /readyz can say ready): the
// first buyers would otherwise wait for the topic's metadata and the
// connections to its leaders. It keeps warm until ctx ends.
func startPublisher(ctx context.Context, cfg orderevents.Config, log *slog.Logger) (*orderevents.Publisher, error) {
	if err := orderevents.EnsureTopics(ctx, cfg); err != nil {
		return nil, err
	}
	pub := orderevents.NewPublisher(cfg)
	if err := pub.Warm(ctx); err != nil {
		log.Warn("publisher not warmed; the first orders will connect", "err", err)
	}
	go pub.KeepWarm(ctx, 20*time.Second, log)
	return pub, nil
}

// startEntryPublisher is startPublisher for the draw entries' topic.
func startEntryPublisher(ctx context.Context, cfg orderevents.Config, log *slog.Logger) (*orderevents.Publisher, error) {
	if err := orderevents.EnsureEntriesTopic(ctx, cfg); err != nil {
		return nil, err
	}
	pub := orderevents.NewEntryPublisher(cfg)
	if err := pub.Warm(ctx); err != nil {
		log.Warn("entry publisher not warmed; the first entries will connect", "err", err)
	}
	go pub.KeepWarm(ctx, 20*time.Second, log)
	return pub, nil
}

// serve answers HTTP on addr until ctx ends, then shuts down, giving the
// requests in progress up to 15 s.
func serve(ctx context.Context, addr string, handler http.Handler, log *slog.Logger) error {
	srv := &http.Server{
		Addr:              addr,
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("api listening", "addr", addr)
	select {
	case err := <-errc:
		return fmt.Errorf("listen %s: %w", addr, err)
	case <-ctx.Done():
	}
	log.Info("api shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
