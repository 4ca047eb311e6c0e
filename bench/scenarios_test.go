package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/seckill/seckill/bench/internal/cpu"
	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/report"
)

func TestSpread(t *testing.T) {
	tests := []struct {
		name        string
		conns, apis int
		shares      []int
	}{
		{name: "one API takes every connection", conns: 500, apis: 1, shares: []int{500}},
		{name: "even split", conns: 500, apis: 2, shares: []int{250, 250}},
		{name: "odd count: the first API gets the extra one", conns: 5, apis: 2, shares: []int{3, 2}},
		{name: "uneven over three", conns: 7, apis: 3, shares: []int{3, 2, 2}},
		{name: "one connection each", conns: 8, apis: 8, shares: []int{1, 1, 1, 1, 1, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shares := make([]int, tt.apis)
			for i := range shares {
				shares[i] = share(i, tt.apis, tt.conns)
			}
			if !reflect.DeepEqual(shares, tt.shares) {
				t.Fatalf("shares = %v, want %v", shares, tt.shares)
			}
			// Every worker gets one slot of one API, round-robin, and no
			// two workers share a slot.
			used := map[[2]int]int{}
			for w := range tt.conns {
				api, slot := spread(w, tt.apis)
				if api != w%tt.apis {
					t.Errorf("worker %d talks to API %d, want %d", w, api, w%tt.apis)
				}
				if slot < 0 || slot >= shares[api] {
					t.Errorf("worker %d has slot %d of API %d, which has %d", w, slot, api, shares[api])
				}
				if prev, ok := used[[2]int{api, slot}]; ok {
					t.Errorf("workers %d and %d share slot %d of API %d", prev, w, slot, api)
				}
				used[[2]int{api, slot}] = w
			}
		})
	}
}

