package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
)

// The scenarios, in the order --scenario all runs them.
var scenarioNames = []string{"idle", "first-sale", "flash", "flash-rate", "clickers", "sustained", "compare"}

// options is the parsed command line.
type options struct {
	scenarios []string

	// Load shape; zero means "the scenario's default".
	connections int
	// uuidSubjects: buyers' token subjects are UUIDs, not numbers.
	uuidSubjects bool
	duration     time.Duration
	rate         float64
	flashRate    float64
	entryRate    float64 // the draw scenario's fixed-rate phase, entries/s (0: none)
	stock        int64
	users        int64
	clicks       int
	retries      float64
	quantity     int
	orders       int64   // the reconcile scenario's orders
	buckets      int     // the activities' stock_buckets
	vsBuckets    int     // the buckets scenario compares 1 bucket with this many
	sizes        int     // items of each sale of sizes and drops; 0: the scenario's
	drops        int     // sales at once in drops
	skew         float64 // Zipf exponent of the buyers' choice of size

	refDuration  time.Duration
	drainTimeout time.Duration
	eventsWait   time.Duration // the events scenario's wait for its deliveries

	apiURLs      []string // base URLs of running APIs to use instead of starting any (--api)
	apis         int      // API processes: started here (--apis), or len(apiURLs)
	jwtSecret    string
	redisAddr    string // one address, or the seed nodes of a cluster, comma-separated
	redisCluster bool
	redisPrefix  string
	mysqlDSN     string
	brokers      []string
	consumers    int

	out      string
	pprof    bool
	keepData bool
	progress string // auto, bar, lines, off
	client   string // raw or nethttp

	programEnv []string // extra KEY=VALUE for the started api and consumer

	// history: orders of past sales loaded into a database of the bench's
	// own before the scenarios run (--history; 0: the DSN's database as it is).
	history int

	topologies   []topology        // --topology: run on each in turn (none: the flags' addresses)
	topology     string            // the one this run is on
	serviceNames map[string]string // check (redis, mysql, kafka) -> scripts/services name
	// Kafka replication of the topology's topics (0: the broker's default).
	kafkaReplication, kafkaMinInsync int

	tracingModes []string // --tracing: run with each in turn (none: the programs' environment decides)
	tracing      string   // the mode of this run: off, on or ""
	traceSample  float64  // --trace-sample: the ratio of traces sampled with tracing on

	set map[string]bool // flags given on the command line
}

