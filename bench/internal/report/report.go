// Package report holds the bench's results and writes them three ways: a
// markdown table for the terminal, a JSON file with every figure, and PNG
// charts (throughput and latency over time, consumer lag) drawn with
// gonum/plot.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/bench/internal/cpu"
	"github.com/seckill/seckill/bench/internal/stats"
	"github.com/seckill/seckill/bench/internal/verify"
)

// Report is everything one bench invocation measured.
type Report struct {
	Command    string     `json:"command"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt time.Time  `json:"finished_at"`
	Host       Host       `json:"host"`
	Setup      Setup      `json:"setup"`
	Reference  *Reference `json:"reference,omitempty"`
	// ReferenceByTopology holds each topology's raw limits (bench
	// --topology); Reference is then the first one's.
	ReferenceByTopology map[string]*Reference `json:"reference_by_topology,omitempty"`
	Runs                []*Run                `json:"runs"`
	Compare             []*Row                `json:"compare,omitempty"`
	// Replication pairs each scenario's runs on the plain and the
	// replicated topology (bench --topology both).
	Replication []*TopologyRow `json:"replication,omitempty"`
	// Tracing pairs each scenario's runs with tracing off and on (bench
	// --tracing both); TraceSink is what the sink took while it was on.
	Tracing   []*TracingRow `json:"tracing,omitempty"`
	TraceSink *TraceSink    `json:"trace_sink,omitempty"`
	// Events is the events scenario's comparison, one per session it ran
	// in (bench --scenario events).
	Events []*Events `json:"events,omitempty"`
	// Idle is the CPU the started programs and services used while no
	// load ran (bench --scenario idle).
	Idle *cpu.Usage `json:"idle_cpu,omitempty"`
	// IdleBase is the services' CPU on their own, measured as long as
	// Idle just before the programs started: Idle minus IdleBase is what
	// the idle pipeline costs.
	IdleBase *cpu.Usage `json:"idle_services_alone_cpu,omitempty"`
	// Reconcile is the reconcile scenario's runs (bench --scenario
	// reconcile), one per topology.
	Reconcile []*Reconcile `json:"reconcile,omitempty"`
	// IdleHistory is how many historical orders the database held while
	// Idle was measured (bench --history; 0: whatever the database held).
	IdleHistory int `json:"idle_history_orders,omitempty"`
	// IdleMySQLSessions is the CPU, in % of one CPU, of the MySQL server's
	// threads serving the programs' connections during Idle (MariaDB's
	// PROCESSLIST.TID): their share of the mysql column, which also holds
	// what the server did for anyone else on it. nil: not measured.
	IdleMySQLSessions *float64 `json:"idle_mysql_sessions_pct,omitempty"`
	Targets           []Target `json:"targets"`
	Notes             []string `json:"notes,omitempty"`
}

// Host describes the machine.
type Host struct {
	CPUModel   string `json:"cpu_model"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	MemoryGiB  int    `json:"memory_gib"`
	OS         string `json:"os"`
	GoVersion  string `json:"go_version"`
	Commit     string `json:"commit,omitempty"`
	// LoadAvg is the 1-minute load average before and after the run:
	// anything well above what the bench itself causes means other work
	// shared the machine.
	LoadAvgStart float64 `json:"loadavg_1m_start"`
	LoadAvgEnd   float64 `json:"loadavg_1m_end"`
}

// Setup says what the bench ran against.
type Setup struct {
	API string `json:"api"`
	// APIs lists every API's base URL when the load was spread over more
	// than one (API is the first); APIProcesses counts them.
	APIs         []string `json:"apis,omitempty"`
	APIProcesses int      `json:"api_processes"`
	StartedAPI   bool     `json:"started_api_and_consumer"`
	Consumers    int      `json:"consumers,omitempty"`
	RedisPrefix  string   `json:"redis_prefix"`
	KafkaTopic   string   `json:"kafka_topic,omitempty"`
	Group        string   `json:"consumer_group,omitempty"`
	Services     []string `json:"services_started,omitempty"`
	Client       string   `json:"client"`
}

