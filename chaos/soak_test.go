//go:build soak

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/lua"
)

// TestSoak is `make soak SEED=<n> DURATION=<d>`: the real programs (two api
// instances, two consumers, the reconciler at the end) on a private set of
// services (scripts/services on other ports, in a folder of its own, stopped
// at the end), while a seeded schedule of faults (soak_schedule_test.go)
// runs several at once and a client mix does everything a sale does
// (soak_clients_test.go). At the end every fault is healed, the pipeline
// drains, and a checker asserts every promise from its own reads of MySQL
// and Redis and from every answer the clients got (soak_check_test.go). It
// prints one report and one summary line; a broken promise fails the test
// and prints the seed, which replays the same schedule.
//
// SOAK_SEED (default 1) and SOAK_DURATION (default 2m) choose the run;
// SOAK_PORT_BASE (default 16000) places the private services' ports;
// SOAK_TOPOLOGY=replicated runs it on the replicated topology
// (soak_replicated_test.go) instead of the single nodes.
func TestSoak(t *testing.T) {
	seed := uint64(1)
	if v := os.Getenv("SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", v, err)
		}
		seed = n
	}
	d := 2 * time.Minute
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < 20*time.Second {
			t.Fatalf("SOAK_DURATION=%q: want a duration of 20s or more (%v)", v, err)
		}
	}
	topology, err := soakTopology()
	if err != nil {
		t.Fatal(err)
	}
	sched := makeScheduleOn(seed, d, topology)
	fmt.Print(sched)
	// verdict is printed again last, below the programs' logs the helpers
	// print when a test fails (a CI log's tail then names what broke).
	var verdict string
	replay := fmt.Sprintf("make soak SEED=%d DURATION=%v", seed, d)
	if topology == topologyReplicated {
		replay = fmt.Sprintf("make soak TOPOLOGY=%s SEED=%d DURATION=%v", topology, seed, d)
	}
	t.Cleanup(func() {
		if t.Failed() {
			fmt.Print(verdict)
			fmt.Printf("soak: FAILED with seed %d (replay: %s)\n", seed, replay)
		}
	})

	svc := startPrivateServices(t, topology)
	s := newSoak(t, seed, sched, svc)
	s.start()
	s.setupHooks()
	s.setupSales()
	s.begin = time.Now()
	clients := s.startClients(d)
	s.runSchedule()
	clients.wait()
	s.heal()
	rep := s.check()
	fmt.Print(rep)
	verdict = rep.verdict()
	if !rep.ok() {
		t.Errorf("soak: seed %d: promises broken: %s", seed, strings.Join(rep.broken(), "; "))
	}
}

// privateServices is the soak's own Redis, MariaDB and Kafka, started by
// scripts/services in a folder of their own on ports of their own.
type privateServices struct {
	root, dir                string
	redis, mysql, kafka      int
	kafkaProxied, kafkaBound int
	apiPort                  int // the api instances listen on apiPort, apiPort+1
	hookPort                 int // the flaky and faulty webhook endpoints' fronts: hookPort, hookPort+1 (soak_hooks_test.go)
	redisAddr, mysqlDSN      string

	// The replicated topology (replicated): the Redis nodes, the brokers,
	// the two MariaDB nodes' ports and which is the primary now.
	replicated bool
	redisAddrs []string
	brokers    []string
	mysqlPorts []int
	primary    int
}

