// Package config reads the programs' settings from SECKILL_* environment
// variables (no program has flags for them; the reconciler's flags choose
// what to check, not how to connect), collecting every invalid value so a program can refuse to start with one message that names
// each variable.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/hook"
	"github.com/seckill/seckill/pkg/domain/payment"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/metrics"
)

// Env reads variables through lookup (os.LookupEnv in the programs).
type Env struct {
	lookup func(string) (string, bool)
	errs   []error
}

// New returns an Env over lookup.
func New(lookup func(string) (string, bool)) *Env { return &Env{lookup: lookup} }

func (e *Env) get(name string) (string, bool) {
	v, ok := e.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", false
	}
	return strings.TrimSpace(v), true
}

func (e *Env) fail(name, v, why string) {
	e.errs = append(e.errs, fmt.Errorf("%s=%q: %s", name, v, why))
}

// String returns the variable or def.
func (e *Env) String(name, def string) string {
	if v, ok := e.get(name); ok {
		return v
	}
	return def
}

// Int returns the variable, which must be an integer within [lo, hi], or def.
func (e *Env) Int(name string, def, lo, hi int) int {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		e.fail(name, v, fmt.Sprintf("want an integer from %d to %d", lo, hi))
		return def
	}
	return n
}

// Duration returns the variable (a Go duration such as 30m) or def.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		e.fail(name, v, "want a positive duration such as 500ms or 30m")
		return def
	}
	return d
}

// Bool returns the variable (true/false/1/0) or def.
func (e *Env) Bool(name string, def bool) bool {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, v, "want true or false")
		return def
	}
	return b
}

// List returns the comma-separated variable or def.
func (e *Env) List(name string, def []string) []string {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		e.fail(name, v, "want a comma-separated list")
		return def
	}
	return out
}

// wantAddr says what an address variable must hold.
const wantAddr = "want host:port with a port from 0 to 65535 (the host may be empty, as in :8080)"

// checkAddr reports whether addr is host:port with a numeric port.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// Addr returns the variable, a host:port address, or def.
func (e *Env) Addr(name, def string) string {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	if checkAddr(v) != nil {
		e.fail(name, v, wantAddr)
		return def
	}
	return v
}

// AddrList returns the comma-separated variable, every element a host:port
// address, or def.
func (e *Env) AddrList(name string, def []string) []string {
	v, _ := e.get(name)
	list := e.List(name, def)
	var bad []string
	for _, a := range list {
		if checkAddr(a) != nil {
			bad = append(bad, strconv.Quote(a))
		}
	}
	if len(bad) > 0 {
		e.fail(name, v, strings.Join(bad, ", ")+": "+wantAddr)
		return def
	}
	return list
}

// Err returns every problem found so far, or nil.
func (e *Env) Err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid configuration: %w", errors.Join(e.errs...))
}

// AddrMap returns the comma-separated variable of from=to address pairs
// (each a host:port), or nil.
func (e *Env) AddrMap(name string) map[string]string {
	v, _ := e.get(name)
	list := e.List(name, nil)
	if len(list) == 0 {
		return nil
	}
	m := make(map[string]string, len(list))
	for _, pair := range list {
		from, to, ok := strings.Cut(pair, "=")
		if !ok || checkAddr(from) != nil || checkAddr(to) != nil {
			e.fail(name, v, strconv.Quote(pair)+": want announced=reachable, each "+wantAddr)
			return nil
		}
		m[from] = to
	}
	return m
}

// Redis reads SECKILL_REDIS_ADDR (or SECKILL_REDIS_ADDRS), SECKILL_REDIS_CLUSTER,
// SECKILL_REDIS_PREFIX and SECKILL_REDIS_ADDR_MAP.
func Redis(e *Env) stockredis.Config {
	addrs := e.AddrList("SECKILL_REDIS_ADDRS", nil)
	if addrs == nil {
		addrs = []string{e.Addr("SECKILL_REDIS_ADDR", "127.0.0.1:6379")}
	}
	return stockredis.Config{
		Addrs:   addrs,
		Cluster: e.Bool("SECKILL_REDIS_CLUSTER", false),
		Prefix:  e.String("SECKILL_REDIS_PREFIX", "sk"),
		AddrMap: e.AddrMap("SECKILL_REDIS_ADDR_MAP"),
	}
}