// Reference holds the raw limits measured in the same run.
type Reference struct {
	ReserveConcurrency int           `json:"reserve_concurrency"`
	ReserveOps         int64         `json:"reserve_ops"`
	ReservePerSecond   float64       `json:"reserve_per_s"`
	ReserveLatency     stats.Summary `json:"reserve_latency"`
	MySQLConcurrency   int           `json:"mysql_concurrency"`
	MySQLTxs           int64         `json:"mysql_txs"`
	MySQLPerSecond     float64       `json:"mysql_tx_per_s"`
	MySQLLatency       stats.Summary `json:"mysql_latency"`
	MySQLErrors        int64         `json:"mysql_errors"`
	// Publishes of one order event each, acks=all, straight from Go to a
	// scratch topic with the run's replication (measured only with
	// bench --topology, where the replication differs).
	PublishConcurrency int           `json:"publish_concurrency,omitempty"`
	PublishOps         int64         `json:"publish_ops,omitempty"`
	PublishPerSecond   float64       `json:"publish_per_s,omitempty"`
	PublishLatency     stats.Summary `json:"publish_latency"`
	ReserveCPU         *cpu.Usage    `json:"reserve_cpu,omitempty"`
	MySQLCPU           *cpu.Usage    `json:"mysql_cpu,omitempty"`
}

// Run is one scenario run against the API.
type Run struct {
	Name string `json:"name"`
	// Topology is the named services it ran on (bench --topology), if any.
	Topology string `json:"topology,omitempty"`
	// Tracing is the programs' tracing (bench --tracing): off, or on with
	// its sampling ratio.
	Tracing     string           `json:"tracing,omitempty"`
	Model       string           `json:"model"` // closed or open
	Connections int              `json:"connections"`
	Rate        float64          `json:"rate_per_s,omitempty"`
	Duration    float64          `json:"duration_s"`
	Stock       int64            `json:"stock"`
	Quantity    int              `json:"quantity"`
	Buyers      int64            `json:"buyers"`
	ItemID      int64            `json:"item_id"`
	ActivityID  int64            `json:"activity_id"`
	Requests    int64            `json:"requests"`
	Dropped     int64            `json:"dropped,omitempty"`
	Elapsed     float64          `json:"elapsed_s"`
	Throughput  float64          `json:"requests_per_s"`
	Outcomes    map[string]int64 `json:"outcomes"`
	Latency     stats.Summary    `json:"latency"`
	// AcceptedLatency is the latency of the 202 answers alone.
	AcceptedLatency stats.Summary `json:"accepted_latency"`
	// SoldOutLatency is the latency of the sold-out answers alone
	// (first-sale and second-sale).
	SoldOutLatency stats.Summary      `json:"sold_out_latency,omitzero"`
	Series         []stats.Point      `json:"series"`
	Accepted       int64              `json:"accepted_orders"`
	Created        int64              `json:"orders_created"`
	Failed         int64              `json:"orders_failed"`
	UnitsSold      int64              `json:"units_sold"`
	DBStock        int64              `json:"final_mysql_stock"`
	RedisStock     int64              `json:"final_redis_stock"`
	ExtraLive      int64              `json:"extra_live_orders"`
	ReplayedKeys   int64              `json:"replayed_keys,omitempty"`
	DrainSeconds   float64            `json:"drain_s"`
	Pipeline       *Pipeline          `json:"pipeline,omitempty"`
	Violations     []verify.Violation `json:"violations"`
	Chart          string             `json:"chart,omitempty"`
	Profiles       []string           `json:"profiles,omitempty"`
	// Floor marks the floor scenario's run: a stand-in server with no
	// stock, so it has no invariants to check.
	Floor bool `json:"floor,omitempty"`
	// APIView is the api's own view of the run's order requests, from its
	// request-duration histogram (first-sale runs).
	APIView *APIView `json:"api_view,omitempty"`
	// APIRequests is the requests sent to each API (in Setup.APIs order)
	// when the load was spread over more than one.
	APIRequests []int64 `json:"requests_per_api,omitempty"`
	// CPU is where the machine's CPU went while the load ran.
	CPU *cpu.Usage `json:"cpu,omitempty"`
	// Queue is the queue scenario's figures (its poll run).
	Queue *Queue `json:"queue,omitempty"`
	// Draw is the draw scenario's figures (its draw run).
	Draw *Draw `json:"draw,omitempty"`
}