func parseFlags(args []string, lookup func(string) (string, bool), stderr io.Writer) (options, error) {
	env := config.New(lookup)
	var c options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: go run ./bench [flags]     (make bench BENCHFLAGS="...")

Drives the real HTTP API of running api and consumer programs (started here,
with their own Redis prefix, Kafka topic and consumer group, unless --api is
given), then verifies the pipeline's invariants with its own reads of MySQL and
Redis. Exits 1 when an invariant is broken. Targets are printed, not enforced.
With --apis N (or several URLs in --api) the load's connections are spread over
the APIs round-robin, each connection staying with one API.

Scenarios (--scenario, comma-separated, default all):
  idle        10s (--duration) with no load: the CPU the started programs and the services use
              while nobody buys (measured first, before the reference limits); with --history N
              on a database holding N historical orders
  first-sale  restarts the api, then two sales one after the other, 5,000 buyers (--users) at a
              fixed 5,000/s (--flash-rate), stock 200, driven by vegeta's attacker: the first
              sale after a start against the next one
  flash       500 connections, 30s, stock 200, every request a new buyer
  flash-rate  flash at a fixed arrival rate (--flash-rate, default 5000/s), open model
  clickers    500 buyers x 10 clicks (fresh key per click, 20% retried with the same key), stock 100
  sustained   stock 1,000,000, 200 connections, 30s: orders/s into MySQL, PENDING->CREATED, lag, drain
  compare     naive / SETNX lock / Lua / our pipeline under the same load (10s each, stock 200)
  buckets     one hot item, flash load with stock that lasts (500 connections, 15s each, stock 1,000,000),
              run with 1 stock bucket and then with --vs-buckets (3) side by side (not in all; meant
              for Redis Cluster: --redis-cluster and SECKILL_REDIS_ADDRS)
  salepage    the crowd refreshing a live sale's page, GET /api/v1/activities/{id} with no token
              (500 connections, 15s, stock 1000): pages/s, and the MGETs Redis served meanwhile
              (not in all)
  queue       a sale with a waiting room (stock 1000, 2,000 admissions/s): 100,000 buyers (--users)
              join in a burst before the start over 500 connections, then poll the queue as fast as
              the connections allow until 15s (--duration) after the start, ordering with their
              admission once admitted: joins/s, polls/s against the pages/s of salepage (added when
              --scenario does not name it), starts_at to sold out, the most admissions outstanding
              against the units left, and every accepted order checked for its buyer's admission
              (not in all)
  draw        a draw sale ("mode": "draw") of 5 sizes (--sizes) holding 1,000 units (--stock) in a bell
              shape: up to 100,000 buyers (--users) enter once each over 500 connections, a size each
              picked Zipf-like (--size-skew), the first 10s at a fixed 5,000/s (--entry-rate; their
              latency from when each was due), the rest as fast as they go, until entries_close_at
              60s (--duration) on; the consumer then
              draws and gives each winner an order: entries/s against flash's req/s (added when --scenario
              does not name it) and the raw MySQL transaction's, close to DRAWN and to every winner's
              order CREATED, the record checked with draw.Verify, each size's stock won, one order a
              winner (not in all)
  events      the sustained load (200 connections, 30s, stock 1,000,000) twice, the programs started
              again for each: with SECKILL_OUTBOX=off (no order events), then with the outbox on and one
              webhook endpoint (a receiver in the bench that verifies every signature) registered before
              the sale: orders/s of each beside sustained's (added when --scenario does not name it), and
              commit to delivery of every event (P50/P99/max), waiting up to --events-wait after the load
              for the last one (not in all; without --api)
  floor       the flash load against a Gin server that does what the api does before it touches
              stock (bearer token, Idempotency-Key, JSON body) and then answers 409: the CPU per
              answer of that floor on this machine, beside the api's (500 connections, 10s; not in all)
  sizes       one drop of 12 sizes (--sizes), stock in a bell shape over them, each buyer picking one
              size, a few sizes wanted most (Zipf-like, --size-skew): run as flash (500 connections,
              30s, stock 200) and as sustained (200 connections, 30s, stock 1,000,000), each reported
              as a ratio to the one-item flash and sustained of the same run, which it adds when
              --scenario does not name them (not in all)
  drops       the same with 20 drops at once (--drops), 10 sizes each, buyers spread evenly over
              the drops; stock is each drop's (not in all)
  reconcile   builds a settled sale of --orders orders (1,000,000) of one item straight into a MySQL
              database and a redis-server of its own, then times the reconciler program and its peak
              memory: a clean check, a repair after FLUSHALL, a repair after Redis came back from a
              copy taken before a few thousand more orders, each followed by a check (not in all)
The reference limits (the reserve script called straight from Go, and one
MySQL transaction per order) are measured first whenever flash, flash-rate,
sustained or compare runs, or alone with --scenario reference.