// MySQL reads SECKILL_MYSQL_DSN, which the MySQL driver must be able to
// parse, SECKILL_MYSQL_MAX_CONNS, and SECKILL_OUTBOX (on, the default, or
// off: no order change writes its event).
func MySQL(e *Env) orderdb.Config {
	dsn := e.String("SECKILL_MYSQL_DSN", orderdb.DefaultDSN)
	if _, err := mysqldrv.ParseDSN(dsn); err != nil {
		// Never echo the DSN: it may hold a password.
		e.errs = append(e.errs, fmt.Errorf("SECKILL_MYSQL_DSN: %w (want user:password@tcp(host:port)/dbname?parseTime=true)", err))
		dsn = orderdb.DefaultDSN
	}
	events := e.String("SECKILL_OUTBOX", "on")
	if events != "on" && events != "off" {
		e.fail("SECKILL_OUTBOX", events, "on or off")
	}
	return orderdb.Config{
		DSN:          dsn,
		MaxOpenConns: e.Int("SECKILL_MYSQL_MAX_CONNS", 32, 1, 1000),
		NoEvents:     events == "off",
	}
}

// Kafka reads SECKILL_KAFKA_BROKERS, SECKILL_KAFKA_TOPIC,
// SECKILL_KAFKA_PARTITIONS, SECKILL_KAFKA_WRITE_TIMEOUT,
// SECKILL_KAFKA_REPLICATION_FACTOR (default 1) and
// SECKILL_KAFKA_MIN_INSYNC_REPLICAS (default a majority of the replicas:
// 1 of 1, 2 of 2, 2 of 3; at most the replication factor).
func Kafka(e *Env) orderevents.Config {
	cfg := orderevents.Config{
		Brokers:           e.AddrList("SECKILL_KAFKA_BROKERS", []string{"127.0.0.1:9092"}),
		Topic:             e.String("SECKILL_KAFKA_TOPIC", "seckill.orders"),
		Partitions:        e.Int("SECKILL_KAFKA_PARTITIONS", 12, 1, 10000),
		WriteTimeout:      e.Duration("SECKILL_KAFKA_WRITE_TIMEOUT", 3*time.Second),
		ReplicationFactor: e.Int("SECKILL_KAFKA_REPLICATION_FACTOR", 1, 1, 32),
	}
	cfg.MinInsyncReplicas = e.Int("SECKILL_KAFKA_MIN_INSYNC_REPLICAS", cfg.ReplicationFactor/2+1, 1, 32)
	if cfg.MinInsyncReplicas > cfg.ReplicationFactor {
		e.fail("SECKILL_KAFKA_MIN_INSYNC_REPLICAS", strconv.Itoa(cfg.MinInsyncReplicas),
			fmt.Sprintf("at most SECKILL_KAFKA_REPLICATION_FACTOR (%d): no publish could ever be acknowledged", cfg.ReplicationFactor))
	}
	return cfg
}

// JWTSecret reads the required SECKILL_JWT_SECRET.
func JWTSecret(e *Env) []byte {
	v, ok := e.lookup("SECKILL_JWT_SECRET")
	if !ok || v == "" {
		e.errs = append(e.errs, errors.New("SECKILL_JWT_SECRET is required (at least 32 bytes)"))
		return nil
	}
	if err := auth.CheckSecret([]byte(v)); err != nil {
		// Never echo the secret itself.
		e.errs = append(e.errs, fmt.Errorf("SECKILL_JWT_SECRET: %w", err))
		return nil
	}
	return []byte(v)
}

// Auth reads how the api verifies bearer tokens: the identity provider's
// keys at SECKILL_JWT_JWKS_URL, or HS256 with SECKILL_JWT_SECRET (exactly
// one of the two), and the claims both modes share.
func Auth(e *Env) auth.Config {
	cfg := auth.Config{
		JWKSURL:         e.String("SECKILL_JWT_JWKS_URL", ""),
		Issuer:          e.String("SECKILL_JWT_ISSUER", ""),
		Audience:        e.String("SECKILL_JWT_AUDIENCE", ""),
		Leeway:          e.Duration("SECKILL_JWT_LEEWAY", 5*time.Second),
		UserClaim:       e.String("SECKILL_JWT_USER_CLAIM", "sub"),
		RoleClaim:       e.String("SECKILL_JWT_ROLE_CLAIM", "role"),
		AdminRole:       e.String("SECKILL_JWT_ADMIN_ROLE", auth.RoleAdmin),
		JWKSRefresh:     e.Duration("SECKILL_JWT_JWKS_REFRESH", 10*time.Minute),
		UnknownKIDEvery: e.Duration("SECKILL_JWT_JWKS_MIN_REFRESH", 10*time.Second),
	}
	if cfg.JWKSURL == "" {
		cfg.Secret = JWTSecret(e)
		return cfg
	}
	if u, err := url.Parse(cfg.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		e.fail("SECKILL_JWT_JWKS_URL", cfg.JWKSURL, "want an http(s) URL")
	}
	if v, ok := e.get("SECKILL_JWT_SECRET"); ok && v != "" {
		e.errs = append(e.errs, errors.New("SECKILL_JWT_SECRET and SECKILL_JWT_JWKS_URL are both set: set one (the secret is for development)"))
	}
	cfg.Algorithms = e.List("SECKILL_JWT_ALGORITHMS", auth.DefaultAlgorithms)
	if err := auth.CheckAlgorithms(cfg.Algorithms); err != nil {
		e.fail("SECKILL_JWT_ALGORITHMS", strings.Join(cfg.Algorithms, ","), err.Error())
	}
	return cfg
}

