package stats

import (
	"math"
	"testing"
	"time"
)

func near(got, want, rel float64) bool {
	if want == 0 {
		return got == 0
	}
	return math.Abs(got-want)/want <= rel
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		in   []time.Duration
		want Summary
	}{
		{name: "empty", in: nil, want: Summary{}},
		{
			name: "one value",
			in:   []time.Duration{3 * time.Millisecond},
			want: Summary{Count: 1, MinMs: 3, MeanMs: 3, P50Ms: 3, P90Ms: 3, P99Ms: 3, P999Ms: 3, MaxMs: 3},
		},
		{
			// 1..1000 ms: the p-th percentile is p*10 ms.
			name: "uniform 1 to 1000 ms",
			in: func() []time.Duration {
				var ds []time.Duration
				for i := 1; i <= 1000; i++ {
					ds = append(ds, time.Duration(i)*time.Millisecond)
				}
				return ds
			}(),
			want: Summary{Count: 1000, MinMs: 1, MeanMs: 500.5, P50Ms: 500, P90Ms: 900, P99Ms: 990, P999Ms: 999, MaxMs: 1000},
		},
		{
			name: "below the histogram's floor counts as 1µs",
			in:   []time.Duration{0, 200 * time.Nanosecond},
			want: Summary{Count: 2, MinMs: 0.001, MeanMs: 0.001, P50Ms: 0.001, P90Ms: 0.001, P99Ms: 0.001, P999Ms: 0.001, MaxMs: 0.001},
		},
		{
			name: "above the ceiling is clamped to it",
			in:   []time.Duration{time.Hour},
			want: Summary{Count: 1, MinMs: 300000, MeanMs: 300000, P50Ms: 300000, P90Ms: 300000, P99Ms: 300000, P999Ms: 300000, MaxMs: 300000},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SummarizeDurations(tt.in)
			if got.Count != tt.want.Count {
				t.Fatalf("count = %d, want %d", got.Count, tt.want.Count)
			}
			// HDR keeps 3 significant digits: values are within 0.1%.
			for _, f := range []struct {
				name      string
				got, want float64
			}{
				{"min", got.MinMs, tt.want.MinMs}, {"mean", got.MeanMs, tt.want.MeanMs}, {"p50", got.P50Ms, tt.want.P50Ms},
				{"p90", got.P90Ms, tt.want.P90Ms}, {"p99", got.P99Ms, tt.want.P99Ms}, {"p99.9", got.P999Ms, tt.want.P999Ms},
				{"max", got.MaxMs, tt.want.MaxMs},
			} {
				if !near(f.got, f.want, 0.002) {
					t.Errorf("%s = %v ms, want %v ms", f.name, f.got, f.want)
				}
			}
		})
	}
}

func TestSeries(t *testing.T) {
	ev := func(at, lat time.Duration) Event { return Event{At: at, Latency: lat} }
	ms := time.Millisecond
	tests := []struct {
		name string
		in   []Event
		step time.Duration
		want []Point
	}{
		{name: "no events", in: nil, step: time.Second, want: nil},
		{
			name: "two full seconds, unsorted input",
			in:   []Event{ev(1500*ms, 20*ms), ev(100*ms, 10*ms), ev(900*ms, 30*ms), ev(1999*ms, 40*ms)},
			step: time.Second,
			want: []Point{{T: 1, Rate: 2, P50Ms: 10, P99Ms: 30}, {T: 1.999, Rate: 2.001, P50Ms: 20, P99Ms: 40}},
		},
		{
			name: "an empty second in the middle",
			in:   []Event{ev(500*ms, 5*ms), ev(2900*ms, 7*ms)},
			step: time.Second,
			want: []Point{{T: 1, Rate: 1, P50Ms: 5, P99Ms: 5}, {T: 2, Rate: 0}, {T: 2.9, Rate: 1.111, P50Ms: 7, P99Ms: 7}},
		},
		{
			name: "a tail under a quarter step is dropped",
			in:   []Event{ev(500*ms, 5*ms), ev(1100*ms, 5*ms)},
			step: time.Second,
			want: []Point{{T: 1, Rate: 1, P50Ms: 5, P99Ms: 5}},
		},
		{
			name: "a single short interval is kept",
			in:   []Event{ev(100*ms, 5*ms), ev(200*ms, 5*ms)},
			step: time.Second,
			want: []Point{{T: 0.2, Rate: 10, P50Ms: 5, P99Ms: 5}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Series(tt.in, tt.step)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d points %v, want %d %v", len(got), got, len(tt.want), tt.want)
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.T != w.T || !near(g.Rate, w.Rate, 0.001) || !near(g.P50Ms, w.P50Ms, 0.002) || !near(g.P99Ms, w.P99Ms, 0.002) {
					t.Errorf("point %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestRateAndRatio(t *testing.T) {
	tests := []struct {
		name      string
		got, want float64
	}{
		{"rate", Rate(15000, 1500*time.Millisecond), 10000},
		{"rate over nothing", Rate(10, 0), 0},
		{"ratio", Ratio(1, 3), 0.333},
		{"ratio over zero", Ratio(5, 0), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}
