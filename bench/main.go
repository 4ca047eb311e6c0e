// Command bench is the flash-sale pipeline's load generator and checker.
// It drives the real HTTP API of running api and consumer programs (it
// builds and starts them itself, with their own Redis prefix, Kafka topic
// and consumer group, unless --api names a running one), creates its own
// item and activity per scenario, fires the load, waits for the pipeline to
// drain, and verifies the invariants with its own reads of MySQL and Redis:
// no oversell, one live order per user, every 202 final, replayed keys
// answered with the original order, MySQL stock equal to Redis stock, and
// exactly the stock sold when demand allows. A broken invariant makes it
// exit 1. It prints a markdown table, and writes a JSON file with every
// figure and PNG charts into a timestamped folder under --out.
//
//	go run ./bench                        # every scenario, defaults (under 5 minutes)
//	go run ./bench --scenario flash --duration 10s
//	go run ./bench --scenario flash --rate 5000
//	go run ./bench --scenario flash --apis 2   # two api processes, the load spread over them
//	go run ./bench --scenario reconcile --orders 1000000   # the reconciler on a sale of a million orders
//	make bench BENCHFLAGS="--scenario compare"
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/seckill/seckill/bench/internal/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first interrupt stops the load; the bench still checks what was
	// done and cleans up. A second one ends it at once (the programs it
	// started get SIGTERM from the kernel when it dies).
	context.AfterFunc(ctx, stop)
	var err error
	if len(os.Args) > 1 && os.Args[1] == "serve-strategy" {
		err = serveStrategy(ctx, os.Args[2:], os.LookupEnv, os.Stderr)
	} else {
		err = run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	}
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

var (
	errUsage      = errors.New("usage")
	errViolations = errors.New("invariants violated")
)

func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) (err error) {
	opts, err := parseFlags(args, lookup, stderr)
	if err != nil {
		if !errors.Is(err, errFlagHelp) {
			fmt.Fprintln(stderr, "bench:", err)
		}
		return errUsage
	}
	m := newMeter(opts.progress, stderr)
	rep := &report.Report{Command: commandLine(), StartedAt: time.Now().UTC(), Host: host(ctx), Runs: []*report.Run{}}
	runID := newRunID()
	topos := opts.topologies
	if len(topos) == 0 {
		topos = []topology{{}} // the flags' addresses
	}
	modes := opts.tracingModes
	if len(modes) == 0 {
		modes = []string{""} // as the programs' environment says
	}
	sink, err := startSink(modes)
	if err != nil {
		return fmt.Errorf("trace sink: %w", err)
	}
	var e *env
sessions:
	for _, t := range topos {
		for _, mode := range modes {
			o := opts
			if t.name != "" {
				o = opts.on(t)
				m.say("topology %s", t.name)
			}
			if mode != "" {
				o = o.withTracing(mode, sinkURL(sink), opts.traceSample)
				m.say("tracing %s", mode)
			}
			e, err = session(ctx, o, m, runID, rep)
			if err != nil {
				break sessions
			}
		}
	}
	if sink != nil {
		sink.Close()
		req, spans, bytes := sink.Stats()
		rep.TraceSink = &report.TraceSink{Requests: req, Spans: spans, Bytes: bytes}
	}
	rep.Tracing = tracingCost(rep.Runs)
	if err != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("The run stopped early (%v): the scenarios after it did not run.", err))
	}
	for _, ev := range rep.Events {
		ev.OffRun, ev.OnRun = ev.Off.Name, ev.On.Name
		if ev.Sustained != nil {
			ev.SustainedRun = ev.Sustained.Name
		}
	}
	rep.Replication = replicationCost(rep.Runs)
	for _, row := range rep.Replication {
		row.PlainRun, row.ReplicatedRun = row.Plain.Name, row.Replicated.Name
	}
	rep.FinishedAt = time.Now().UTC()
	rep.Host.LoadAvgEnd = loadAvg()
	rep.Targets = targets(rep)
	rep.Notes = append(rep.Notes, notes(rep)...)
	if werr := write(e, rep, stdout); werr != nil {
		err = errors.Join(err, werr)
	}
	if err != nil {
		return err
	}
	if n := rep.ViolationCount(); n > 0 {
		return fmt.Errorf("%w: %d, see the table above", errViolations, n)
	}
	return nil
}