Flags:
`)
		fs.PrintDefaults()
	}
	scen := fs.String("scenario", "all", "scenarios to run: all, or a comma-separated list of "+strings.Join(scenarioNames, ", ")+", "+strings.Join(extraScenarios, ", "))
	fs.IntVar(&c.connections, "connections", 0, "concurrent connections (default: the scenario's)")
	fs.DurationVar(&c.duration, "duration", 0, "how long each timed load runs (default: the scenario's)")
	fs.Float64Var(&c.rate, "rate", 0, "fixed arrival rate in requests/s for flash and sustained (open model; 0 = closed model)")
	fs.Float64Var(&c.flashRate, "flash-rate", 5000, "arrival rate of the flash-rate scenario, requests/s")
	fs.Float64Var(&c.entryRate, "entry-rate", 5000, "the draw scenario first offers its entries at this fixed rate for 10s (at most half its buyers), open model, for their latency; 0 skips it")
	fs.Int64Var(&c.stock, "stock", 0, "initial stock (default: the scenario's)")
	fs.Int64Var(&c.users, "users", 0, "distinct buyers: clickers' buyers (500), compare's buyer pool (1000), queue's joiners (100000), draw's entrants (100000); flash and sustained use a new buyer per request")
	fs.Int64Var(&c.orders, "orders", 1_000_000, "orders of the sale the reconcile scenario builds (one buyer each; stock 1.2x unless --stock)")
	fs.IntVar(&c.clicks, "clicks", 10, "clicks per buyer (clickers)")
	fs.Float64Var(&c.retries, "retry-fraction", 0.2, "fraction of clicks retried with the same Idempotency-Key (clickers)")
	fs.BoolVar(&c.uuidSubjects, "uuid-subjects", false, "buyers' tokens name them by UUIDs (as an identity provider does) instead of numbers; the seed's strategies in compare keep numbers")
	fs.IntVar(&c.quantity, "quantity", 1, "units per order (the activity's per-user limit is set to it)")
	fs.DurationVar(&c.refDuration, "reference-duration", 5*time.Second, "how long each reference limit is measured")
	fs.DurationVar(&c.drainTimeout, "drain-timeout", 60*time.Second, "how long to wait for the pipeline to drain after the load")
	fs.DurationVar(&c.eventsWait, "events-wait", 3*time.Minute, "how long the events scenario waits, once its pipeline drained, for the webhook endpoint to have every event of its sale (at most 5m)")
	api := fs.String("api", "", "base URL of a running API, or a comma-separated list of running APIs sharing one JWT secret and Redis prefix (default: build and start api and consumer here)")
	fs.IntVar(&c.apis, "apis", 1, "api processes to start (1-8; without --api); the load's connections are spread over them round-robin")
	fs.StringVar(&c.jwtSecret, "jwt-secret", "", "secret of the running API's tokens with --api (default $SECKILL_JWT_SECRET)")
	fs.IntVar(&c.buckets, "buckets", 1, "stock buckets of every sale's activity (1-16; the activity's stock_buckets)")
	fs.IntVar(&c.vsBuckets, "vs-buckets", 3, "the buckets scenario's second run uses this many stock buckets (2-16)")
	fs.IntVar(&c.sizes, "sizes", 0, "items (sizes) of each sale of the sizes, drops and draw scenarios, 2-100 (default: 12 for sizes, 10 for drops, 5 for draw)")
	fs.IntVar(&c.drops, "drops", 20, "sales at once in the drops scenario, 1-100")
	fs.Float64Var(&c.skew, "size-skew", 1, "how the buyers of sizes, drops and draw favour a few sizes: the size of popularity rank r is picked in proportion to 1/r^skew (0: evenly; 0-4)")
	fs.StringVar(&c.redisAddr, "redis-addr", strings.Join(env.List("SECKILL_REDIS_ADDRS", []string{env.String("SECKILL_REDIS_ADDR", "127.0.0.1:6379")}), ","),
		"Redis address, or a cluster's seed nodes comma-separated ($SECKILL_REDIS_ADDRS or $SECKILL_REDIS_ADDR)")
	fs.BoolVar(&c.redisCluster, "redis-cluster", env.Bool("SECKILL_REDIS_CLUSTER", false), "Redis is a cluster ($SECKILL_REDIS_CLUSTER); the started programs get the same")
	fs.StringVar(&c.redisPrefix, "redis-prefix", "", "Redis key prefix of the running API with --api (default $SECKILL_REDIS_PREFIX or sk)")
	fs.StringVar(&c.mysqlDSN, "mysql-dsn", env.String("SECKILL_MYSQL_DSN", orderdb.DefaultDSN), "MySQL DSN ($SECKILL_MYSQL_DSN)")
	brokers := fs.String("kafka-brokers", env.String("SECKILL_KAFKA_BROKERS", "127.0.0.1:9092"), "Kafka brokers, comma-separated ($SECKILL_KAFKA_BROKERS)")
	fs.IntVar(&c.consumers, "consumers", 1, "consumer processes to start (without --api)")
	topo := fs.String("topology", "", "run against named services instead of the addresses above: cluster (one Kafka broker, the 3-master Redis Cluster, MySQL 3306), replicated (three brokers at replication factor 3, the Redis Cluster with replicas, the MariaDB primary with its standby: README \"Running replicated\"), or both, one after the other, with a side-by-side table")
	tracingFlag := fs.String("tracing", "", "the started programs' OpenTelemetry tracing: off, on (OTLP/HTTP to a sink in the bench, --trace-sample of the traces), or both, one after the other, with a side-by-side table")
	fs.Float64Var(&c.traceSample, "trace-sample", 0.01, "with --tracing on or both, the ratio of traces sampled (OTEL_TRACES_SAMPLER=parentbased_traceidratio)")
	fs.Func("program-env", "extra `KEY=VALUE` for the api and consumer the bench starts (repeatable), e.g. SECKILL_CONSUMER_BATCH=2000", func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		c.programEnv = append(c.programEnv, v)
		return nil
	})
	fs.IntVar(&c.history, "history", 0, "load this many historical orders (a few dozen past sales, none due) straight into a MySQL database of the bench's own (on --mysql-dsn's server, dropped afterwards unless --keep-data) and run everything on it, e.g. --scenario idle --history 1000000")
	fs.StringVar(&c.out, "out", "bench-results", "directory for the results; each run writes a timestamped folder in it")
	fs.BoolVar(&c.pprof, "pprof", false, "turn on the started programs' pprof (SECKILL_PPROF on their admin listener) and save CPU profiles of the flash, sustained, first-sale and draw entries loads")
	fs.BoolVar(&c.keepData, "keep-data", false, "keep the bench's rows in MySQL and keys in Redis afterwards")
	fs.StringVar(&c.client, "client", "raw", "HTTP client of the load: raw (minimal keep-alive HTTP/1.1, cheap on CPU) or nethttp (net/http Transport)")
	fs.StringVar(&c.progress, "progress", "auto", "progress display: auto (a bar on a terminal, lines otherwise), bar, lines, off")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	if err := env.Err(); err != nil {
		return c, err
	}
	for _, s := range strings.Split(*scen, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "all":
			c.scenarios = append(c.scenarios, scenarioNames...)
		case slices.Contains(scenarioNames, s) || slices.Contains(extraScenarios, s):
			c.scenarios = append(c.scenarios, s)
		default:
			return c, fmt.Errorf("unknown scenario %q (want all, %s, %s)", s, strings.Join(scenarioNames, ", "), strings.Join(extraScenarios, ", "))
		}
	}
	c.scenarios = withOneItemLoads(c.scenarios)
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.brokers = append(c.brokers, b)
		}
	}
	var problems []string
	topos, err := parseTopology(*topo)
	if err != nil {
		problems = append(problems, err.Error())
	}
	c.topologies = topos
	if c.tracingModes, err = parseTracing(*tracingFlag); err != nil {
		problems = append(problems, err.Error())
	}
	if len(c.tracingModes) > 0 && *api != "" {
		problems = append(problems, "--tracing sets up the programs the bench starts: drop --api")
	}
	if c.traceSample < 0 || c.traceSample > 1 {
		problems = append(problems, "--trace-sample must be from 0 to 1")
	}
	if len(c.topologies) > 0 && (*api != "" || c.set["redis-addr"] || c.set["redis-cluster"] || c.set["mysql-dsn"] || c.set["kafka-brokers"]) {
		problems = append(problems, "--topology names the services itself: drop --api, --redis-addr, --redis-cluster, --mysql-dsn and --kafka-brokers")
	}
	if c.connections < 0 || c.connections > 20000 {
		problems = append(problems, "--connections must be from 1 to 20000")
	}
	if c.entryRate < 0 {
		problems = append(problems, "--entry-rate must not be negative")
	}
	if c.rate < 0 || c.flashRate <= 0 {
		problems = append(problems, "--rate must not be negative and --flash-rate must be positive")
	}
	if c.quantity < 1 || c.quantity > 1000 {
		problems = append(problems, "--quantity must be from 1 to 1000")
	}
	if c.stock < 0 || c.users < 0 || c.clicks < 1 || c.retries < 0 || c.retries > 1 {
		problems = append(problems, "--stock and --users must not be negative, --clicks at least 1, --retry-fraction within [0,1]")
	}
	if c.orders < 1 || c.orders > 10_000_000 {
		problems = append(problems, "--orders must be from 1 to 10000000")
	}
	if c.sizes != 0 && (c.sizes < 2 || c.sizes > 100) {
		problems = append(problems, "--sizes must be from 2 to 100")
	}
	if c.drops < 1 || c.drops > 100 {
		problems = append(problems, "--drops must be from 1 to 100")
	}
	if c.skew < 0 || c.skew > 4 {
		problems = append(problems, "--size-skew must be from 0 to 4")
	}
	for _, name := range []string{"sizes", "drops", "draw"} {
		if c.has(name) && c.stock > 0 && c.stock < int64(c.sizesOf(name)) {
			problems = append(problems, fmt.Sprintf("--stock must give every size of a drop of %s a unit (at least %d)", name, c.sizesOf(name)))
		}
	}
	if c.buckets < 1 || c.buckets > 16 || c.vsBuckets < 2 || c.vsBuckets > 16 {
		problems = append(problems, "--buckets must be from 1 to 16 and --vs-buckets from 2 to 16")
	}
	if c.client != "raw" && c.client != "nethttp" {
		problems = append(problems, "--client must be raw or nethttp")
	}
	if !slices.Contains([]string{"auto", "bar", "lines", "off"}, c.progress) {
		problems = append(problems, "--progress must be auto, bar, lines or off")
	}
	if c.apis < 1 || c.apis > maxAPIs {
		problems = append(problems, fmt.Sprintf("--apis must be from 1 to %d", maxAPIs))
	}
	if *api != "" {
		urls, err := parseAPIs(*api)
		if err != nil {
			problems = append(problems, err.Error())
		}
		if c.set["apis"] && c.apis != len(urls) {
			problems = append(problems, "--apis counts the API processes the bench starts; with --api, list every running API's URL instead")
		}
		c.apiURLs, c.apis = urls, max(len(urls), 1)
		for _, u := range urls {
			if c.client == "raw" && strings.HasPrefix(u, "https:") {
				problems = append(problems, "--client raw speaks plain http; use --client nethttp for an https --api")
				break
			}
		}
		if c.jwtSecret == "" {
			c.jwtSecret, _ = lookup("SECKILL_JWT_SECRET")
		}
		if len(c.jwtSecret) < 32 {
			problems = append(problems, "--api needs the API's JWT secret (--jwt-secret or SECKILL_JWT_SECRET, at least 32 bytes)")
		}
		if c.redisPrefix == "" {
			c.redisPrefix = env.String("SECKILL_REDIS_PREFIX", "sk")
		}
		if c.pprof || len(c.programEnv) > 0 {
			problems = append(problems, "--pprof and --program-env work only when the bench starts the programs (no --api)")
		}
	}
	if c.has("events") && *api != "" {
		problems = append(problems, "--scenario events starts the programs again with and without the outbox: drop --api")
	}
	if c.eventsWait <= 0 || c.eventsWait > 5*time.Minute {
		problems = append(problems, "--events-wait must be above 0 and at most 5m")
	}
	if c.history < 0 || c.history > 100_000_000 {
		problems = append(problems, "--history must be from 0 to 100000000")
	}
	if c.history > 0 && *api != "" {
		problems = append(problems, "--history gives the programs the bench starts a database of their own: drop --api")
	}
	if c.connections > 0 && c.connections < c.apis {
		problems = append(problems, fmt.Sprintf("--connections (%d) must be at least the number of APIs (%d), so every API gets a connection", c.connections, c.apis))
	}
	if len(problems) > 0 {
		return c, errors.New(strings.Join(problems, "; "))
	}
	return c, nil
}

// extraScenarios run only when --scenario names them.
var extraScenarios = []string{"reference", "buckets", "salepage", "queue", "draw", "floor", "reconcile", "sizes", "drops", "events", "codes"}

// withOneItemLoads adds the loads other scenarios are read against when
// --scenario does not name them: flash and sustained before the first of
// sizes and drops (their figures are ratios to the one-item loads of the
// same run), salepage before queue (its polls/s against pages/s), flash
// before draw (its entries/s against flash's req/s) and sustained before
// events (its two runs are shown beside it).
func withOneItemLoads(names []string) []string {
	out := slices.Clone(names)
	for _, dep := range []struct {
		before []string
		add    []string
	}{{[]string{"sizes", "drops"}, []string{"flash", "sustained"}}, {[]string{"queue"}, []string{"salepage"}}, {[]string{"draw"}, []string{"flash"}},
		{[]string{"events"}, []string{"sustained"}}} {
		at := slices.IndexFunc(out, func(s string) bool { return slices.Contains(dep.before, s) })
		if at < 0 {
			continue
		}
		var add []string
		for _, s := range dep.add {
			if !slices.Contains(out, s) {
				add = append(add, s)
			}
		}
		out = slices.Insert(out, at, add...)
	}
	return out
}

// sizesOf is how many items each sale of a sized scenario has.
func (c options) sizesOf(name string) int {
	switch {
	case c.sizes > 0:
		return c.sizes
	case name == "drops":
		return 10
	case name == "draw":
		return 5
	default:
		return 12
	}
}

// dropsOf is how many sales a sized scenario runs at once.
func (c options) dropsOf(name string) int {
	if name == "drops" {
		return c.drops
	}
	return 1
}

// maxAPIs is the most API processes one run drives.
const maxAPIs = 8

// parseAPIs splits --api into base URLs (no trailing slash). Each must be an
// http or https URL with a host and nothing after the path, and none may
// appear twice: the report counts them as API processes.
func parseAPIs(v string) ([]string, error) {
	var urls []string
	for _, raw := range strings.Split(v, ",") {
		raw = strings.TrimRight(strings.TrimSpace(raw), "/")
		u, err := url.Parse(raw)
		switch {
		case raw == "":
			return nil, fmt.Errorf("--api %q: an empty URL in the list", v)
		case err != nil:
			return nil, fmt.Errorf("--api: %w", err)
		case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "":
			return nil, fmt.Errorf("--api %q: want a base URL such as http://127.0.0.1:8080", raw)
		case slices.Contains(urls, raw):
			return nil, fmt.Errorf("--api: %s is listed twice", raw)
		}
		urls = append(urls, raw)
	}
	if len(urls) > maxAPIs {
		return nil, fmt.Errorf("--api lists %d APIs, at most %d", len(urls), maxAPIs)
	}
	return urls, nil
}

// startsPrograms says whether the bench builds and starts api and consumer
// itself (no --api).
func (c options) startsPrograms() bool { return len(c.apiURLs) == 0 }

// scenarioDefaults is the load shape of one scenario before flags apply.
type shape struct {
	connections int
	duration    time.Duration
	rate        float64
	stock       int64
	users       int64
}

var defaults = map[string]shape{
	"flash":      {connections: 500, duration: 30 * time.Second, stock: 200},
	"flash-rate": {connections: 500, duration: 30 * time.Second, stock: 200},
	"clickers":   {connections: 500, stock: 100, users: 500},
	"sustained":  {connections: 200, duration: 30 * time.Second, stock: 1_000_000},
	"events":     {connections: 200, duration: 30 * time.Second, stock: 1_000_000}, // each of its two runs
	"compare":    {connections: 500, duration: 10 * time.Second, stock: 200, users: 1000},
	"buckets":    {connections: 500, duration: 15 * time.Second, stock: 1_000_000},
	"salepage":   {connections: 500, duration: 15 * time.Second, stock: 1000},
	// queue: users join, then poll until duration after the sale's start.
	"queue": {connections: 500, duration: 15 * time.Second, stock: 1000, users: 100_000},
	"draw":  {connections: 500, duration: 60 * time.Second, stock: 1000, users: 100_000}, // duration: the entries' window
	"idle":  {duration: 10 * time.Second},
	// codes: flash's shape, twice (without codes, then with), and a
	// priority room of its own size.
	"codes":      {connections: 500, duration: 15 * time.Second, stock: 200},
	"first-sale": {connections: 500, stock: 200, users: 5000},
	"floor":      {connections: 500, duration: 10 * time.Second},
	// A sized scenario runs twice, as flash and as sustained; its stock
	// is each drop's, over its sizes.
	"sizes":           {connections: 500, duration: 30 * time.Second, stock: 200},
	"sizes-sustained": {connections: 200, duration: 30 * time.Second, stock: 1_000_000},
	"drops":           {connections: 500, duration: 30 * time.Second, stock: 200},
	"drops-sustained": {connections: 200, duration: 30 * time.Second, stock: 1_000_000},
}

// shapeOf applies the command line to a scenario's defaults.
func (c options) shapeOf(name string) shape {
	s := defaults[name]
	if c.connections > 0 {
		s.connections = c.connections
	}
	if c.duration > 0 && s.duration > 0 {
		s.duration = c.duration
	}
	if c.stock > 0 {
		s.stock = c.stock
	}
	if c.users > 0 && s.users > 0 {
		s.users = c.users
	}
	switch name {
	case "flash-rate", "first-sale":
		s.rate = c.flashRate
	case "flash", "sustained", "events", "codes", "buckets", "sizes", "sizes-sustained", "drops", "drops-sustained":
		s.rate = c.rate
	}
	return s
}

func (c options) has(name string) bool { return slices.Contains(c.scenarios, name) }

// redisAddrs is --redis-addr split on commas.
func (c options) redisAddrs() []string {
	var out []string
	for _, a := range strings.Split(c.redisAddr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// redisConfig is the bench's Redis connection with key prefix.
func (c options) redisConfig(prefix string) stockredis.Config {
	return stockredis.Config{Addrs: c.redisAddrs(), Cluster: c.redisCluster, Prefix: prefix}
}

// commandLine is how the bench was invoked, for the report.
func commandLine() string {
	return strings.TrimSpace("go run ./bench " + strings.Join(os.Args[1:], " "))
}
