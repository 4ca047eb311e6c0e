package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/bench/internal/cpu"
	"github.com/seckill/seckill/bench/internal/procs"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
)

// env is what every scenario runs against: the API's address and secret,
// and the bench's own connections to Redis and MySQL for its reads.
type env struct {
	opts  options
	root  string
	dir   string // this run's results folder
	runID string

	rdb    redis.UniversalClient
	store  *stockredis.Store // the API's key prefix
	db     *orderdb.DB
	apis   []string // base URLs of the APIs the load is spread over
	secret []byte
	admin  string // admin bearer token

	idleBase  *cpu.Usage // the services alone, before the programs started (idle scenario)
	historyDB string     // the bench's own database (--history), dropped at the end
	// idleSessions is the CPU of MySQL's threads serving the programs'
	// connections during the idle scenario, % of one CPU (-1: unknown).
	idleSessions float64
	apiAdmins    []string // the started apis' admin listeners (/metrics)

	prefix, topic, group string
	services             *procs.Services
	programs             []*procs.Process
	pprof                map[string]string // program -> pprof address
	items                []int64           // items the bench created, for cleanup
	binDir               string            // the built programs (removed at the end)
	meter                *meter
	watched              []cpu.Proc // processes whose CPU time the report shows
	// restart starts a program the bench started again, with the same
	// environment and ports and more after it (the first-sale scenario
	// restarts the APIs, the events scenario every program without and
	// with the outbox).
	restart map[string]func(more ...string) (*procs.Process, error)
}

// measureCPU starts measuring CPU use; the returned function ends it.
func (e *env) measureCPU(extra ...cpu.Proc) func() *cpu.Usage {
	return measure(append(append([]cpu.Proc(nil), e.watched...), extra...))
}

// measure starts measuring the CPU use of watched; the returned function
// ends it (nil when /proc could not be read).
func measure(watched []cpu.Proc) func() *cpu.Usage {
	a, err := cpu.Take(watched)
	if err != nil {
		return func() *cpu.Usage { return nil }
	}
	return func() *cpu.Usage {
		b, err := cpu.Take(watched)
		if err != nil {
			return nil
		}
		u := cpu.Between(a, b, runtime.NumCPU())
		return &u
	}
}

func newRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