// session sets up against opts' services, runs the scenarios into rep and
// stops what it started. The first session's setup is the report's.
func session(ctx context.Context, opts options, m *meter, runID string, rep *report.Report) (e *env, err error) {
	e, err = setup(ctx, opts, m, runID)
	defer func() {
		m.say("stopping what the bench started and removing its data")
		if cerr := e.close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if err != nil {
		return e, fmt.Errorf("setup: %w", err)
	}
	if rep.Setup.API == "" {
		rep.Setup = report.Setup{API: e.apis[0], APIProcesses: len(e.apis), StartedAPI: opts.startsPrograms(), RedisPrefix: e.prefix,
			KafkaTopic: e.topic, Group: e.group, Client: clientName(opts.client)}
		if len(e.apis) > 1 {
			rep.Setup.APIs = e.apis
		}
		if opts.startsPrograms() {
			rep.Setup.Consumers = opts.consumers
		}
	}
	rep.Setup.Services = append(rep.Setup.Services, e.services.Started()...)
	return e, scenarios(ctx, e, rep)
}

// scenarios runs what --scenario asks for, in order, filling rep.
func scenarios(ctx context.Context, e *env, rep *report.Report) error {
	o := e.opts
	if o.has("idle") {
		u, err := e.idle(ctx, o.shapeOf("idle"))
		if err != nil {
			return fmt.Errorf("idle: %w", err)
		}
		if rep.Idle == nil {
			rep.Idle, rep.IdleBase, rep.IdleHistory = u, e.idleBase, o.history
			if e.idleSessions >= 0 {
				v := e.idleSessions
				rep.IdleMySQLSessions = &v
			}
		}
	}
	needRef := o.has("reference") || o.has("flash") || o.has("sustained") || o.has("compare") || o.has("flash-rate") || o.has("events")
	if o.tracing == "on" && rep.Reference != nil {
		// The raw limits run straight from Go, without the programs:
		// tracing changes nothing there.
		needRef = false
	}
	if needRef {
		e.meter.say("reference limits (%s each)", o.refDuration)
		ref, err := e.reference(ctx, o.shapeOf("flash").connections)
		if err != nil {
			return fmt.Errorf("reference: %w", err)
		}
		if rep.Reference == nil {
			rep.Reference = ref // the first topology's, with --topology both
		}
		if o.topology != "" {
			if rep.ReferenceByTopology == nil {
				rep.ReferenceByTopology = map[string]*report.Reference{}
			}
			rep.ReferenceByTopology[o.topology] = ref
		}
	}
	// sustained is this session's sustained run, which the events
	// scenario's runs are shown beside.
	var sustained *report.Run
	for _, name := range o.scenarios {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := e.checkPrograms(); err != nil {
			return err
		}
		sh := o.shapeOf(name)
		var (
			r   *report.Run
			err error
		)
		// keep adds a run to the report, named for the topology and the
		// tracing mode it ran with.
		keep := func(r *report.Run) {
			rep.Runs = append(rep.Runs, r)
			if o.topology != "" {
				r.Name, r.Topology = labelled(r.Name, o.topology), o.topology
			}
			tracingLabel(r, o.tracing, o.traceSample)
		}
		// keepAllButLast keeps the runs of a scenario of several but the
		// last, which it returns (nil for none) to be kept and logged below.
		keepAllButLast := func(runs []*report.Run) *report.Run {
			if len(runs) == 0 {
				return nil
			}
			for _, first := range runs[:len(runs)-1] {
				keep(first)
			}
			return runs[len(runs)-1]
		}
		switch name {
		case "flash", "flash-rate":
			r, err = e.flash(ctx, name, sh, o.buckets)
		case "buckets":
			// One hot item, 1 bucket then vs-buckets, side by side.
			var one *report.Run
			one, err = e.flash(ctx, "buckets-k1", sh, 1)
			if one != nil {
				keep(one)
			}
			if err == nil {
				r, err = e.flash(ctx, fmt.Sprintf("buckets-k%d", o.vsBuckets), sh, o.vsBuckets)
			}
			if one != nil && r != nil {
				e.meter.say("buckets: 1 bucket %.0f/s (P99 %.2f ms), %d buckets %.0f/s (P99 %.2f ms)",
					one.Throughput, one.Latency.P99Ms, o.vsBuckets, r.Throughput, r.Latency.P99Ms)
			}
		case "sizes", "drops":
			var runs []*report.Run
			runs, err = e.sizedPair(ctx, name, o.dropsOf(name), o.sizesOf(name))
			for _, first := range runs[:max(len(runs)-1, 0)] {
				keep(first)
				e.meter.say("%s: %d requests, %.0f/s, P99 %.2f ms, %d orders created, %d invariant(s) broken",
					first.Name, first.Requests, first.Throughput, first.Latency.P99Ms, first.Created, len(first.Violations))
			}
			if len(runs) > 0 {
				r = runs[len(runs)-1]
			}
		case "clickers":
			r, err = e.clickers(ctx, sh)
		case "salepage":
			var note string
			r, note, err = e.salePage(ctx, sh)
			if note != "" {
				e.meter.say("%s", note)
				rep.Notes = append(rep.Notes, note)
			}
		case "queue":
			var runs []*report.Run
			runs, err = e.queueScenario(ctx, sh)
			r = keepAllButLast(runs)
		case "draw":
			var runs []*report.Run
			runs, err = e.drawScenario(ctx, sh)
			r = keepAllButLast(runs)
		case "codes":
			var (
				runs  []*report.Run
				notes []string
			)
			runs, notes, err = e.codesScenario(ctx, sh)
			r = keepAllButLast(runs)
			rep.Notes = append(rep.Notes, notes...)
		case "sustained":
			r, err = e.sustained(ctx, sh)
			sustained = r
		case "events":
			var (
				runs []*report.Run
				ev   *report.Events
			)
			runs, ev, err = e.eventsScenario(ctx, sh)
			r = keepAllButLast(runs)
			if ev != nil && ev.Off != nil && ev.On != nil {
				ev.Sustained = sustained
				rep.Events = append(rep.Events, ev)
			}
		case "first-sale":
			var runs []*report.Run
			runs, err = e.firstSale(ctx, sh)
			r = keepAllButLast(runs)
		case "floor":
			r, err = e.floor(ctx, sh)
		case "reconcile":
			var rc *report.Reconcile
			rc, err = e.reconcile(ctx)
			if rc != nil {
				rep.Reconcile = append(rep.Reconcile, rc)
			}
		case "compare":
			var rows []*report.Row
			rows, r, err = e.compare(ctx, sh)
			rep.Compare = rows
		default:
			continue
		}
		if r != nil {
			keep(r)
			e.meter.say("%s: %d requests, %.0f/s, P99 %.2f ms, %d orders created, %d invariant(s) broken",
				r.Name, r.Requests, r.Throughput, r.Latency.P99Ms, r.Created, len(r.Violations))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// write prints the tables and writes the JSON file.
func write(e *env, rep *report.Report, stdout io.Writer) error {
	report.Markdown(stdout, rep)
	if e.dir == "" {
		return nil
	}
	path := filepath.Join(e.dir, "results.json")
	if err := report.WriteJSON(path, rep); err != nil {
		return err
	}
	md, err := os.Create(filepath.Join(e.dir, "results.md"))
	if err == nil {
		report.Markdown(md, rep)
		md.Close()
	}
	var charts []string
	for _, r := range rep.Runs {
		if r.Chart != "" {
			charts = append(charts, r.Chart)
		}
	}
	if len(rep.Compare) > 0 {
		charts = append(charts, "compare.png")
	}
	fmt.Fprintf(stdout, "\nWritten to %s: results.json, results.md, %s\n", e.dir, strings.Join(charts, ", "))
	return nil
}

// host describes the machine for the report.
func host(ctx context.Context) report.Host {
	h := report.Host{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), OS: runtime.GOOS + "/" + runtime.GOARCH,
		GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		var kb int64
		_, _ = fmt.Fscanf(f, "MemTotal: %d kB", &kb)
		h.MemoryGiB = int((kb + 1<<19) >> 20)
		f.Close()
	}
	h.LoadAvgStart = loadAvg()
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		h.Commit = strings.TrimSpace(string(out))
	}
	return h
}

func clientName(c string) string {
	if c == "nethttp" {
		return "Go net/http Transport, keep-alive, one connection per worker"
	}
	return "the bench's raw HTTP/1.1 keep-alive client, one connection per worker"
}

// loadAvg is the 1-minute load average (0 if unknown).
func loadAvg() float64 {
	var v float64
	if f, err := os.Open("/proc/loadavg"); err == nil {
		_, _ = fmt.Fscan(f, &v)
		f.Close()
	}
	return v
}
