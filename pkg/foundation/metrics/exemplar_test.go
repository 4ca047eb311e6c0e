package metrics_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/foundation/metrics"
)

// The request latency and the PENDING time take the trace id of a sampled
// trace as the exemplar of the bucket the observation fell in; without
// one, no exemplar.
func TestLatencyExemplars(t *testing.T) {
	reg := metrics.NewRegistry()
	h := metrics.NewHTTP(reg)
	rt := h.Route("POST", "/api/v1/orders")
	h.Start()
	rt.ObserveTrace(202, 3*time.Millisecond, "4bf92f3577b34da6a3ce929d0e0e4736")
	h.Start()
	rt.ObserveTrace(409, time.Millisecond, "")
	c := metrics.NewConsumer(reg)
	c.FulfilDelayTrace(200*time.Millisecond, "00f067aa0ba902b700f067aa0ba902b7")

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{} // metric{code} -> exemplar trace id
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			code := ""
			for _, l := range m.Label {
				if l.GetName() == "code" {
					code = l.GetValue()
				}
			}
			for _, b := range m.GetHistogram().GetBucket() {
				if ex := b.GetExemplar(); ex != nil {
					for _, l := range ex.Label {
						if l.GetName() == "trace_id" {
							got[mf.GetName()+code] = l.GetValue()
						}
					}
				}
			}
		}
	}
	want := map[string]string{
		"seckill_http_request_duration_seconds202": "4bf92f3577b34da6a3ce929d0e0e4736",
		"seckill_consumer_fulfil_delay_seconds":    "00f067aa0ba902b700f067aa0ba902b7",
	}
	if len(got) != len(want) {
		t.Errorf("exemplars %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s exemplar %q, want %q", k, got[k], v)
		}
	}
}
