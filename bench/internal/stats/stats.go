// Package stats turns raw measurements into the figures the bench reports:
// latency percentiles from an HDR histogram, and per-interval series
// (throughput and P50/P99) for the charts. Everything here is pure.
package stats

import (
	"math"
	"sort"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: 1µs to 5 minutes at 3 significant digits (values are
// recorded in microseconds; anything above the top is clamped to it).
const (
	lowest  = 1
	highest = int64(5 * time.Minute / time.Microsecond)
	digits  = 3
)

// NewHistogram returns an empty latency histogram (values in µs).
func NewHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(lowest, highest, digits) }

// Record adds one latency to h, clamped to the histogram's range.
func Record(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	us = min(max(us, lowest), highest)
	_ = h.RecordValue(us) // in range by construction
}

// Summary is a latency distribution in milliseconds.
type Summary struct {
	Count  int64   `json:"count"`
	MinMs  float64 `json:"min_ms"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Summarize reads the usual percentiles from h. An empty histogram gives a
// zero Summary.
func Summarize(h *hdrhistogram.Histogram) Summary {
	if h.TotalCount() == 0 {
		return Summary{}
	}
	ms := func(us int64) float64 { return round3(float64(us) / 1000) }
	return Summary{
		Count:  h.TotalCount(),
		MinMs:  ms(h.Min()),
		MeanMs: round3(h.Mean() / 1000),
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P90Ms:  ms(h.ValueAtQuantile(90)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
	}
}

// SummarizeDurations is Summarize over a slice of durations.
func SummarizeDurations(ds []time.Duration) Summary {
	h := NewHistogram()
	for _, d := range ds {
		Record(h, d)
	}
	return Summarize(h)
}

// Event is one finished operation: when it finished (since the start of the
// run) and how long it took.
type Event struct {
	At      time.Duration
	Latency time.Duration
}

// Point is one interval of a series.
type Point struct {
	// T is the end of the interval, in seconds since the start.
	T float64 `json:"t_s"`
	// Rate is operations finished in the interval, per second.
	Rate  float64 `json:"rate_per_s"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// Series buckets events by finish time into intervals of width step,
// from 0 to the last event, and gives each interval's rate and latency
// percentiles. Empty intervals have rate 0 and zero latencies. The last
// interval ends at the last event and its rate is over its actual width;
// when that is under a quarter of step (and it is not the only interval)
// it is left out.
func Series(events []Event, step time.Duration) []Point {
	if len(events) == 0 || step <= 0 {
		return nil
	}
	sorted := make([]Event, len(events))
	copy(sorted, events)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].At < sorted[j].At })
	last := max(sorted[len(sorted)-1].At, 0)
	n := int(last/step) + 1
	out := make([]Point, 0, n)
	h := NewHistogram()
	i := 0
	for b := range n {
		end := time.Duration(b+1) * step
		h.Reset()
		for i < len(sorted) && sorted[i].At < end {
			Record(h, sorted[i].Latency)
			i++
		}
		// The last interval ends with the last event; its rate is over
		// the part of the interval that elapsed.
		width := step
		if b == n-1 {
			width = max(last-time.Duration(b)*step, time.Millisecond)
			end = time.Duration(b)*step + width
			if b > 0 && width < step/4 {
				break // too short a tail to give a meaningful rate
			}
		}
		p := Point{T: round3(end.Seconds()), Rate: round3(float64(h.TotalCount()) / width.Seconds())}
		if h.TotalCount() > 0 {
			p.P50Ms = round3(float64(h.ValueAtQuantile(50)) / 1000)
			p.P99Ms = round3(float64(h.ValueAtQuantile(99)) / 1000)
		}
		out = append(out, p)
	}
	return out
}

// Rate is n operations over d, per second (0 when d is not positive).
func Rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round3(float64(n) / d.Seconds())
}

// Ratio is a/b rounded to 3 decimals, or 0 when b is 0.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