// Queue is a sale with a waiting room under a crowd: the joins before the
// start, the polls after, and what the room let through.
type Queue struct {
	Buyers         int64 `json:"buyers"`
	AdmitPerSecond int   `json:"admit_per_second"`
	// JoinsPerSecond is the join phase's answers over its length; Late
	// counts joins answered with a position (after the start: in arrival
	// order, not drawn), JoinErrors joins not answered WAITING.
	JoinSeconds    float64 `json:"join_s"`
	JoinsPerSecond float64 `json:"joins_per_s"`
	Late           int64   `json:"joined_after_start"`
	JoinErrors     int64   `json:"join_errors"`
	// StartMargin is from the joins' end to starts_at (negative: the
	// sale started during the joins).
	StartMargin float64 `json:"start_margin_s"`
	// Polls over PollSeconds, the poll phase from the joins' end; every
	// poll not answered 200 is a PollError.
	PollSeconds    float64 `json:"poll_s"`
	Polls          int64   `json:"polls"`
	PollsPerSecond float64 `json:"polls_per_s"`
	PollErrors     int64   `json:"poll_errors"`
	// The polls sent before the start (every one answered from the api's
	// memory) and their rate, and the rate of those from the start.
	PollsBeforeStart          int64         `json:"polls_before_start"`
	PollsPerSecondBeforeStart float64       `json:"polls_per_s_before_start"`
	PollsPerSecondFromStart   float64       `json:"polls_per_s_from_start"`
	PollLatency               stats.Summary `json:"poll_latency"`
	// Admitted is the buyers a poll told ADMITTED; Ordered those answered
	// 202 with their admission.
	Admitted int64 `json:"admitted"`
	Ordered  int64 `json:"ordered"`
	// SoldOutAfter is from starts_at to the first sample of Redis stock 0;
	// AllToldAfter to the poll that told the last waiter SOLD_OUT (-1:
	// not within the poll phase; ToldSoldOut of Waiters were).
	SoldOutAfter float64 `json:"sold_out_after_start_s"`
	AllToldAfter float64 `json:"all_told_sold_out_after_start_s"`
	ToldSoldOut  int64   `json:"told_sold_out"`
	Waiters      int64   `json:"waiters"`
	// The room's units held by unused admissions against the units left,
	// sampled from Redis every SampleMs: the most held - left (never
	// above 0 if the room keeps its promise) and the most held.
	Samples         int   `json:"samples"`
	SampleMs        int   `json:"sample_ms"`
	MaxHeldOverLeft int64 `json:"max_held_minus_left"`
	MaxHeld         int64 `json:"max_held"`
	// The scripts Redis ran (EVALSHA and EVAL, INFO commandstats): per
	// join, and over the poll phase before the start and from it.
	ScriptsPerJoin     float64 `json:"redis_scripts_per_join"`
	ScriptsBeforeStart int64   `json:"redis_scripts_polls_before_start"`
	ScriptsFromStart   int64   `json:"redis_scripts_from_start"`
	// Probes are the orders sent without the buyer's admission, by kind.
	Probes []Probe `json:"probes"`
}

// Probe counts one kind of order sent without a valid admission of the
// buyer's, and how the api answered them.
type Probe struct {
	Kind    string           `json:"kind"`
	Want    string           `json:"want"`
	Sent    int64            `json:"sent"`
	Got     map[string]int64 `json:"got"` // "403 NOT_ADMITTED": n
	Correct int64            `json:"answered_as_wanted"`
}

// TopologyRow is one scenario run on the plain topology (one Kafka broker,
// a Redis Cluster without replicas, MySQL alone) and on the replicated one.
type TopologyRow struct {
	Scenario   string `json:"scenario"`
	Plain      *Run   `json:"-"`
	Replicated *Run   `json:"-"`
	// The runs' names, for the JSON (the runs themselves are in Runs).
	PlainRun      string `json:"plain_run"`
	ReplicatedRun string `json:"replicated_run"`
}