// recorder is a stand-in API that answers 202 and records which
// Idempotency-Keys and client connections reached it.
type recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	keys  []string
	conns map[string]bool
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{conns: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
		r.conns[req.RemoteAddr] = true
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"order_no":%q}`, req.Header.Get("Idempotency-Key"))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func TestBuyersSpreadOverAPIs(t *testing.T) {
	for _, client := range []string{"raw", "nethttp"} {
		t.Run(client, func(t *testing.T) {
			const workers, perWorker = 5, 4
			apis := []*recorder{newRecorder(t), newRecorder(t)}
			e := &env{opts: options{client: client}}
			tk, err := mintTokens([]byte(secret), 1, workers, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := e.newBuyers([]string{apis[0].srv.URL, apis[1].srv.URL}, workers, 1, 1, tk)
			if err != nil {
				t.Fatal(err)
			}
			// Each worker sends perWorker requests, concurrently, as a load does.
			var wg sync.WaitGroup
			outcomes := make([][]load.Outcome, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perWorker {
						outcomes[w] = append(outcomes[w], b.place(context.Background(), w, 1+int64(w), fmt.Sprintf("w%d-%d", w, i)))
					}
				}()
			}
			wg.Wait()
			b.close()
			for w, got := range outcomes {
				for _, o := range got {
					if o != load.Accepted {
						t.Fatalf("worker %d got %v", w, o)
					}
				}
			}
			// Each worker's requests all reached API w mod 2.
			served := map[string]int{}
			for i, a := range apis {
				for _, k := range a.keys {
					var w, seq int
					if _, err := fmt.Sscanf(k, "w%d-%d", &w, &seq); err != nil {
						t.Fatalf("key %q: %v", k, err)
					}
					if w%2 != i {
						t.Errorf("worker %d's request %s reached API %d, want %d", w, k, i, w%2)
					}
					served[k]++
				}
			}
			if len(served) != workers*perWorker {
				t.Errorf("the APIs saw %d distinct requests, want %d", len(served), workers*perWorker)
			}
			per := b.perAPI()
			if want := []int64{int64(len(apis[0].keys)), int64(len(apis[1].keys))}; !reflect.DeepEqual(per, want) {
				t.Errorf("perAPI = %v, the APIs saw %v", per, want)
			}
			if per[0] == 0 || per[1] == 0 {
				t.Errorf("an API got no requests: %v", per)
			}
			if client == "raw" {
				// One keep-alive connection per worker: API 0 has workers
				// 0, 2, 4 and API 1 has workers 1, 3.
				if n0, n1 := len(apis[0].conns), len(apis[1].conns); n0 != 3 || n1 != 2 {
					t.Errorf("connections per API = %d, %d; want 3, 2", n0, n1)
				}
			}
			if got := len(b.collected()); got != workers*perWorker {
				t.Errorf("%d answers collected, want %d", got, workers*perWorker)
			}
		})
	}
}

func TestBuyersOneAPI(t *testing.T) {
	api := newRecorder(t)
	e := &env{opts: options{client: "raw"}}
	tk, err := mintTokens([]byte(secret), 1, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.newBuyers([]string{api.srv.URL}, 3, 1, 1, tk)
	if err != nil {
		t.Fatal(err)
	}
	for w := range 3 {
		for i := range 3 {
			b.place(context.Background(), w, 1+int64(w), fmt.Sprintf("w%d-%d", w, i))
		}
	}
	b.close()
	if len(api.keys) != 9 || len(api.conns) != 3 {
		t.Errorf("the API saw %d requests on %d connections, want 9 on 3", len(api.keys), len(api.conns))
	}
	if got := b.perAPI(); !reflect.DeepEqual(got, []int64{9}) {
		t.Errorf("perAPI = %v, want [9]", got)
	}
}

func TestBellStock(t *testing.T) {
	tests := []struct {
		name  string
		total int64
		n     int
	}{
		{name: "a drop of 12 sizes", total: 200, n: 12},
		{name: "ten sizes, stock that lasts", total: 1_000_000, n: 10},
		{name: "one unit a size", total: 12, n: 12},
		{name: "odd count", total: 101, n: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bellStock(tt.total, tt.n)
			var sum int64
			for i, v := range got {
				if v < 1 {
					t.Errorf("size %d has %d units", i, v)
				}
				sum += v
			}
			if len(got) != tt.n || sum != tt.total {
				t.Fatalf("%v: %d sizes, %d units; want %d, %d", got, len(got), sum, tt.n, tt.total)
			}
			// A bell: rising to the middle, falling after it (rounding
			// may tie neighbours).
			mid := (tt.n - 1) / 2
			for i := 1; i <= mid; i++ {
				if got[i] < got[i-1] {
					t.Errorf("%v: size %d holds less than size %d before the middle", got, i, i-1)
				}
			}
			for i := mid + 2; i < tt.n; i++ {
				if got[i] > got[i-1] {
					t.Errorf("%v: size %d holds more than size %d after the middle", got, i, i-1)
				}
			}
			if tt.total >= 100*int64(tt.n) && got[mid] < 3*got[0] {
				t.Errorf("%v: the middle holds under 3x an end", got)
			}
		})
	}
}

func TestSizeDemand(t *testing.T) {
	if got := popularity(6); !reflect.DeepEqual(got, []int{3, 2, 4, 1, 5, 0}) {
		t.Errorf("popularity(6) = %v, want the middle first, outwards, the larger of each pair first", got)
	}
	if got := popularity(5); !reflect.DeepEqual(got, []int{2, 3, 1, 4, 0}) {
		t.Errorf("popularity(5) = %v", got)
	}
	d := sizeDemand(12, 1)
	var sum float64
	for _, v := range d {
		sum += v
	}
	if sum < 0.999999 || sum > 1.000001 {
		t.Errorf("shares add up to %g", sum)
	}
	order := popularity(12)
	for r := 1; r < len(order); r++ {
		if d[order[r]] >= d[order[r-1]] {
			t.Errorf("rank %d (size %d) wanted as much as rank %d: %v", r+1, order[r], r, d)
		}
	}
	// Zipf with exponent 1 over 12: the top size 1/H(12) ≈ 32 %, the top
	// three over half.
	if top := d[order[0]]; top < 0.31 || top > 0.33 {
		t.Errorf("top size share %.3f, want about 0.322", top)
	}
	for _, v := range sizeDemand(4, 0) {
		if v != 0.25 {
			t.Errorf("skew 0 gives %v, want every size alike", sizeDemand(4, 0))
			break
		}
	}
}

func TestChooser(t *testing.T) {
	c := newChooser([]float64{0.5, 0, 0.25, 0.25})
	for _, tt := range []struct {
		u    float64
		want int
	}{{0, 0}, {0.49, 0}, {0.5, 2}, {0.74, 2}, {0.75, 3}, {0.999, 3}} {
		if got := c.pick(tt.u); got != tt.want {
			t.Errorf("pick(%g) = %d, want %d", tt.u, got, tt.want)
		}
	}
	// Drawn many times, each index comes up at about its share.
	shares := sizeDemand(12, 1)
	c = newChooser(shares)
	counts := make([]int, len(shares))
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200_000
	for range n {
		counts[c.pick(rng.Float64())]++
	}
	for i, s := range shares {
		if got := float64(counts[i]) / n; got < s-0.01 || got > s+0.01 {
			t.Errorf("size %d drawn %.3f of the time, want %.3f", i, got, s)
		}
	}
}

func TestOneItemBase(t *testing.T) {
	tests := []struct {
		run, base string
		lasting   bool
		ok        bool
	}{
		{run: "sizes", base: "flash", ok: true},
		{run: "sizes-sustained", base: "sustained", lasting: true, ok: true},
		{run: "drops (replicated)", base: "flash (replicated)", ok: true},
		{run: "drops-sustained (tracing on, 1 % sampled)", base: "sustained (tracing on, 1 % sampled)", lasting: true, ok: true},
		{run: "flash"},
		{run: "sizesx"},
		{run: "sizes-sustainedx"},
	}
	for _, tt := range tests {
		t.Run(tt.run, func(t *testing.T) {
			base, lasting, ok := oneItemBase(tt.run)
			if base != tt.base || lasting != tt.lasting || ok != tt.ok {
				t.Errorf("oneItemBase(%q) = %q, %t, %t; want %q, %t, %t", tt.run, base, lasting, ok, tt.base, tt.lasting, tt.ok)
			}
		})
	}
}

func TestSizedTargets(t *testing.T) {
	usage := func(pct float64) *cpu.Usage {
		return &cpu.Usage{Seconds: 10, Procs: map[string]float64{"api": pct}}
	}
	rep := &report.Report{Runs: []*report.Run{
		{Name: "flash", Throughput: 30000},
		{Name: "sustained", Outcomes: map[string]int64{"accepted": 100000}, Pipeline: &report.Pipeline{OrdersPerSecond: 10000}, CPU: usage(150)},
		{Name: "sizes", Throughput: 28000},
		{Name: "sizes-sustained", Outcomes: map[string]int64{"accepted": 80000}, Pipeline: &report.Pipeline{OrdersPerSecond: 8000}, CPU: usage(150)},
	}}
	got := sizedTargets(rep)
	want := []struct {
		name string
		pass bool
	}{
		{"sizes vs flash: req/s", true},                                                    // 0.93×
		{"sizes-sustained vs sustained: orders/s end to end", false},                       // 0.80×
		{"sizes-sustained vs sustained: CPU per created order (all but the bench)", false}, // 1.25×
	}
	if len(got) != len(want) {
		t.Fatalf("targets %+v", got)
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Pass != w.pass {
			t.Errorf("target %d = %+v, want %q pass %t", i, got[i], w.name, w.pass)
		}
	}
}