// PaymentSecret reads SECKILL_PAYMENT_SECRET, the key shared with the
// payment provider (at least payment.MinSecretLen bytes); nil when unset.
func PaymentSecret(e *Env) []byte {
	v, ok := e.lookup("SECKILL_PAYMENT_SECRET")
	if !ok || v == "" {
		return nil
	}
	if len(v) < payment.MinSecretLen {
		// Never echo the secret itself.
		e.errs = append(e.errs, fmt.Errorf("SECKILL_PAYMENT_SECRET: must be at least %d bytes", payment.MinSecretLen))
		return nil
	}
	return []byte(v)
}

// CodeGuesses reads SECKILL_CODE_GUESSES_PER_BUYER (default 10/10m) and
// SECKILL_CODE_GUESSES_PER_ADDR (default 100/10m): how many invalid presale
// codes a buyer in one sale, and a client address in any, may send in a
// window before coded orders are refused with 429 (access.ParseGuessLimit;
// "off" for none).
func CodeGuesses(e *Env) (perBuyer, perAddr access.GuessLimit) {
	read := func(name string, def access.GuessLimit) access.GuessLimit {
		v, ok := e.get(name)
		if !ok {
			return def
		}
		l, err := access.ParseGuessLimit(v)
		if err != nil {
			e.fail(name, v, err.Error())
			return def
		}
		return l
	}
	return read("SECKILL_CODE_GUESSES_PER_BUYER", access.DefaultGuessesPerBuyer),
		read("SECKILL_CODE_GUESSES_PER_ADDR", access.DefaultGuessesPerAddr)
}

// PaymentWindow reads SECKILL_PAYMENT_WINDOW (default
// activity.DefaultPaymentWindow, 30m).
func PaymentWindow(e *Env) time.Duration {
	return e.Duration("SECKILL_PAYMENT_WINDOW", activity.DefaultPaymentWindow)
}

// DrawGrace reads SECKILL_DRAW_GRACE: how long after a draw's entries
// close the drawer reads the entries' topic's end, and until when the api
// answers an entry Kafka acknowledged (ADR 7). It is at least
// SECKILL_KAFKA_WRITE_TIMEOUT (kcfg's), so every entry taken before the
// close is acknowledged or refused by then; default that plus 2 s for
// the clocks. The api's must not be longer than the consumers'.
func DrawGrace(e *Env, kcfg orderevents.Config) time.Duration {
	def := kcfg.WriteTimeout + 2*time.Second
	g := e.Duration("SECKILL_DRAW_GRACE", def)
	if g < kcfg.WriteTimeout {
		e.fail("SECKILL_DRAW_GRACE", g.String(), fmt.Sprintf("at least SECKILL_KAFKA_WRITE_TIMEOUT (%s): an entry acknowledged later would miss its draw", kcfg.WriteTimeout))
	}
	return g
}

// LogLevel reads SECKILL_LOG_LEVEL (debug, info, warn or error, in any case;
// default info) and returns it in lower case. The programs build their
// logger before reading the configuration, so that they can report it; an
// unknown level makes that logger log at info, and is refused here.
func LogLevel(e *Env) string {
	v, ok := e.get("SECKILL_LOG_LEVEL")
	if !ok {
		return "info"
	}
	if _, err := logs.ParseLevel(v); err != nil {
		e.fail("SECKILL_LOG_LEVEL", v, "want debug, info, warn or error")
		return "info"
	}
	return strings.ToLower(v)
}