// TracingRow is one scenario run with the programs' tracing off and on.
type TracingRow struct {
	Scenario string `json:"scenario"`
	Off      *Run   `json:"-"`
	On       *Run   `json:"-"`
	OffRun   string `json:"off_run"`
	OnRun    string `json:"on_run"`
}

// TraceSink is what the bench's OTLP sink received.
type TraceSink struct {
	Requests int64 `json:"export_requests"`
	Spans    int64 `json:"spans"`
	Bytes    int64 `json:"protobuf_bytes"`
}

// Pipeline holds the end-to-end figures of the sustained scenario.
type Pipeline struct {
	// OrdersPerSecond is orders created over the time from the first
	// request to the last order landing in MySQL.
	OrdersPerSecond float64 `json:"orders_per_s_end_to_end"`
	// DuringLoad is orders created while the load ran, per second.
	DuringLoad float64 `json:"orders_per_s_during_load"`
	// PendingToCreated is created_at - reserved_at over every order.
	PendingToCreated stats.Summary `json:"pending_to_created"`
	// PendingToCreatedSeries buckets it by reservation time.
	PendingToCreatedSeries []stats.Point `json:"pending_to_created_series"`
	MaxInflight            int64         `json:"max_in_flight"`
	Lag                    []LagPoint    `json:"lag"`
}

// LagPoint is one sample of the pipeline's state.
type LagPoint struct {
	T float64 `json:"t_s"`
	// Inflight is units reserved in Redis and not yet in MySQL (PENDING).
	Inflight int64 `json:"in_flight"`
	// Created is units in MySQL so far; Rate is its increase per second.
	Created int64   `json:"created"`
	Rate    float64 `json:"created_per_s"`
}

// Row is one strategy of the compare scenario.
type Row struct {
	Strategy   string           `json:"strategy"`
	Requests   int64            `json:"requests"`
	Throughput float64          `json:"requests_per_s"`
	Outcomes   map[string]int64 `json:"outcomes"`
	Orders     int64            `json:"orders"`
	Units      int64            `json:"units"`
	Stock      int64            `json:"stock"`
	FinalStock int64            `json:"final_stock"`
	Duplicates int64            `json:"duplicate_orders"`
	Oversold   int64            `json:"oversold_units"`
	// Failed counts requests answered 5xx or not at all (for the lock:
	// the lock could not be had within its wait limit).
	Failed  int64         `json:"failed_requests"`
	Latency stats.Summary `json:"latency"`
	Correct bool          `json:"correct"`
	Series  []stats.Point `json:"series"`
	CPU     *cpu.Usage    `json:"cpu,omitempty"`
}

// Target is one printed goal; it is not a test.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Pass bool   `json:"pass"`
}

// ViolationCount counts the broken invariants over every run.
func (r *Report) ViolationCount() int {
	n := 0
	for _, run := range r.Runs {
		n += len(run.Violations)
	}
	return n
}

