// Package apiview reads the api's own view of a load: its request-duration
// histogram, scraped from its admin listener before and after the load, so
// a report can put what the api measured beside what the load tool saw
// (the difference is the time requests and answers spent in the tool and
// the kernel, on CPUs the tool shares).
package apiview

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metric is the api's request-duration histogram.
const metric = "seckill_http_request_duration_seconds"

// View is what one scrape reads: the request-duration histogram of one
// route and method, by status code, and the api's histograms of the round
// trips its accepted requests wait for (Steps, by the Snapshot key they
// are kept under).
type View struct {
	Route, Method string
	Steps         map[string]string
}

// Orders is POST /api/v1/orders with its reserve script and publish.
var Orders = View{Route: "/api/v1/orders", Method: http.MethodPost, Steps: map[string]string{
	"reserve": "seckill_reserve_duration_seconds",
	"publish": "seckill_publish_duration_seconds",
}}

// Entries is a draw's POST .../entries with its Redis step (kept as
// "reserve") and publish.
var Entries = View{Route: "/api/v1/activities/:id/entries", Method: http.MethodPost, Steps: map[string]string{
	"reserve": "seckill_entry_take_duration_seconds",
	"publish": "seckill_entry_publish_duration_seconds",
}}

// Histogram is cumulative counts by upper bound (seconds), one series.
type Histogram struct {
	Bounds []float64 // ascending, +Inf last
	Counts []float64 // cumulative, same length
}

// Snapshot is one scrape: a histogram per status code of the view's
// route, and one per key of its Steps, summed over the apis scraped.
type Snapshot map[string]*Histogram

// Take scrapes the order view at the admin listeners at addrs (host:port
// each).
func Take(ctx context.Context, addrs []string) (Snapshot, error) { return Orders.Take(ctx, addrs) }

// Take scrapes v at the admin listeners at addrs (host:port each).
func (v View) Take(ctx context.Context, addrs []string) (Snapshot, error) {
	out := Snapshot{}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, a := range addrs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", a, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", a, err)
		}
		if f := fams[metric]; f != nil {
			for _, m := range f.GetMetric() {
				if label(m, "route") == v.Route && label(m, "method") == v.Method {
					out.add(label(m, "code"), m.GetHistogram())
				}
			}
		}
		for key, name := range v.Steps {
			if f := fams[name]; f != nil {
				for _, m := range f.GetMetric() {
					out.add(key, m.GetHistogram())
				}
			}
		}
	}
	return out, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func (s Snapshot) add(code string, h *dto.Histogram) {
	if h == nil {
		return
	}
	bounds := make([]float64, 0, len(h.GetBucket())+1)
	counts := make([]float64, 0, len(h.GetBucket())+1)
	for _, b := range h.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
		counts = append(counts, float64(b.GetCumulativeCount()))
	}
	if len(bounds) == 0 || !math.IsInf(bounds[len(bounds)-1], 1) {
		bounds = append(bounds, math.Inf(1))
		counts = append(counts, float64(h.GetSampleCount()))
	}
	cur := s[code]
	if cur == nil {
		s[code] = &Histogram{Bounds: bounds, Counts: counts}
		return
	}
	for i := range cur.Counts {
		if i < len(counts) {
			cur.Counts[i] += counts[i]
		}
	}
}

// Since is what happened between before and s, code by code.
func (s Snapshot) Since(before Snapshot) Snapshot {
	out := Snapshot{}
	for code, h := range s {
		d := &Histogram{Bounds: h.Bounds, Counts: append([]float64(nil), h.Counts...)}
		if b := before[code]; b != nil {
			for i := range d.Counts {
				if i < len(b.Counts) {
					d.Counts[i] -= b.Counts[i]
				}
			}
		}
		out[code] = d
	}
	return out
}

// Count is how many requests the histogram holds.
func (h *Histogram) Count() float64 {
	if h == nil || len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// Within is the share (0-1) of requests answered within d, exact when d is
// one of the bounds (5 ms and 25 ms are); else that of the bound below d.
func (h *Histogram) Within(d time.Duration) float64 {
	n := h.Count()
	if n == 0 {
		return 0
	}
	i := sort.SearchFloat64s(h.Bounds, d.Seconds()+1e-12) - 1
	if i < 0 {
		return 0
	}
	return h.Counts[i] / n
}

// Quantile estimates the q quantile in milliseconds by linear
// interpolation within its bucket, as Prometheus's histogram_quantile does
// (the bound below +Inf when it falls in the last bucket).
func (h *Histogram) Quantile(q float64) float64 {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := q * n
	lower, below := 0.0, 0.0
	for i, c := range h.Counts {
		if c >= rank {
			upper := h.Bounds[i]
			if math.IsInf(upper, 1) {
				return lower * 1000
			}
			in := c - below
			if in <= 0 {
				return upper * 1000
			}
			return (lower + (upper-lower)*(rank-below)/in) * 1000
		}
		lower, below = h.Bounds[i], c
	}
	return lower * 1000
}