// startPrivateServices starts the soak's services and points this process
// (and so pipelinetest, redistest, mysqltest, kafkatest and every program
// it starts) at them. They are stopped and their folder removed when the
// test ends (kept when it failed, for its logs).
func startPrivateServices(t *testing.T, topology string) *privateServices {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	base := 16000
	if v := os.Getenv("SOAK_PORT_BASE"); v != "" {
		if base, err = strconv.Atoi(v); err != nil || base < 1024 || base > 60000 {
			t.Fatalf("SOAK_PORT_BASE=%q: want a port from 1024 to 60000", v)
		}
	}
	// A short path: MariaDB's socket lives in it (108 bytes at most).
	dir, err := os.MkdirTemp("", "sk-soak-")
	if err != nil {
		t.Fatal(err)
	}
	ps := &privateServices{root: root, dir: dir, redis: base + 379, mysql: base + 306,
		kafka: base + 92, kafkaProxied: base + 94, kafkaBound: base + 95, apiPort: base + 80, hookPort: base + 86}
	cache := os.Getenv("SECKILL_SERVICES_CACHE")
	if cache == "" {
		cache = filepath.Join(root, ".local", "cache") // the jars `make up` fetched
	}
	names := []string{"redis", "mysql", "kafka"}
	env := map[string]string{
		"SECKILL_SERVICES_DIR":             dir,
		"SECKILL_SERVICES_CACHE":           cache,
		"SECKILL_SERVICES":                 "local",
		"SECKILL_REDIS_PORT":               strconv.Itoa(ps.redis),
		"SECKILL_MYSQL_PORT":               strconv.Itoa(ps.mysql),
		"SECKILL_KAFKA_PORT":               strconv.Itoa(ps.kafka),
		"SECKILL_KAFKA_CONTROLLER_PORT":    strconv.Itoa(base + 93),
		"SECKILL_KAFKA_PROXIED_PORT":       strconv.Itoa(ps.kafkaProxied),
		"SECKILL_KAFKA_PROXIED_BOUND_PORT": strconv.Itoa(ps.kafkaBound),
		"SECKILL_REDIS_CLUSTER_PORTS":      fmt.Sprintf("%d %d %d", base+701, base+702, base+703),
	}
	brokers := ps.kafkaAddr()
	if topology == topologyReplicated {
		ps.replicated, names = true, replicatedServices
		for k, v := range ps.replicatedPorts(base) {
			env[k] = v
		}
		brokers = strings.Join(ps.brokers, ",")
		// The test helpers' single-node client (pipelinetest makes one
		// beside the cluster's) on a node of the run's own.
		ps.redis, _ = strconv.Atoi(strings.TrimPrefix(ps.redisAddrs[0], "127.0.0.1:"))
		t.Setenv("SECKILL_REDIS_CLUSTER_ADDRS", strings.Join(ps.redisAddrs, ","))
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	ps.redisAddr = fmt.Sprintf("127.0.0.1:%d", ps.redis)
	ps.mysqlDSN = fmt.Sprintf("seckill:seckill@tcp(127.0.0.1:%d)/seckill?parseTime=true", ps.mysql)
	t.Setenv("SECKILL_REDIS_ADDR", ps.redisAddr)
	t.Setenv("SECKILL_MYSQL_DSN", ps.mysqlDSN)
	t.Setenv("SECKILL_KAFKA_BROKERS", brokers)
	t.Cleanup(func() {
		// A stalled MariaDB would hold `down` for a minute (and a frozen
		// Redis replica its cluster's).
		stopped := []string{"mysql"}
		for _, p := range ps.mysqlPorts {
			stopped = append(stopped, fmt.Sprintf("mysql-%d", p))
		}
		for _, a := range ps.redisAddrs {
			stopped = append(stopped, nodeName(a))
		}
		for _, name := range stopped {
			if pid, err := ps.pid(name); err == nil {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}
		cmd := exec.Command(filepath.Join(root, "scripts", "services"), append([]string{"down"}, names...)...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("stop the soak's services: %v\n%s", err, b)
		}
		if keepFolder(t) {
			fmt.Printf("soak: the private services' folder (logs, data) is kept: %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	start := time.Now()
	cmd := exec.Command(filepath.Join(root, "scripts", "services"), append([]string{"up"}, names...)...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("start the soak's services: %v\n%s", err, b)
	}
	t.Logf("private services up in %v: %s, redis %s, mysql %d, kafka %s (folder %s)",
		time.Since(start).Round(time.Millisecond), topology, ps.redisAddr, ps.mysql, brokers, dir)
	return ps
}

func (ps *privateServices) kafkaAddr() string { return fmt.Sprintf("127.0.0.1:%d", ps.kafka) }

// pid reads the pid file scripts/services keeps for name.
func (ps *privateServices) pid(name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(ps.dir, "run", name+".pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// program is one api or consumer instance the soak keeps running: when it
// exits (killed by the schedule, or it could not start while a service was
// down), it is started again unless the schedule holds it down.
type program struct {
	name, kind string
	addr       string   // api: the address it listens on, the same after every restart
	env        []string // its links: through its own proxies
	redisPx    *proxytest.Proxy
	mysqlPx    *proxytest.Proxy

	mu        sync.Mutex
	proc      *pipelinetest.Proc
	api       *pipelinetest.API
	procs     []*pipelinetest.Proc // every process it ran, for their logs
	held      bool                 // the schedule holds it down
	expected  bool                 // the soak killed or stopped it: its exit is no finding
	unplanned []string             // exits nobody asked for (crashes), with the log's tail
	offset    time.Duration        // SECKILL_TEST_CLOCK_OFFSET of its next start (api)
	launched  time.Time
	starts    int
}

// API returns the current api process of an api program (its URL never
// changes).
func (pr *program) API() *pipelinetest.API {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.api
}

type soak struct {
	t        *testing.T
	seed     uint64
	sched    soakSchedule
	svc      *privateServices
	p        *pipelinetest.Pipeline
	programs map[string]*program
	apis     []*program
	kafkaPx  *proxytest.Proxy
	log      *soakLog
	sales    []*soakSale
	hooks    []*soakHook // the shop's webhook endpoints (soak_hooks_test.go)
	// eventsTopic is the run's own topic of the shop's events
	// (SECKILL_OUTBOX_TOPIC).
	eventsTopic string

	begin time.Time // the schedule's start
	// faultsRunning counts the service faults on (a program may exit
	// while a service it needs is down: that exit is expected).
	faultsRunning int
	faultsRun     map[string]int
	restoreAt     map[int]string // fault index -> the AOF copy taken at its start
	// killed is, per fault index, the node a replicated fault killed (to
	// start again at its end).
	killed map[int]string
	// reseeded are the old MariaDB primaries that could not follow the
	// new one after a failover and were copied anew (soak_replicated_test.go).
	reseeded []string
	// lanes run the replicated topology's service faults, one goroutine a
	// service (soak_replicated_test.go).
	lanesMu sync.Mutex
	lanes   map[string]chan func()
	lanesWG sync.WaitGroup
	// losses are when Redis lost data (a flush, a restore put back), in
	// order; the room's order is judged between them (soak_room_test.go).
	losses []time.Time
}

func newSoak(t *testing.T, seed uint64, sched soakSchedule, svc *privateServices) *soak {
	opts := pipelinetest.Options{Partitions: 4}
	if svc.replicated {
		opts.RedisClusterAddrs, opts.KafkaBrokers, opts.MySQLDSN = svc.redisAddrs, svc.brokers, svc.mysqlDSN
	}
	p := pipelinetest.New(t, opts)
	s := &soak{t: t, seed: seed, sched: sched, svc: svc, p: p, programs: map[string]*program{},
		log: newSoakLog(), faultsRun: map[string]int{}, restoreAt: map[int]string{}, killed: map[int]string{},
		eventsTopic: kafkatest.NewTopicOn(t, p.Brokers(), 4)}
	t.Cleanup(func() {
		if keepFolder(t) {
			s.saveLogs()
		}
	})
	// The broker's PROXIED listener advertises kafkaProxied: every program
	// reaches the broker through this one proxy. On the replicated
	// topology the programs reach the brokers and the Redis nodes directly
	// (soak_replicated_test.go says why).
	brokers := fmt.Sprintf("127.0.0.1:%d", svc.kafkaProxied)
	if svc.replicated {
		brokers = strings.Join(svc.brokers, ",")
	} else {
		s.kafkaPx = proxytest.StartOn(t, brokers, fmt.Sprintf("127.0.0.1:%d", svc.kafkaBound), proxytest.Kafka)
	}
	cfg, err := mysqldrv.ParseDSN(p.DB.DSN)
	if err != nil {
		t.Fatal(err)
	}
	// warn keeps a long run's logs (held in memory) small; SOAK_LOG_LEVEL=info to debug.
	logLevel := "warn"
	if v := os.Getenv("SOAK_LOG_LEVEL"); v != "" {
		logLevel = v
	}
	common := []string{
		"SECKILL_KAFKA_BROKERS=" + brokers,
		"SECKILL_RATE_LIMIT_USER=0",
		"SECKILL_ADMIN_ADDR=off",
		"SECKILL_LOG_LEVEL=" + logLevel,
		"SECKILL_CLOSER_EVERY=500ms",
		"SECKILL_SWEEP_AFTER=4s",
		"SECKILL_SWEEP_EVERY=1s",
		"SECKILL_HEAL_EVERY=1s",
		// The shop's events: to the run's own topic, and to endpoints on
		// loopback (soak_hooks_test.go), retried within seconds.
		"SECKILL_OUTBOX_TOPIC=" + s.eventsTopic,
		"SECKILL_WEBHOOK_ALLOW_PRIVATE=true",
		"SECKILL_WEBHOOK_RETRY_SCHEDULE=" + soakRetrySchedule,
	}
	for _, name := range append(append([]string{}, soakAPIs...), soakConsumers...) {
		pr := &program{name: name, kind: "consumer"}
		if strings.HasPrefix(name, "api") {
			// A fixed port below the ephemeral range: no proxy or client
			// connection takes it while the instance is down.
			pr.kind, pr.addr = "api", fmt.Sprintf("127.0.0.1:%d", svc.apiPort+len(s.apis))
			s.apis = append(s.apis, pr)
		}
		pr.mysqlPx = proxytest.Start(t, cfg.Addr, proxytest.MySQL)
		mc := *cfg
		mc.Addr = pr.mysqlPx.Addr()
		pr.env = append(append([]string{}, common...), "SECKILL_MYSQL_DSN="+mc.FormatDSN())
		if !svc.replicated {
			pr.redisPx = proxytest.Start(t, svc.redisAddr, proxytest.RESP)
			pr.env = append(pr.env, "SECKILL_REDIS_ADDR="+pr.redisPx.Addr())
		}
		s.programs[name] = pr
	}
	return s
}

// start starts every program and waits until both api instances are ready
// (no fault runs yet).
func (s *soak) start() {
	for _, pr := range s.programs {
		s.launch(pr)
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, pr := range s.apis {
		if !pollUntil(deadline, 100*time.Millisecond, func() bool { s.supervise(); return pr.API().Ready() }) {
			s.t.Fatalf("%s not ready within 90s:\n%s", pr.name, tail(pr.API().Log(), 2048))
		}
	}
}

// launch starts pr again (its proxies and address stay).
func (s *soak) launch(pr *program) {
	env := append([]string{}, pr.env...)
	if pr.offset != 0 {
		// Test-only: the programs read this to offset their clock.
		env = append(env, "SECKILL_TEST_CLOCK_OFFSET="+pr.offset.String())
	}
	pr.launched = time.Now()
	pr.starts++
	if pr.kind == "api" {
		a := s.p.LaunchAPI(pr.addr, env...)
		pr.api, pr.proc = a, a.Proc
	} else {
		pr.proc = s.p.StartConsumer(env...)
	}
	pr.procs = append(pr.procs, pr.proc)
}

// keepFolder says whether the private services' folder stays after the
// run, with every program's log: when it failed, or SOAK_KEEP is set.
func keepFolder(t *testing.T) bool { return t.Failed() || os.Getenv("SOAK_KEEP") != "" }

// saveLogs writes every program's log to the private services' folder
// (see keepFolder): log/programs/<name>-<start>.log.
func (s *soak) saveLogs() {
	dir := filepath.Join(s.svc.dir, "log", "programs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Log(err)
		return
	}
	for _, pr := range s.programs {
		pr.mu.Lock()
		for i, proc := range pr.procs {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%02d.log", pr.name, i+1)), []byte(proc.Log()), 0o644)
		}
		pr.mu.Unlock()
	}
}

// supervise starts again every program that exited and is not held down.
func (s *soak) supervise() {
	for _, pr := range s.programs {
		pr.mu.Lock()
		exited := false
		select {
		case <-pr.proc.Done():
			exited = true
		default:
		}
		if exited && !pr.held && time.Since(pr.launched) > 500*time.Millisecond {
			if !pr.expected && s.faultsRunning == 0 {
				// No service was down: the program exited on its own.
				pr.unplanned = append(pr.unplanned, fmt.Sprintf("%s exited on its own (start %d): %s", pr.name, pr.starts, tail(pr.proc.Log(), 300)))
			}
			pr.expected = false
			s.launch(pr)
		}
		pr.mu.Unlock()
	}
}

// link finds the proxy of a schedule's link target ("api1/redis", "kafka-link").
func (s *soak) link(target string) *proxytest.Proxy {
	if target == "kafka-link" {
		return s.kafkaPx
	}
	name, svc, _ := strings.Cut(target, "/")
	pr := s.programs[name]
	if svc == "redis" {
		return pr.redisPx
	}
	return pr.mysqlPx
}

// scriptMatch matches every Lua script of the project (lua/*.lua) run by
// EVALSHA or EVAL.
func (s *soak) scriptMatch() proxytest.Matcher {
	files, err := filepath.Glob(filepath.Join(s.svc.root, "lua", "*.lua"))
	if err != nil || len(files) == 0 {
		s.t.Fatalf("the project's Lua scripts: %v", err)
	}
	var ms []proxytest.Matcher
	for _, f := range files {
		ms = append(ms, proxytest.RedisScript(lua.Source(strings.TrimSuffix(filepath.Base(f), ".lua"))))
	}
	return func(r proxytest.Request) bool {
		for _, m := range ms {
			if m(r) {
				return true
			}
		}
		return false
	}
}

// action is one step of the schedule: a fault's start or end.
type action struct {
	at    time.Duration
	index int
	end   bool
}

// runSchedule runs the schedule in time order in this goroutine, and keeps
// the programs running between its steps. Every fault it started is ended
// when it returns.
func (s *soak) runSchedule() {
	var acts []action
	for i, f := range s.sched.Faults {
		acts = append(acts, action{at: f.At, index: i})
		if f.For > 0 && f.Kind != faultCut {
			acts = append(acts, action{at: f.At + f.For, index: i, end: true})
		}
	}
	sortActions(acts)
	begin := s.begin
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for _, a := range acts {
		for wait := time.Until(begin.Add(a.at)); wait > 0; wait = time.Until(begin.Add(a.at)) {
			select {
			case <-tick.C:
				s.supervise()
			case <-time.After(wait):
			}
		}
		f := s.sched.Faults[a.index]
		late := time.Since(begin) - a.at
		if isServiceFault(f.Kind) {
			if a.end {
				s.faultsRunning--
			} else {
				s.faultsRunning++
			}
		}
		if a.end {
			s.t.Logf("soak: %v end   %s (late %v)", time.Since(begin).Round(time.Millisecond), f, late.Round(time.Millisecond))
			s.endFault(a.index, f)
		} else {
			s.t.Logf("soak: %v start %s (late %v)", time.Since(begin).Round(time.Millisecond), f, late.Round(time.Millisecond))
			s.startFault(a.index, f)
			s.faultsRun[f.Kind]++
		}
		s.supervise()
	}
	for wait := time.Until(begin.Add(s.sched.Duration)); wait > 0; wait = time.Until(begin.Add(s.sched.Duration)) {
		select {
		case <-tick.C:
			s.supervise()
		case <-time.After(wait):
		}
	}
}

func sortActions(acts []action) {
	// Stable by time; an end before a start at the same instant.
	for i := 1; i < len(acts); i++ {
		for j := i; j > 0 && (acts[j].at < acts[j-1].at || acts[j].at == acts[j-1].at && acts[j].end && !acts[j-1].end); j-- {
			acts[j], acts[j-1] = acts[j-1], acts[j]
		}
	}
}

func (s *soak) startFault(i int, f soakFault) {
	if s.svc.replicated && isServiceFault(f.Kind) {
		s.startReplicated(i, f)
		return
	}
	switch f.Kind {
	case faultLoseRedis:
		s.link(f.Target).LoseReply(s.scriptMatch(), f.N)
	case faultLoseMySQL:
		s.link(f.Target).LoseReply(proxytest.MySQLQuery(f.Match), f.N)
	case faultLoseKafka:
		key := proxytest.KafkaProduce
		if f.Match == "offset-commit" {
			key = proxytest.KafkaOffsetCommit
		}
		s.link(f.Target).LoseReply(proxytest.KafkaRequest(key), f.N)
	case faultLatency:
		s.link(f.Target).Latency(f.Base, f.Jitter)
	case faultCut:
		s.link(f.Target).Cut(f.For)
	case faultKillProg:
		pr := s.programs[f.Target]
		pr.mu.Lock()
		pr.held, pr.expected = true, true
		pr.proc.Kill()
		pr.mu.Unlock()
	case faultKillSvc:
		if f.Target == "redis" {
			s.lost() // up to a second of writes (appendfsync everysec)
		}
		services(s.t, "kill", f.Target)
	case faultRestore:
		// A copy of the AOF as it is now (Redis writing meanwhile, as a
		// backup or a lagging replica would hold it).
		older := filepath.Join(s.svc.dir, fmt.Sprintf("aof-older-%d", i))
		if b, err := exec.Command("cp", "-a", filepath.Join(s.svc.dir, "data", "redis", "appendonlydir"), older).CombinedOutput(); err != nil {
			s.t.Fatalf("copy the AOF: %v\n%s", err, b)
		}
		s.restoreAt[i] = older
	case faultStall:
		s.signal("mysql", syscall.SIGSTOP)
	case faultFlush:
		// Everything Redis holds, gone at once (an operator's mistake, a
		// restart without its data); For is the time the loss is on.
		rc := redis.NewClient(&redis.Options{Addr: s.svc.redisAddr})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := rc.FlushAll(ctx).Err(); err != nil {
			s.t.Logf("soak: FLUSHALL: %v", err)
		}
		s.lost()
		cancel()
		_ = rc.Close()
	case faultSkew:
		pr := s.programs[f.Target]
		pr.mu.Lock()
		pr.offset = f.Offset
		pr.mu.Unlock()
		s.restartClean(pr)
	case faultHookDown, faultHookSlow:
		s.startHookFault(f)
	}
}

func (s *soak) endFault(i int, f soakFault) {
	if s.svc.replicated && isServiceFault(f.Kind) {
		s.endReplicated(i, f)
		return
	}
	switch f.Kind {
	case faultLatency:
		s.link(f.Target).Latency(0, 0)
	case faultKillProg:
		pr := s.programs[f.Target]
		pr.mu.Lock()
		pr.held = false
		pr.mu.Unlock()
	case faultKillSvc:
		services(s.t, "start", f.Target)
	case faultRestore:
		aof := filepath.Join(s.svc.dir, "data", "redis", "appendonlydir")
		s.lost()
		services(s.t, "kill", "redis")
		if err := os.RemoveAll(aof); err != nil {
			s.t.Fatal(err)
		}
		if err := os.Rename(s.restoreAt[i], aof); err != nil {
			s.t.Fatal(err)
		}
		services(s.t, "start", "redis")
	case faultStall:
		s.signal("mysql", syscall.SIGCONT)
	case faultSkew:
		pr := s.programs[f.Target]
		pr.mu.Lock()
		pr.offset = 0
		pr.mu.Unlock()
		s.restartClean(pr)
	case faultHookDown, faultHookSlow:
		s.endHookFault(f)
	}
}

// lost records that Redis has just lost data.
func (s *soak) lost() {
	s.log.mu.Lock()
	s.losses = append(s.losses, time.Now())
	s.log.mu.Unlock()
}

// restartClean stops an api with SIGTERM (a deploy, not a crash) so that
// the supervisor starts it again with its new settings.
func (s *soak) restartClean(pr *program) {
	pr.mu.Lock()
	proc := pr.proc
	pr.expected = true
	pr.mu.Unlock()
	_ = proc.Stop(10 * time.Second)
}

func (s *soak) signal(service string, sig syscall.Signal) {
	pid, err := s.svc.pid(service)
	if err != nil {
		s.t.Fatalf("pid of %s: %v", service, err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		s.t.Fatalf("signal %v to %s (pid %d): %v", sig, service, pid, err)
	}
}

// heal ends what is left of every fault: no latency, every service and
// every program running, no clock offset, both apis ready.
func (s *soak) heal() {
	s.waitLanes()
	for _, pr := range s.programs {
		if pr.redisPx != nil {
			pr.redisPx.Latency(0, 0)
		}
		pr.mysqlPx.Latency(0, 0)
	}
	if s.svc.replicated {
		s.healReplicated()
	} else {
		s.kafkaPx.Latency(0, 0)
		if pid, err := s.svc.pid("mysql"); err == nil {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		for _, name := range soakServices {
			services(s.t, "start", name)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, pr := range s.apis {
		if !pollUntil(deadline, 200*time.Millisecond, func() bool { s.supervise(); return pr.API().Ready() }) {
			s.t.Errorf("%s not ready 2 minutes after the faults ended", pr.name)
		}
	}
}

// pollUntil polls cond every interval until it holds or deadline passes,
// and says whether it held (the soak reports a promise broken instead of
// stopping at the first wait that failed).
func pollUntil(deadline time.Time, every time.Duration, cond func() bool) bool {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}