// WriteJSON writes r, indented, to path.
func WriteJSON(path string, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Markdown writes the tables.
func Markdown(w io.Writer, r *Report) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## Bench results\n\n")
	p("Host: %s, %d CPUs, %d GiB; %s; %s; load average %.1f before, %.1f after. Client: %s.\n", r.Host.CPUModel, r.Host.CPUs,
		r.Host.MemoryGiB, r.Host.OS, r.Host.GoVersion, r.Host.LoadAvgStart, r.Host.LoadAvgEnd, r.Setup.Client)
	p("Command: `%s`\n\n", r.Command)
	if r.Setup.APIProcesses > 1 {
		p("API processes: %d (%s); each load's connections are spread over them round-robin, each connection staying with one; the CPU table's api column is their sum.\n\n",
			r.Setup.APIProcesses, strings.Join(r.Setup.APIs, ", "))
	}

	if len(r.Runs) > 0 {
		p("### Scenarios (real API, Redis, Kafka, consumer, MySQL)\n\n")
		p("| scenario | load | requests | req/s | 202 | sold out | already | 429 | errors | P50 ms | P99 ms | P99.9 ms | max ms | orders created | MySQL / Redis stock | drain s | invariants |\n")
		p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n")
		for _, run := range r.Runs {
			errs := run.Outcomes["unavailable"] + run.Outcomes["server_error"] + run.Outcomes["transport_error"] + run.Outcomes["client_error"]
			inv := "all hold"
			if run.Floor {
				inv = "none (no stock)"
			}
			if len(run.Violations) > 0 {
				names := make([]string, len(run.Violations))
				for i, v := range run.Violations {
					names[i] = fmt.Sprintf("**%s (%+d)**", v.Invariant, v.By)
				}
				inv = strings.Join(names, ", ")
			}
			p("| %s | %s | %d | %s | %d | %d | %d | %d | %d | %s | %s | %s | %s | %d / %d | %d / %d | %.2f | %s |\n",
				run.Name, loadShape(run), run.Requests, num(run.Throughput), run.Outcomes["accepted"], run.Outcomes["sold_out"],
				run.Outcomes["already_purchased"], run.Outcomes["rate_limited"], errs, ms(run.Latency.P50Ms), ms(run.Latency.P99Ms), ms(run.Latency.P999Ms),
				ms(run.Latency.MaxMs), run.Created, run.Stock, run.DBStock, run.RedisStock, run.DrainSeconds, inv)
		}
		p("\n")
		perAPI(p, r)
	}
	for _, run := range r.Runs {
		if run.Pipeline == nil {
			continue
		}
		pl := run.Pipeline
		p("### %s: end to end\n\n", run.Name)
		// A run that did not sample the pipeline (the sized loads) has no
		// in-flight figure.
		inflight := "–"
		if len(pl.Lag) > 0 {
			inflight = strconv.FormatInt(pl.MaxInflight, 10)
		}
		p("| orders/s end to end | orders/s during load | PENDING→CREATED P50 ms | P99 ms | max ms | max in flight | drain after load s |\n")
		p("|---:|---:|---:|---:|---:|---:|---:|\n")
		p("| %s | %s | %s | %s | %s | %s | %.2f |\n\n", num(pl.OrdersPerSecond), num(pl.DuringLoad),
			ms(pl.PendingToCreated.P50Ms), ms(pl.PendingToCreated.P99Ms), ms(pl.PendingToCreated.MaxMs), inflight, run.DrainSeconds)
	}
	if len(r.Compare) > 0 {
		p("### Strategies compared (same load, live)\n\n")
		p("| strategy | requests | req/s | orders | final stock | duplicate orders | oversold units | failed requests | P50 ms | P99 ms | correct |\n")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, row := range r.Compare {
			p("| %s | %d | %s | %d | %d | %d | %d | %d | %s | %s | %s |\n", row.Strategy, row.Requests, num(row.Throughput),
				row.Orders, row.FinalStock, row.Duplicates, row.Oversold, row.Failed, ms(row.Latency.P50Ms), ms(row.Latency.P99Ms), yesNo(row.Correct))
		}
		p("\n")
	}
	queueTables(p, r)
	drawTables(p, r)
	reconcileTables(p, r)
	replicationTable(p, r)
	tracingTable(p, r)
	eventsTables(p, r)
	cpuTable(p, r)
	if ref := r.Reference; ref != nil {
		p("### Reference limits (same run)\n\n")
		if len(r.ReferenceByTopology) > 1 {
			p("On the first topology; the cost-of-replication table compares them.\n\n")
		}
		p("| limit | concurrency | ops | ops/s | P50 ms | P99 ms |\n|---|---:|---:|---:|---:|---:|\n")
		p("| reserve script straight from Go (stockredis.Store.Reserve) | %d | %d | %s | %s | %s |\n",
			ref.ReserveConcurrency, ref.ReserveOps, num(ref.ReservePerSecond), ms(ref.ReserveLatency.P50Ms), ms(ref.ReserveLatency.P99Ms))
		p("| MySQL per-order transaction (insert + hot-row conditional update) | %d | %d | %s | %s | %s |\n\n",
			ref.MySQLConcurrency, ref.MySQLTxs, num(ref.MySQLPerSecond), ms(ref.MySQLLatency.P50Ms), ms(ref.MySQLLatency.P99Ms))
	}
	if len(r.Targets) > 0 {
		p("### Targets (goals, not tests)\n\n| target | want | got | |\n|---|---|---|---|\n")
		for _, t := range r.Targets {
			mark := "MISS"
			if t.Pass {
				mark = "PASS"
			}
			p("| %s | %s | %s | %s |\n", t.Name, t.Want, t.Got, mark)
		}
		p("\n")
	}
	if len(r.Notes) > 0 {
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
		p("\n")
	}
	n := r.ViolationCount()
	if len(r.Runs) == 0 {
		return
	}
	if n == 0 {
		p("Invariants: all hold in every run.\n")
		return
	}
	p("Invariants: **%d violated**:\n\n", n)
	for _, run := range r.Runs {
		for _, v := range run.Violations {
			p("- %s: %s\n", run.Name, v)
		}
	}
}

