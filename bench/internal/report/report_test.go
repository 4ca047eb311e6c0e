package report

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill/seckill/bench/internal/cpu"
	"github.com/seckill/seckill/bench/internal/stats"
	"github.com/seckill/seckill/bench/internal/verify"
)

func sample() *Report {
	series := []stats.Point{{T: 1, Rate: 100, P50Ms: 1, P99Ms: 5}, {T: 2, Rate: 120, P50Ms: 2, P99Ms: 6}}
	return &Report{
		Command: "go run ./bench",
		Runs: []*Run{
			{Name: "flash", Connections: 500, Duration: 30, Stock: 200, Requests: 1000, Throughput: 500,
				Outcomes: map[string]int64{"accepted": 200, "sold_out": 800}, Series: series, Created: 200, Violations: []verify.Violation{}},
			{Name: "sustained", Connections: 200, Duration: 30, Stock: 1000, Series: series, Created: 190,
				Pipeline: &Pipeline{OrdersPerSecond: 90, Lag: []LagPoint{{T: 0.5, Inflight: 3}, {T: 1, Inflight: 0, Created: 190, Rate: 380}},
					PendingToCreatedSeries: series},
				Violations: []verify.Violation{{Invariant: verify.SoldExactlyStock, By: 10, Detail: "x"}}},
		},
		Compare: []*Row{{Strategy: "naive", Oversold: 3, Series: series}, {Strategy: "lua", Correct: true, Series: series}},
		Targets: []Target{{Name: "flash throughput", Want: ">= 1", Got: "500", Pass: true}},
	}
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	r := sample()
	Markdown(&b, r)
	out := b.String()
	for _, want := range []string{
		"| flash | 500 conns, 30s, stock 200 | 1000 | 500 | 200 | 800 |",
		"### sustained: end to end",
		"| naive |", "| lua |", "**no**",
		"| flash throughput | >= 1 | 500 | PASS |",
		"**sold-exactly-stock (+10)**",
		"Invariants: **1 violated**",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if r.ViolationCount() != 1 {
		t.Errorf("ViolationCount = %d, want 1", r.ViolationCount())
	}
}

func TestMarkdownReplicationCost(t *testing.T) {
	r := sample()
	plain := &Run{Name: "flash (cluster)", Topology: "cluster", Throughput: 1000, Latency: stats.Summary{P99Ms: 10}}
	repl := &Run{Name: "flash (replicated)", Topology: "replicated", Throughput: 800, Latency: stats.Summary{P99Ms: 15}}
	r.Runs = append(r.Runs, plain, repl)
	r.Replication = []*TopologyRow{{Scenario: "flash", Plain: plain, Replicated: repl}}
	r.ReferenceByTopology = map[string]*Reference{"cluster": {MySQLPerSecond: 1000}, "replicated": {MySQLPerSecond: 300}}
	var b bytes.Buffer
	Markdown(&b, r)
	for _, want := range []string{"### Cost of replication", "| flash | req/s | 1000 | 800 | -20 % |", "| flash | P99 ms | 10.00 | 15.00 | +50 % |",
		"| reference | MySQL per-order tx/s | 1000 | 300 | -70 % |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}

func TestChartsArePNGs(t *testing.T) {
	dir := t.TempDir()
	r := sample()
	files := map[string]func(string) error{
		"flash.png":     func(p string) error { return RunChart(p, r.Runs[0]) },
		"sustained.png": func(p string) error { return RunChart(p, r.Runs[1]) },
		"compare.png":   func(p string) error { return CompareChart(p, r.Compare) },
	}
	for name, draw := range files {
		path := filepath.Join(dir, name)
		if err := draw(path); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s is not a PNG: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
			t.Errorf("%s is %v", name, b)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteJSON(path, sample()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	for _, want := range []string{`"orders_per_s_end_to_end": 90`, `"invariant": "sold-exactly-stock"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

func TestMarkdownSeveralAPIs(t *testing.T) {
	one := sample()
	one.Setup = Setup{API: "http://a:1", APIProcesses: 1}
	one.Runs[0].CPU = &cpu.Usage{Machine: 150, Procs: map[string]float64{"api": 90}}
	var b bytes.Buffer
	Markdown(&b, one)
	for _, unwanted := range []string{"API processes", "Requests per API"} {
		if strings.Contains(b.String(), unwanted) {
			t.Errorf("one API: markdown has %q:\n%s", unwanted, b.String())
		}
	}
	if !strings.Contains(b.String(), "| flash | 150 | 0 | 90 |") {
		t.Errorf("one API: CPU row missing:\n%s", b.String())
	}

	two := sample()
	two.Setup = Setup{API: "http://a:1", APIs: []string{"http://a:1", "http://b:2"}, APIProcesses: 2}
	two.Runs[0].APIRequests = []int64{501, 499}
	two.Runs[0].CPU = &cpu.Usage{Machine: 150, Procs: map[string]float64{"api": 60, "api2": 50, "consumer": 3, "consumer2": 2}}
	b.Reset()
	Markdown(&b, two)
	for _, want := range []string{
		"API processes: 2 (http://a:1, http://b:2)",
		"Requests per API: flash 501 / 499.",
		"| flash | 150 | 0 | 110 | 5 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("two APIs: markdown lacks %q:\n%s", want, b.String())
		}
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteJSON(path, two); err != nil {
		t.Fatal(err)
	}
	j, _ := os.ReadFile(path)
	for _, want := range []string{`"api_processes": 2`, `"requests_per_api": [`, `"api2": 50`} {
		if !bytes.Contains(j, []byte(want)) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

func TestPerUnitDividesCPUTimeByWork(t *testing.T) {
	u := &cpu.Usage{Seconds: 10, Procs: map[string]float64{"api": 50, "api2": 30, "consumer": 10, "kafka": 20, "bench": 40}}
	if got := Column(u, "api"); got != 80 {
		t.Errorf("api column = %v, want 80 (api + api2)", got)
	}
	if got := PipelineCPU(u); got != 110 {
		t.Errorf("pipeline CPU = %v, want 110 (everything but the bench)", got)
	}
	// 110 % of one CPU for 10 s is 11 s of CPU; over 5,000 orders, 2,200 µs each.
	if got := PerUnit(u, PipelineCPU(u), 5000); got != 2200 {
		t.Errorf("per unit = %v µs, want 2200", got)
	}
	if got := PerUnit(u, 50, 0); got != 0 {
		t.Errorf("per unit of no work = %v, want 0", got)
	}
	var b strings.Builder
	Markdown(&b, &Report{Host: Host{CPUs: 2}, Runs: []*Run{{Name: "sustained", Requests: 5000, CPU: u,
		Outcomes: map[string]int64{"accepted": 5000}, Pipeline: &Pipeline{}}}})
	if !strings.Contains(b.String(), "| sustained | created order | 2200 | 1600 | 200 | 0 | 0 | 400 |") {
		t.Errorf("per-unit row missing or wrong:\n%s", b.String())
	}
}

func TestMarkdownReconcile(t *testing.T) {
	r := sample()
	r.Reconcile = []*Reconcile{{
		Orders: 1000000, Buyers: 1000000, Stock: 1200000, ItemID: 1, ActivityID: 1, RollbackOrders: 5000,
		Database: "seckill_bench_x", RedisAddr: "127.0.0.1:1", BuildSeconds: 61.5,
		Steps: []ReconcileStep{
			{Name: "clean check", Args: "reconciler --item=1", ExitCode: 2, Seconds: 3.25, MaxRSSMiB: 300,
				Summary: "a | b", StderrTail: "reconciler: check item 1: Error 1390"},
			{Name: "repair after FLUSHALL", Before: "FLUSHALL", BeforeSeconds: 0.5, Args: "reconciler --item=1 --repair",
				Seconds: 10, MaxRSSMiB: 100, Summary: "1 items checked: 1 repaired"},
		},
	}}
	var b bytes.Buffer
	Markdown(&b, r)
	out := b.String()
	for _, want := range []string{
		"### reconcile: 1000000 orders of one item",
		"in 61.5 s",
		"The rollback step places 5000 more orders",
		"| clean check | — | `reconciler --item=1` | **2 (0)** | 3.25 | 300 | a \\| b |",
		"| repair after FLUSHALL | FLUSHALL (0.5 s) | `reconciler --item=1 --repair` | 0 (0) | 10.00 | 100 | 1 items checked: 1 repaired |",
		"clean check: exit 2, the end of its stderr:\n\n```\nreconciler: check item 1: Error 1390\n```",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if got := r.Reconcile[0].Step("repair after FLUSHALL"); got == nil || !got.OK() {
		t.Errorf("Step(repair after FLUSHALL) = %+v, want the step, exit as wanted", got)
	}
}

func TestMarkdownDraw(t *testing.T) {
	r := sample()
	r.Reference = &Reference{MySQLPerSecond: 2000}
	r.Runs = append(r.Runs, &Run{Name: "draw (replicated)", Connections: 500, Violations: []verify.Violation{}, Draw: &Draw{
		Entrants: 1000, Sizes: 2, Units: 10, WindowSeconds: 60, EntrySeconds: 2, EntriesAccepted: 1000, EntriesPerSecond: 500,
		EntryLatency: stats.Summary{P50Ms: 100, P99Ms: 400}, ReEntries: 10, ReEntrySame: 10, CloseMargin: 1.5, PollMs: 20,
		RateTarget: 5000, RateSeconds: 10.2, RateSent: 49990, RateDropped: 10, RateLatency: stats.Summary{P50Ms: 3, P90Ms: 8, P99Ms: 41, P999Ms: 90, MaxMs: 120},
		RateAPIView: &APIView{Accepted: APILatency{Count: 49990, P99Ms: 30, Within25: 0.98}, Reserve: APILatency{P99Ms: 0.9},
			Publish: APILatency{P99Ms: 28, Within5: 0.5, Within25: 0.97}},
		PassAfter: 0.3, DrawnAfter: 0.5, FirstReservedAfter: 0.5, AllCreatedAfter: -1, Winners: 10, WinnerOrders: 9,
		WinnerOrdersPerSecond: 0, RecordBytes: 2_500_000, RecordSeconds: 0.2, RecordEntries: 1000, VerifyError: "rank 1: x",
		PerSize: []DrawSize{{Label: "EU 36", ItemID: 5, Stock: 4, Entries: 600, Won: 4, Orders: 4}},
	}})
	// The flash of the same topology is the one it is read against.
	r.Runs = append(r.Runs, &Run{Name: "flash (replicated)", Throughput: 1000, Violations: []verify.Violation{}})
	var b bytes.Buffer
	Markdown(&b, r)
	out := b.String()
	for _, want := range []string{
		"### draw (replicated): a draw sale",
		"| entries | **500 entries/s** (1000 accepted in 2.0 s)",
		"| entries vs one-item loads | 0.50× flash's 1000 req/s; 0.25× the raw MySQL insert + hot-row update's 2000 tx/s, same run |",
		"| entering again, after the draw | 10 of 10 answered 200 with the buyer's entry |",
		"| entries at a fixed 5000/s | 49990 sent over 10.2 s (10 due and not sent in time), P50 3.00 ms, P90 8.00 ms, **P99 41.00 ms**, P99.9 90.00 ms, max 120 ms |",
		"| the api's own view of them | 49990 answered 201, P99 ≈ 30.00 ms (98.0 % within 25 ms); the Redis step P99 ≈ 0.90 ms; Kafka's acknowledgement P99 ≈ 28.00 ms (50.0 % within 5 ms, 97.0 % within 25 ms) |",
		"| entries_close_at | every entrant was in 1.5 s before the close |",
		"Up to 1000 entrants over 500 connections for a window of 60.0 s; 2 sizes holding 10 units.",
		"the drawer's pass began 0.30 s after the close, the draw was DRAWN 0.50 s after it (read every 20 ms)",
		"every one CREATED not within the run after it: 9 of 10 winners",
		"draw.Verify **does not hold**: rank 1: x",
		"| EU 36 | 5 | 4 | 600 | 4 | 4 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}