// Admin reads SECKILL_ADMIN_ADDR, the admin listener's address (/metrics,
// and /debug/pprof/ when SECKILL_PPROF=true), with def when unset; "off"
// turns the listener off. SECKILL_PPROF without a listener is refused:
// profiles are never served on the public port.
func Admin(e *Env, def string) metrics.AdminConfig {
	addr, set := e.get("SECKILL_ADMIN_ADDR")
	if !set {
		addr = def
	}
	if strings.EqualFold(addr, "off") {
		addr = ""
	}
	if addr != "" {
		if checkAddr(addr) != nil {
			e.fail("SECKILL_ADMIN_ADDR", addr, wantAddr+", or off")
			addr = ""
		}
	}
	cfg := metrics.AdminConfig{Addr: addr, Pprof: e.Bool("SECKILL_PPROF", false), Optional: !set}
	if cfg.Pprof && addr == "" {
		e.errs = append(e.errs, errors.New("SECKILL_PPROF=true needs an admin listener: set SECKILL_ADMIN_ADDR"))
	}
	return cfg
}

// HealEvery reads SECKILL_HEAL_EVERY, the period of the consumer's watch
// for lost Redis data (default 1s); "off" turns the watch off and returns 0.
func HealEvery(e *Env) time.Duration {
	if v, ok := e.get("SECKILL_HEAL_EVERY"); ok && strings.EqualFold(v, "off") {
		return 0
	}
	return e.Duration("SECKILL_HEAL_EVERY", time.Second)
}

// WarmupLead reads SECKILL_WARMUP_LEAD: how long before an activity's
// starts_at the consumer warms it up (default 5m); "off" turns the
// schedule off and returns 0 (manual warm-up only).
func WarmupLead(e *Env) time.Duration {
	if v, ok := e.get("SECKILL_WARMUP_LEAD"); ok && strings.EqualFold(v, "off") {
		return 0
	}
	return e.Duration("SECKILL_WARMUP_LEAD", 5*time.Minute)
}

// TestClockOffset reads SECKILL_TEST_CLOCK_OFFSET, a Go duration such as
// -5s (empty: 0) by which the program shifts its own wall clock (what
// time.Now would say: clock.Clock.Wall, where the programs read it for
// anything a sale's window decides; see clock.New). Only tests set it: it
// plays an instance whose clock is off, which libfaketime cannot do to a
// Go program. Paths that only measure durations or check tokens and
// signatures (rate limits, JWT expiry, payment signatures) read time.Now
// and are not shifted.
func TestClockOffset(e *Env) time.Duration {
	const name = "SECKILL_TEST_CLOCK_OFFSET"
	v, ok := e.get(name)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.fail(name, v, "want a Go duration such as -5s or 250ms (only tests set it)")
		return 0
	}
	return d
}

// DefaultGCPercent is the garbage collector's target the programs set for
// themselves when GOGC is not in their environment. Their live heaps are a
// few MB, so at Go's default of 100 the collector runs many times a second
// under load (7 % of the api's CPU and 15 % of the consumer's in the
// bench's profiles). A higher target trades a few more MB of heap for
// fewer collections.
const DefaultGCPercent = 400

// GC sets the collector's target to DefaultGCPercent unless GOGC is set
// (the runtime has read it then) and returns the target in force.
func GC(e *Env) int {
	if _, ok := e.get("GOGC"); ok {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(DefaultGCPercent)
	return DefaultGCPercent
}

// Webhooks is the webhook settings: AllowPrivate is shared by the api (it
// refuses to register an endpoint on a loopback or private address unless
// it is set) and the consumer (which refuses to connect to one); the rest
// is the consumer's dispatcher's.
type Webhooks struct {
	AllowPrivate bool
	Timeout      time.Duration
	Concurrency  int
	Batch        int
	Every        time.Duration
	Schedule     hook.Schedule
	DisableAfter time.Duration
}

// WebhookSettings reads SECKILL_WEBHOOK_*.
func WebhookSettings(e *Env) Webhooks {
	w := Webhooks{
		AllowPrivate: e.Bool("SECKILL_WEBHOOK_ALLOW_PRIVATE", false),
		Timeout:      e.Duration("SECKILL_WEBHOOK_TIMEOUT", 15*time.Second),
		Concurrency:  e.Int("SECKILL_WEBHOOK_CONCURRENCY", 32, 1, 256),
		Batch:        e.Int("SECKILL_WEBHOOK_BATCH", 1000, 1, 5000),
		Every:        e.Duration("SECKILL_WEBHOOK_EVERY", 100*time.Millisecond),
		Schedule:     hook.DefaultSchedule,
		DisableAfter: e.Duration("SECKILL_WEBHOOK_DISABLE_AFTER", 24*time.Hour),
	}
	if v, ok := e.get("SECKILL_WEBHOOK_RETRY_SCHEDULE"); ok {
		s, err := hook.ParseSchedule(v)
		if err != nil {
			e.fail("SECKILL_WEBHOOK_RETRY_SCHEDULE", v, err.Error())
		}
		w.Schedule = s
	}
	return w
}