// perAPI lists each run's requests per API, when there were several.
func perAPI(p func(string, ...any), r *Report) {
	var parts []string
	for _, run := range r.Runs {
		if len(run.APIRequests) < 2 {
			continue
		}
		n := make([]string, len(run.APIRequests))
		for i, v := range run.APIRequests {
			n[i] = fmt.Sprint(v)
		}
		parts = append(parts, run.Name+" "+strings.Join(n, " / "))
	}
	if len(parts) > 0 {
		p("Requests per API: %s.\n\n", strings.Join(parts, "; "))
	}
}

// cpuTable shows where the CPU went during each load, in % of one CPU.
func cpuTable(p func(string, ...any), r *Report) {
	type row struct {
		name string
		u    *cpu.Usage
	}
	var rows []row
	if ref := r.Reference; ref != nil {
		rows = append(rows, row{"reference: reserve", ref.ReserveCPU}, row{"reference: MySQL", ref.MySQLCPU})
	}
	if r.IdleBase != nil {
		rows = append(rows, row{"idle: services alone, before the programs start", r.IdleBase})
	}
	if r.Idle != nil {
		rows = append(rows, row{"idle (no load" + IdleOn(r.IdleHistory) + ")", r.Idle})
	}
	for _, run := range r.Runs {
		rows = append(rows, row{run.Name, run.CPU})
	}
	for _, c := range r.Compare {
		rows = append(rows, row{"compare: " + c.Strategy, c.CPU})
	}
	cols := cpuColumns
	seen := false
	for _, x := range rows {
		seen = seen || x.u != nil
	}
	if !seen {
		return
	}
	p("### CPU during each load (%% of one CPU; the machine has %d)\n\n", r.Host.CPUs)
	p("| load | machine busy | %s | anything else |\n|---|---:|%s---:|\n", strings.Join(cols, " | "), strings.Repeat("---:|", len(cols)))
	for _, x := range rows {
		if x.u == nil {
			continue
		}
		p("| %s | %.0f | ", x.name, x.u.Machine)
		for _, c := range cols {
			p("%.0f | ", Column(x.u, c))
		}
		p("%.0f |\n", x.u.Other)
	}
	p("\n")
	perOrderTable(p, r)
}

// cpuColumns are the CPU table's processes; the pipeline is all but the
// bench.
var cpuColumns = []string{"bench", "api", "consumer", "redis", "mysql", "kafka"}

// Column is process c's CPU in u, in % of one CPU, with api2, api3, ...
// (and consumer2, ...) counted in the api (consumer) column.
func Column(u *cpu.Usage, c string) float64 {
	v := u.Procs[c]
	if c == "consumer" || c == "api" {
		for name, pv := range u.Procs {
			if strings.HasPrefix(name, c) && name != c {
				v += pv
			}
		}
	}
	return v
}

// PipelineCPU is the CPU of every watched process but the bench, in % of one
// CPU: what the programs and services cost.
func PipelineCPU(u *cpu.Usage) float64 {
	var sum float64
	for _, c := range cpuColumns[1:] {
		sum += Column(u, c)
	}
	return sum
}

