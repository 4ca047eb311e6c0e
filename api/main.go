// Command api is the flash-sale front end: it authenticates buyers, reserves
// stock in Redis with one Lua script, publishes create-order events to Kafka
// and answers status polls. `api token` mints development tokens and
// `api sign-payment` signs a payment notification for local testing.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/api/internal/intake"
	"github.com/seckill/seckill/pkg/auth"
	"github.com/seckill/seckill/pkg/clock"
	"github.com/seckill/seckill/pkg/config"
	"github.com/seckill/seckill/pkg/logs"
	"github.com/seckill/seckill/pkg/metrics"
	"github.com/seckill/seckill/pkg/order"
	"github.com/seckill/seckill/pkg/orderdb"
	"github.com/seckill/seckill/pkg/orderevents"
	"github.com/seckill/seckill/pkg/payment"
	"github.com/seckill/seckill/pkg/stockredis"
	"github.com/seckill/seckill/pkg/tracing"
)

func main() {
	log := logs.New(os.Stderr, os.Getenv("SECKILL_LOG_LEVEL"))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, log); err != nil {
		log.Error("api stopped", "err", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout io.Writer, log *slog.Logger) error {
	if len(args) > 0 && args[0] == "token" {
		return mintToken(args[1:], lookup, stdout)
	}
	if len(args) > 0 && args[0] == "sign-payment" {
		return signPayment(args[1:], lookup, stdout, time.Now())
	}
	env := config.New(lookup)
	config.GC(env)
	level := config.LogLevel(env)
	addr := env.Addr("SECKILL_HTTP_ADDR", "127.0.0.1:8080")
	rcfg, mcfg, kcfg := config.Redis(env), config.MySQL(env), config.Kafka(env)
	acfg := config.Auth(env)
	paySecret := config.PaymentSecret(env)
	buyerPay := env.Bool("SECKILL_BUYER_PAY", false)
	window := config.PaymentWindow(env)
	limits := httpapi.RateLimits{
		PerUser: float64(env.Int("SECKILL_RATE_LIMIT_USER", 20, 0, 1_000_000)),
		PerIP:   float64(env.Int("SECKILL_RATE_LIMIT_IP", 0, 0, 10_000_000)),
	}
	admin := config.Admin(env, "")
	clockOffset := config.TestClockOffset(env)
	if err := env.Err(); err != nil {
		return err
	}
	if err := tracing.Check(os.Getenv); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	log.Info("api starting", "addr", addr, "redis", rcfg.Addrs, "redis_cluster", rcfg.Cluster,
		"kafka", kcfg.Brokers, "topic", kcfg.Topic, "jwt_mode", authMode(acfg), "jwt_issuer", acfg.Issuer,
		"jwt_audience", acfg.Audience, "jwt_user_claim", acfg.UserClaim, "jwt_role_claim", acfg.RoleClaim,
		"payment_secret", masked(paySecret), "buyer_pay", buyerPay, "payment_window", window.String(),
		"rate_limit_user", limits.PerUser, "rate_limit_ip", limits.PerIP, "admin_addr", admin.Addr, "pprof", admin.Pprof,
		"log_level", level)

	reg := metrics.NewRegistry()
	if admin.Addr != "" {
		adm, err := metrics.ListenAdmin(admin.Addr, metrics.AdminHandler(reg, admin.Pprof))
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = adm.Shutdown(sctx)
		}()
		log.Info("admin listening", "addr", adm.Addr(), "pprof", admin.Pprof)
	}

	tp, err := tracing.Setup(ctx, "seckill-api")
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
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	// Every instance signs the numbers it issues with one key, so any of
	// them tells an order it accepted from a number never issued. Asking
	// again after a lost answer is safe: it reads the key that won.
	numberKey, err := db.OrderNumberKey(ctx)
	for attempt := 1; err != nil && attempt < 3 && ctx.Err() == nil; attempt++ {
		log.Warn("order number key not read; retrying", "err", err)
		select {
		case <-time.After(time.Duration(attempt) * time.Second):
		case <-ctx.Done():
		}
		numberKey, err = db.OrderNumberKey(ctx)
	}
	if err != nil {
		return fmt.Errorf("order number key: %w", err)
	}
	numbers, err := order.NewSignedNumberGenerator(numberKey)
	if err != nil {
		return err
	}
	clk, err := clock.Start(ctx, db.Now, clockOffset, log)
	if err != nil {
		return err
	}
	rdb := stockredis.NewClient(rcfg)
	defer rdb.Close()
	store := stockredis.New(rdb, rcfg.Prefix).Trace(tracer)
	if err := orderevents.EnsureTopics(ctx, kcfg); err != nil {
		return err
	}
	kcfg.Tracer = tracer
	pub := orderevents.NewPublisher(kcfg)
	defer pub.Close()
	// Before it listens (so before /readyz can say ready): the first
	// buyers would otherwise wait for the topic's metadata and the
	// connections to its leaders.
	if err := pub.Warm(ctx); err != nil {
		log.Warn("publisher not warmed; the first orders will connect", "err", err)
	}
	go pub.KeepWarm(ctx, 20*time.Second, log)

	svc := &intake.Service{
		Stock: store, Publisher: pub, Activities: db, Orders: db,
		Numbers: numbers, PaymentWindow: window, Log: log, Now: clk.Now,
		Metrics: metrics.NewIntake(reg),
	}
	ready := []httpapi.Checker{
		{Name: "redis", Check: store.Ping},
		{Name: "mysql", Check: db.Ping},
		{Name: "kafka", Check: func(ctx context.Context) error { return orderevents.Ping(ctx, kcfg.Brokers) }},
	}
	acfg.Log = log
	verifier, err := auth.New(ctx, acfg)
	if err != nil {
		return err
	}
	handler := httpapi.New(svc, db, verifier, ready, log, httpapi.WithRateLimits(limits),
		httpapi.WithMetrics(metrics.NewHTTP(reg), metrics.Handler(reg)),
		httpapi.WithPayments(paySecret, metrics.NewPayments(reg)), httpapi.WithBuyerPay(buyerPay),
		httpapi.WithTracer(tracer))
	if paySecret == nil {
		log.Warn("SECKILL_PAYMENT_SECRET is not set: payment notifications are refused (503)")
	}
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

// masked says whether a secret is set, never what it is.
func masked(secret []byte) string {
	if len(secret) == 0 {
		return "[unset]"
	}
	return "[set]"
}

// signPayment prints a payment notification signed with
// SECKILL_PAYMENT_SECRET, as the provider would send it: the signature
// header on the first line, the body on the second.
func signPayment(args []string, lookup func(string) (string, bool), stdout io.Writer, now time.Time) error {
	fs := flag.NewFlagSet("sign-payment", flag.ContinueOnError)
	orderNo := fs.String("order-no", "", "the order paid (required)")
	amount := fs.Int64("amount", -1, "amount in the currency's minor units (required)")
	currency := fs.String("currency", "", "ISO 4217 code (required)")
	txID := fs.String("transaction-id", "", "the provider's transaction id (default: a new one)")
	at := fs.Int64("at", 0, "signing time, unix seconds (default: now)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *orderNo == "" || *amount < 0 || *currency == "" {
		return errors.New("sign-payment: --order-no, --amount and --currency are required")
	}
	env := config.New(lookup)
	secret := config.PaymentSecret(env)
	if err := env.Err(); err != nil {
		return err
	}
	if secret == nil {
		return errors.New("sign-payment: SECKILL_PAYMENT_SECRET is not set")
	}
	if *txID == "" {
		*txID = "tx_" + strconv.FormatInt(now.UnixNano(), 36)
	}
	if *at != 0 {
		now = time.Unix(*at, 0)
	}
	body, err := json.Marshal(payment.Notification{TransactionID: *txID, OrderNo: *orderNo, Amount: amount, Currency: *currency})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s: %s\n%s\n", payment.Header, payment.Sign(secret, body, now), body)
	return err
}

// authMode names how tokens are verified, for the start-up log line.
func authMode(c auth.Config) string {
	if c.JWKSURL != "" {
		return "jwks " + c.JWKSURL + " (" + strings.Join(c.Algorithms, ",") + ")"
	}
	return "hs256 secret [set]"
}

// mintToken prints a signed development token.
func mintToken(args []string, lookup func(string) (string, bool), stdout io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	user := fs.String("sub", "1", "user id: the sub claim (1-128 characters)")
	role := fs.String("role", "", `role claim ("admin" for the admin routes)`)
	iss := fs.String("iss", "", "iss claim (default $SECKILL_JWT_ISSUER)")
	aud := fs.String("aud", "", "aud claim (default $SECKILL_JWT_AUDIENCE)")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime")
	if err := fs.Parse(args); err != nil {
		return err
	}
	env := config.New(lookup)
	secret := config.JWTSecret(env)
	if err := env.Err(); err != nil {
		return err
	}
	if *iss == "" {
		*iss = env.String("SECKILL_JWT_ISSUER", "")
	}
	if *aud == "" {
		*aud = env.String("SECKILL_JWT_AUDIENCE", "")
	}
	tok, err := auth.Token{Subject: *user, Role: *role, Issuer: *iss, Audience: *aud, TTL: *ttl}.Sign(secret)
	if err != nil {
		return fmt.Errorf("token for user %q: %w", *user, err)
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}