// setup prepares everything; close undoes what it did, even after a
// partial setup.
func setup(ctx context.Context, opts options, m *meter, runID string) (*env, error) {
	e := &env{opts: opts, runID: runID, meter: m, pprof: map[string]string{}, idleSessions: -1}
	root, err := procs.ModuleRoot(ctx)
	if err != nil {
		return e, err
	}
	e.root = root
	out := opts.out
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	e.dir = filepath.Join(out, e.runID)
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return e, err
	}

	// The bench's own connections; they also tell whether the services run.
	rcfg := opts.redisConfig(opts.redisPrefix)
	if opts.startsPrograms() {
		e.prefix = "bench" + strings.ReplaceAll(e.runID, "-", "")
		rcfg.Prefix = e.prefix
	} else {
		e.prefix = opts.redisPrefix
	}
	e.rdb = stockredis.NewClient(rcfg)
	e.store = stockredis.New(e.rdb, rcfg.Prefix)
	// Opening MySQL connects, so it doubles as MySQL's check: when MySQL is
	// down the bench starts it, then opens it below.
	openDB := func(context.Context) error {
		if e.db != nil {
			return nil
		}
		db, err := orderdb.Open(orderdb.Config{DSN: opts.mysqlDSN, MaxOpenConns: 64})
		if err == nil {
			e.db = db
		}
		return err
	}
	checks := map[string]func(context.Context) error{
		opts.serviceName("redis"): e.store.Ping,
		opts.serviceName("mysql"): openDB,
		opts.serviceName("kafka"): func(ctx context.Context) error { return orderevents.Ping(ctx, opts.brokers) },
	}
	for _, a := range opts.redisAddrs() {
		if !loopback(a) {
			delete(checks, opts.serviceName("redis"))
		}
	}
	e.services, err = procs.EnsureServices(ctx, root, checks)
	if err != nil {
		return e, err
	}
	if s := e.services.Started(); len(s) > 0 {
		m.say("started services: %s (they are stopped again at the end)", strings.Join(s, ", "))
	}
	if err := openDB(ctx); err != nil {
		return e, err
	}
	if err := e.db.Migrate(ctx); err != nil {
		return e, fmt.Errorf("migrate: %w", err)
	}
	if opts.history > 0 {
		if err := e.withHistory(ctx); err != nil {
			return e, err
		}
	}

	if opts.has("idle") && opts.startsPrograms() {
		// The services' own idle CPU, before any program of ours runs:
		// the idle scenario's share of the pipeline is what it adds.
		e.idleBase, err = e.idleServices(ctx, opts.shapeOf("idle").duration)
		if err != nil {
			return e, err
		}
	}
	if !opts.startsPrograms() {
		e.apis = opts.apiURLs
		e.secret = []byte(opts.jwtSecret)
	} else if err := e.startPrograms(ctx); err != nil {
		return e, err
	}
	e.admin, err = auth.Mint(e.secret, "1", auth.RoleAdmin, tokenTTL)
	if err != nil {
		return e, err
	}
	e.watched = append([]cpu.Proc{{Name: "bench", Pid: os.Getpid()}}, cpu.FindServices()...)
	for _, p := range e.programs {
		e.watched = append(e.watched, cpu.Proc{Name: p.Name, Pid: p.Pid()})
	}
	return e, nil
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// startPrograms builds api and consumer and runs --apis api processes (each
// on its own loopback port) and --consumers consumers, all with the bench's
// own Redis prefix, Kafka topic, consumer group and JWT secret.
func (e *env) startPrograms(ctx context.Context) error {
	bin, err := os.MkdirTemp("", "seckill-bench-bin-")
	if err != nil {
		return err
	}
	e.binDir = bin
	e.meter.say("building api and consumer")
	if err := procs.Build(ctx, e.root, bin); err != nil {
		return err
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	e.secret = []byte(hex.EncodeToString(secret))
	e.topic = "bench." + e.runID + ".orders"
	e.group = "bench-" + e.runID
	common := []string{
		"SECKILL_REDIS_ADDRS=" + strings.Join(e.opts.redisAddrs(), ","),
		"SECKILL_REDIS_CLUSTER=" + strconv.FormatBool(e.opts.redisCluster),
		"SECKILL_REDIS_PREFIX=" + e.prefix,
		"SECKILL_MYSQL_DSN=" + e.opts.mysqlDSN,
		"SECKILL_KAFKA_BROKERS=" + strings.Join(e.opts.brokers, ","),
		"SECKILL_KAFKA_TOPIC=" + e.topic,
		"SECKILL_OUTBOX_TOPIC=" + e.outboxTopic(),
		"SECKILL_CONSUMER_GROUP=" + e.group,
		"SECKILL_JWT_SECRET=" + string(e.secret),
		"SECKILL_LOG_LEVEL=warn",
		// The bench measures the pipeline, and compare's buyer pool sends
		// each buyer more than the default per-user rate: without this the
		// API would answer many of them 429 (cheaply) and the comparison
		// with the strategies, which have no rate limit, would be unfair.
		// --program-env SECKILL_RATE_LIMIT_USER=20 measures with it.
		"SECKILL_RATE_LIMIT_USER=0",
	}
	// start runs the i-th (from 0) program of a kind (api or consumer).
	// Each program gets its own admin listener (/metrics, and with
	// --pprof /debug/pprof/), so none collides with another's default
	// port. --program-env comes last, so it overrides anything here.
	start := func(kind string, i int, extra ...string) (*procs.Process, error) {
		name := numbered(kind, i)
		port, err := procs.FreePort()
		if err != nil {
			return nil, err
		}
		admin := "127.0.0.1:" + strconv.Itoa(port)
		extra = append(extra, "SECKILL_ADMIN_ADDR="+admin)
		if kind == "api" {
			e.apiAdmins = append(e.apiAdmins, admin)
		}
		if e.opts.pprof {
			e.pprof[name] = admin
			extra = append(extra, "SECKILL_PPROF=true")
		}
		penv := slices.Concat(common, extra, e.opts.programEnv)
		run := func(more ...string) (*procs.Process, error) {
			return procs.Start(name, filepath.Join(bin, kind), slices.Concat(penv, more), filepath.Join(e.dir, name+".log"))
		}
		p, err := run()
		if err != nil {
			return nil, err
		}
		e.programs = append(e.programs, p)
		if e.restart == nil {
			e.restart = map[string]func(more ...string) (*procs.Process, error){}
		}
		e.restart[name] = run
		return p, nil
	}
	var apis []*procs.Process
	for i := range e.opts.apis {
		port, err := procs.FreePort()
		if err != nil {
			return err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		a, err := start("api", i, "SECKILL_HTTP_ADDR="+addr)
		if err != nil {
			return err
		}
		apis = append(apis, a)
		e.apis = append(e.apis, "http://"+addr)
	}
	for i := range e.opts.consumers {
		if _, err := start("consumer", i); err != nil {
			return err
		}
	}
	for i, a := range apis {
		if err := procs.WaitReady(ctx, e.apis[i]+"/readyz", a, 60*time.Second); err != nil {
			return err
		}
	}
	if len(apis) == 1 {
		e.meter.say("api (pid %d) on %s, %d consumer(s); prefix %s, topic %s; logs in %s",
			apis[0].Pid(), e.apis[0], e.opts.consumers, e.prefix, e.topic, e.dir)
		return nil
	}
	var on []string
	for i, a := range apis {
		on = append(on, fmt.Sprintf("%s (pid %d) on %s", a.Name, a.Pid(), e.apis[i]))
	}
	e.meter.say("%d apis: %s; %d consumer(s); prefix %s, topic %s; logs in %s",
		len(apis), strings.Join(on, ", "), e.opts.consumers, e.prefix, e.topic, e.dir)
	return nil
}

// restartAPIs stops every api the bench started and starts it again, as a
// deploy would, then waits for each to say it is ready: what a first
// request of a fresh api would wait for is then paid before /readyz, or
// by the buyers.
func (e *env) restartAPIs(ctx context.Context) error {
	return e.restartPrograms(ctx, false)
}

// restartPrograms stops the apis the bench started, and with consumers
// its consumers too, and starts them again with more added to their
// environment (after --program-env, so it wins), then waits for each api
// to say it is ready. The consumers have no readiness to wait for: they
// join their group again and take up the topic where the last ones
// committed.
func (e *env) restartPrograms(ctx context.Context, consumers bool, more ...string) error {
	if e.restart == nil {
		return errors.New("the programs were not started by the bench (--api): they cannot be restarted")
	}
	i := 0
	for pi, p := range e.programs {
		isAPI := strings.HasPrefix(p.Name, "api")
		if !isAPI && !consumers {
			continue
		}
		if err := p.Stop(20 * time.Second); err != nil {
			return err
		}
		np, err := e.restart[p.Name](more...)
		if err != nil {
			return err
		}
		e.programs[pi] = np
		for wi := range e.watched {
			if e.watched[wi].Name == p.Name {
				e.watched[wi].Pid = np.Pid()
			}
		}
		if !isAPI {
			continue
		}
		if err := procs.WaitReady(ctx, e.apis[i]+"/readyz", np, 60*time.Second); err != nil {
			return err
		}
		i++
	}
	return nil
}

// outboxTopic is the Kafka topic of the order events of the programs the
// bench starts: one of the run's own, like the orders' topic, so their
// relays publish nothing to the installation's.
func (e *env) outboxTopic() string { return "bench." + e.runID + ".events" }

// numbered names the i-th (from 0) of several programs of one kind:
// api, api2, api3, ... as the logs, CPU table and profiles call them.
func numbered(kind string, i int) string {
	if i == 0 {
		return kind
	}
	return kind + strconv.Itoa(i+1)
}

// checkPrograms reports a program the bench started that has died.
func (e *env) checkPrograms() error {
	for _, p := range e.programs {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("%s exited during the run (%v); see %s", p.Name, err, p.Log)
		}
	}
	return nil
}

// close stops what setup started and removes the bench's data unless
// --keep-data.
func (e *env) close() error {
	var errs []error
	for i := len(e.programs) - 1; i >= 0; i-- {
		if err := e.programs[i].Stop(20 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if !e.opts.keepData {
		if err := e.cleanup(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
		}
	}
	if !e.opts.keepData {
		if err := e.dropHistory(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if e.db != nil {
		e.db.Close()
	}
	if e.rdb != nil {
		e.rdb.Close()
	}
	if e.binDir != "" {
		os.RemoveAll(e.binDir)
	}
	if err := e.services.Stop(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// cleanup deletes the bench's MySQL rows (only its own items' rows), its
// Redis keys (only under the prefix it gave the programs it started) and
// its Kafka topics and consumer group (only the ones it made). With --api the Redis keys stay:
// they share the running API's prefix.
func (e *env) cleanup(ctx context.Context) error {
	var errs []error
	if e.db != nil {
		g := e.db.Gorm().WithContext(ctx)
		for _, item := range e.items {
			// The orders' events first, with their deliveries to any
			// endpoint: the outbox and the deliveries name an order by its
			// number alone.
			for _, q := range []string{
				"DELETE a FROM webhook_attempts a JOIN webhook_deliveries d ON a.delivery_id = d.id JOIN orders r ON d.stream = r.order_no WHERE r.item_id = ?",
				"DELETE d FROM webhook_deliveries d JOIN orders r ON d.stream = r.order_no WHERE r.item_id = ?",
				"DELETE o FROM outbox_events o JOIN orders r ON o.stream = r.order_no WHERE r.item_id = ?"} {
				if err := g.Exec(q, item).Error; err != nil {
					errs = append(errs, err)
				}
			}
			for {
				res := g.Exec("DELETE FROM orders WHERE item_id = ? LIMIT 20000", item)
				if res.Error != nil {
					errs = append(errs, res.Error)
					break
				}
				if res.RowsAffected == 0 {
					break
				}
			}
			// A sale of several items lists them in activity_items, a
			// sale with a waiting room has its row in activity_rooms and a
			// draw its rows in activity_draws, draw_entries and
			// draw_results: those rows go first (they refer to the
			// activity and the item).
			for _, q := range []string{"DELETE FROM activity_rooms WHERE activity_id IN (SELECT id FROM activities WHERE item_id = ?)",
				"DELETE FROM draw_results WHERE activity_id IN (SELECT id FROM activities WHERE item_id = ?)",
				"DELETE FROM draw_entries WHERE activity_id IN (SELECT id FROM activities WHERE item_id = ?)",
				"DELETE FROM activity_draws WHERE activity_id IN (SELECT id FROM activities WHERE item_id = ?)",
				"DELETE FROM sale_audit WHERE activity_id IN (SELECT id FROM activities WHERE item_id = ?)",
				"DELETE FROM sale_codes WHERE activity_id IN (SELECT id FROM activities WHERE item_id = ?)",
				"DELETE FROM sale_code_batches WHERE activity_id IN (SELECT id FROM activities WHERE item_id = ?)",
				"DELETE FROM activity_items WHERE activity_id IN (SELECT id FROM activities WHERE item_id = ?)",
				"DELETE FROM activity_items WHERE item_id = ?", "DELETE FROM activities WHERE item_id = ?",
				"DELETE FROM item_stock WHERE item_id = ?", "DELETE FROM items WHERE id = ?"} {
				if err := g.Exec(q, item).Error; err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if e.rdb != nil && e.opts.startsPrograms() && strings.HasPrefix(e.prefix, "bench") {
		del := func(ctx context.Context, node redis.UniversalClient) error {
			return deleteKeys(ctx, node, e.prefix+":*")
		}
		if err := forEachNode(ctx, e.rdb, del); err != nil {
			errs = append(errs, err)
		}
	}
	if e.topic != "" {
		if err := orderevents.DeleteTopics(ctx, e.opts.brokers, e.topic, orderevents.DLQTopic(e.topic), e.outboxTopic()); err != nil {
			errs = append(errs, err)
		}
	}
	if e.group != "" {
		if err := orderevents.DeleteGroup(ctx, e.opts.brokers, e.group); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteKeys removes every key matching pattern (one UNLINK a key, in
// pipelines, so keys of different cluster slots never meet in one command).
func deleteKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) error {
	iter := rdb.Scan(ctx, 0, pattern, 5000).Iterator()
	batch := make([]string, 0, 1000)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range batch {
				p.Unlink(ctx, k)
			}
			return nil
		})
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}
