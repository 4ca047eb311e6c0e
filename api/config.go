package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// settings is the api's configuration, read once at start.
type settings struct {
	level     string
	addr      string
	redis     stockredis.Config
	mysql     orderdb.Config
	kafka     orderevents.Config
	auth      auth.Config
	paySecret []byte // nil: payment notifications are refused
	buyerPay  bool
	window    time.Duration // the payment window of sales that set none
	drawGrace time.Duration // until when after a draw's close an entry is answered (ADR 7)
	limits    httpapi.RateLimits
	addrs     httpapi.Addresses
	// guessesPerBuyer and guessesPerAddr bound the invalid presale codes.
	guessesPerBuyer, guessesPerAddr access.GuessLimit
	admin                           metrics.AdminConfig
	clockOffset                     time.Duration
	// privateHooks lets operators register webhook endpoints on loopback
	// and private addresses (development).
	privateHooks bool
	// console is how the operator console signs operators in.
	console httpapi.Console
}

// loadSettings reads and checks the environment; an error lists every
// variable that is wrong.
func loadSettings(lookup func(string) (string, bool)) (settings, error) {
	env := config.New(lookup)
	config.GC(env)
	kcfg := config.Kafka(env)
	s := settings{
		level:     config.LogLevel(env),
		addr:      env.Addr("SECKILL_HTTP_ADDR", "127.0.0.1:8080"),
		redis:     config.Redis(env),
		mysql:     config.MySQL(env),
		kafka:     kcfg,
		auth:      config.Auth(env),
		paySecret: config.PaymentSecret(env),
		buyerPay:  env.Bool("SECKILL_BUYER_PAY", false),
		window:    config.PaymentWindow(env),
		drawGrace: config.DrawGrace(env, kcfg),
		limits: httpapi.RateLimits{
			PerUser: float64(env.Int("SECKILL_RATE_LIMIT_USER", 20, 0, 1_000_000)),
			PerIP:   float64(env.Int("SECKILL_RATE_LIMIT_IP", 0, 0, 10_000_000)),
		},
		addrs:        addresses(env),
		admin:        config.Admin(env, ""),
		clockOffset:  config.TestClockOffset(env),
		privateHooks: config.WebhookSettings(env).AllowPrivate,
	}
	s.guessesPerBuyer, s.guessesPerAddr = config.CodeGuesses(env)
	s.console = httpapi.Console{ClientID: config.ConsoleClientID(env, s.auth.Issuer), RoleClaim: s.auth.RoleClaim, AdminRole: s.auth.AdminRole}
	if s.console.ClientID != "" {
		s.console.Issuer = s.auth.Issuer
	}
	if err := env.Err(); err != nil {
		return s, err
	}
	if err := tracing.Check(os.Getenv); err != nil {
		return s, fmt.Errorf("invalid configuration: %w", err)
	}
	return s, nil
}

// addresses reads the per-address limit (SECKILL_RATE_LIMIT_ADDR), the
// deny list and the trusted proxies.
func addresses(env *config.Env) httpapi.Addresses {
	c := config.Addresses(env)
	return httpapi.Addresses{PerAddress: float64(env.Int("SECKILL_RATE_LIMIT_ADDR", 0, 0, 10_000_000)),
		Deny: c.Deny, TrustedProxies: c.TrustedProxies, Header: c.Header}
}

// logStart writes the start-up line, secrets masked.
func (s settings) logStart(log *slog.Logger) {
	log.Info("api starting", "addr", s.addr, "redis", s.redis.Addrs, "redis_cluster", s.redis.Cluster,
		"kafka", s.kafka.Brokers, "topic", s.kafka.Topic, "jwt_mode", authMode(s.auth), "jwt_issuer", s.auth.Issuer,
		"jwt_audience", s.auth.Audience, "jwt_user_claim", s.auth.UserClaim, "jwt_role_claim", s.auth.RoleClaim,
		"payment_secret", masked(s.paySecret), "buyer_pay", s.buyerPay, "payment_window", s.window.String(),
		"rate_limit_user", s.limits.PerUser, "rate_limit_ip", s.limits.PerIP, "rate_limit_addr", s.addrs.PerAddress,
		"deny_cidrs", len(s.addrs.Deny), "trusted_proxies", s.addrs.TrustedProxies, "client_ip_header", clientIPHeader(s.addrs),
		"code_guesses_per_buyer", s.guessesPerBuyer.String(), "code_guesses_per_addr", s.guessesPerAddr.String(),
		"console_client_id", s.console.ClientID, "admin_addr", s.admin.Addr,
		"pprof", s.admin.Pprof, "log_level", s.level)
}

// clientIPHeader names the header the client address is read from, or
// says that none is: without a trusted proxy the header is ignored.
func clientIPHeader(a httpapi.Addresses) string {
	if len(a.TrustedProxies) == 0 {
		return "[none: the peer's address]"
	}
	return a.Header
}

// masked says whether a secret is set, never what it is.
func masked(secret []byte) string {
	if len(secret) == 0 {
		return "[unset]"
	}
	return "[set]"
}

// authMode names how tokens are verified, for the start-up log line.
func authMode(c auth.Config) string {
	if c.JWKSURL != "" {
		return "jwks " + c.JWKSURL + " (" + strings.Join(c.Algorithms, ",") + ")"
	}
	return "hs256 secret [set]"
}