// PerUnit is the CPU time, in µs, that pct (% of one CPU over u's window)
// spent on each of n units of work.
func PerUnit(u *cpu.Usage, pct float64, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return pct / 100 * u.Seconds * 1e6 / float64(n)
}

// PerOrderUnit says what a run's CPU is divided by: created orders for a
// run whose every answer is an order (sustained), the winners' orders for
// a draw's (its CPU is from the close to the last of them), answers
// otherwise.
func PerOrderUnit(run *Run) (string, int64) {
	if run.Pipeline != nil {
		return "created order", run.Outcomes["accepted"]
	}
	if run.Draw != nil {
		return "winner's order", run.Created
	}
	return "answer", run.Requests
}

// perOrderTable divides each run's CPU by its work: µs of CPU per answer
// (per created order for sustained), per process, so a reader sees where
// each microsecond goes.
func perOrderTable(p func(string, ...any), r *Report) {
	var rows []*Run
	for _, run := range r.Runs {
		if run.CPU != nil && run.Requests > 0 && run.CPU.Seconds > 0 {
			rows = append(rows, run)
		}
	}
	if len(rows) == 0 {
		return
	}
	p("### CPU per unit of work (µs of CPU, same windows as above)\n\n")
	p("| load | per | pipeline (all but bench) | %s |\n|---|---|---:|%s\n", strings.Join(cpuColumns[1:], " | "), strings.Repeat("---:|", len(cpuColumns)-1))
	for _, run := range rows {
		unit, n := PerOrderUnit(run)
		p("| %s | %s | %.0f | ", run.Name, unit, PerUnit(run.CPU, PipelineCPU(run.CPU), n))
		for _, c := range cpuColumns[1:] {
			p("%.0f | ", PerUnit(run.CPU, Column(run.CPU, c), n))
		}
		p("\n")
	}
	p("\n")
}

