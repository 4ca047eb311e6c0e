package report

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
