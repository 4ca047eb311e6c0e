package pipelinetest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/seckill/seckill/internal/testkit/waittest"
)

// FreeAddr returns a loopback address with a port nobody listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Scrape is one read of a /metrics endpoint.
type Scrape map[string]*dto.MetricFamily

// ScrapeMetrics reads the metrics at url.
func ScrapeMetrics(t testing.TB, url string) Scrape {
	t.Helper()
	s, err := scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func scrape(url string) (Scrape, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("scrape %s: %d %s", url, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return fams, nil
}

// Value sums the series of name whose labels include labels: a counter's or
// gauge's value, a histogram's sample count.
func (s Scrape) Value(name string, labels ...string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	var sum float64
	for _, m := range f.GetMetric() {
		n := 0
		for _, lp := range m.GetLabel() {
			if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
				n++
			}
		}
		if n != len(want) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// LabelValues returns every value any series of the scrape has for label.
func (s Scrape) LabelValues(label string) map[string]bool {
	out := map[string]bool{}
	for _, f := range s {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] = true
				}
			}
		}
	}
	return out
}

// ScrapeUntil scrapes url until ok holds for a scrape, and returns it. A
// listener not up yet counts as "not yet".
func ScrapeUntil(t testing.TB, url, what string, ok func(Scrape) bool) Scrape {
	t.Helper()
	var s Scrape
	var err error
	defer func() {
		if t.Failed() && err != nil {
			t.Logf("last scrape of %s: %v", url, err)
		}
	}()
	waittest.UntilEvery(t, 30*time.Second, 100*time.Millisecond, what+" at "+url, func() bool {
		s, err = scrape(url)
		return err == nil && ok(s)
	})
	return s
}