func loadShape(r *Run) string {
	s := fmt.Sprintf("%d conns", r.Connections)
	if r.Rate > 0 {
		s = fmt.Sprintf("%s @ %s/s", s, num(r.Rate))
	}
	if r.Duration > 0 {
		s += fmt.Sprintf(", %gs", r.Duration)
	}
	return s + fmt.Sprintf(", stock %d", r.Stock)
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func ms(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

// replicationTable shows what replication costs, scenario by scenario.
func replicationTable(p func(string, ...any), r *Report) {
	if len(r.Replication) == 0 {
		return
	}
	p("### Cost of replication (same run, same load)\n\n")
	p("Plain: one Kafka broker (replication factor 1), the 3-master Redis Cluster without replicas, MySQL alone. ")
	p("Replicated: three brokers (replication factor 3, min.insync.replicas 2, acks all), the Redis Cluster with a replica per master, the MariaDB primary with a semi-synchronous standby.\n\n")
	p("| scenario | figure | plain | replicated | change |\n|---|---|---:|---:|---:|\n")
	row := func(scen, figure string, a, b float64, format func(float64) string) {
		change := "n/a"
		if a != 0 {
			change = fmt.Sprintf("%+.0f %%", (b-a)/a*100)
		}
		p("| %s | %s | %s | %s | %s |\n", scen, figure, format(a), format(b), change)
	}
	if a, b := r.ReferenceByTopology["cluster"], r.ReferenceByTopology["replicated"]; a != nil && b != nil {
		row("reference", "reserve script ops/s", a.ReservePerSecond, b.ReservePerSecond, num)
		row("reference", "MySQL per-order tx/s", a.MySQLPerSecond, b.MySQLPerSecond, num)
		if a.PublishOps > 0 && b.PublishOps > 0 {
			row("reference", "Kafka publishes/s (acks=all)", a.PublishPerSecond, b.PublishPerSecond, num)
			row("reference", "Kafka publish P99 ms", a.PublishLatency.P99Ms, b.PublishLatency.P99Ms, ms)
		}
	}
	for _, t := range r.Replication {
		a, b := t.Plain, t.Replicated
		row(t.Scenario, "req/s", a.Throughput, b.Throughput, num)
		row(t.Scenario, "P50 ms", a.Latency.P50Ms, b.Latency.P50Ms, ms)
		row(t.Scenario, "P99 ms", a.Latency.P99Ms, b.Latency.P99Ms, ms)
		row(t.Scenario, "202 P99 ms", a.AcceptedLatency.P99Ms, b.AcceptedLatency.P99Ms, ms)
		row(t.Scenario, "drain s", a.DrainSeconds, b.DrainSeconds, func(v float64) string { return fmt.Sprintf("%.2f", v) })
		if a.Pipeline != nil && b.Pipeline != nil {
			row(t.Scenario, "orders/s end to end", a.Pipeline.OrdersPerSecond, b.Pipeline.OrdersPerSecond, num)
			row(t.Scenario, "PENDING→CREATED P99 ms", a.Pipeline.PendingToCreated.P99Ms, b.Pipeline.PendingToCreated.P99Ms, ms)
		}
	}
	p("\n")
}

// tracingTable shows what tracing costs, scenario by scenario.
func tracingTable(p func(string, ...any), r *Report) {
	if len(r.Tracing) == 0 {
		return
	}
	p("### Cost of tracing (same run, same load)\n\n")
	p("Off: OTEL_SDK_DISABLED=true, a no-op tracer. On: tracing %s, OTLP/HTTP to a sink in the bench that decodes every export.", r.Tracing[0].On.Tracing)
	if s := r.TraceSink; s != nil {
		p(" The sink took %d spans in %d exports (%.1f MiB of protobuf).", s.Spans, s.Requests, float64(s.Bytes)/(1<<20))
	}
	p("\n\n| scenario | figure | tracing off | tracing on | change |\n|---|---|---:|---:|---:|\n")
	row := func(scen, figure string, a, b float64, format func(float64) string) {
		change := "n/a"
		if a != 0 {
			change = fmt.Sprintf("%+.1f %%", (b-a)/a*100)
		}
		p("| %s | %s | %s | %s | %s |\n", scen, figure, format(a), format(b), change)
	}
	for _, t := range r.Tracing {
		a, b := t.Off, t.On
		row(t.Scenario, "req/s", a.Throughput, b.Throughput, num)
		row(t.Scenario, "P50 ms", a.Latency.P50Ms, b.Latency.P50Ms, ms)
		row(t.Scenario, "P99 ms", a.Latency.P99Ms, b.Latency.P99Ms, ms)
		row(t.Scenario, "202 P99 ms", a.AcceptedLatency.P99Ms, b.AcceptedLatency.P99Ms, ms)
		if a.Pipeline != nil && b.Pipeline != nil {
			row(t.Scenario, "orders/s end to end", a.Pipeline.OrdersPerSecond, b.Pipeline.OrdersPerSecond, num)
			row(t.Scenario, "PENDING→CREATED P99 ms", a.Pipeline.PendingToCreated.P99Ms, b.Pipeline.PendingToCreated.P99Ms, ms)
		}
	}
	p("\n")
}

// APIView is what the api measured of a run's order requests: its own
// histogram, scraped before and after, without the load tool's share.
type APIView struct {
	Accepted APILatency `json:"accepted"` // 202
	SoldOut  APILatency `json:"sold_out"` // 409 (every refusal of the run is sold out)
	// Reserve and Publish are the two round trips an accepted order waits
	// for: the reserve script (every run of it) and Kafka's acknowledgement.
	Reserve APILatency `json:"reserve"`
	Publish APILatency `json:"publish"`
}

// APILatency summarizes one status code's requests in the api's histogram:
// a P99 interpolated within its bucket, and the exact shares within the
// bucket bounds of 5 and 25 ms.
type APILatency struct {
	Count    int64   `json:"count"`
	P99Ms    float64 `json:"p99_ms"`
	Within5  float64 `json:"within_5ms"`
	Within25 float64 `json:"within_25ms"`
}

// IdleOn says what the database held during the idle measurement, for its
// label: "" or ", on a database holding 1,000,000 historical orders".
func IdleOn(history int) string {
	if history <= 0 {
		return ""
	}
	return ", on a database holding " + thousands(history) + " historical orders"
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
