package apiview

import (
	"math"
	"testing"
	"time"
)

func TestWithinAndQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := Snapshot{"409": {Bounds: []float64{0.001, 0.005, 0.025, inf}, Counts: []float64{10, 10, 10, 10}}}
	after := Snapshot{"409": {Bounds: []float64{0.001, 0.005, 0.025, inf}, Counts: []float64{60, 90, 109, 110}}}
	h := after.Since(before)["409"]
	if h.Count() != 100 {
		t.Fatalf("count %v, want 100", h.Count())
	}
	if got := h.Within(5 * time.Millisecond); got != 0.8 {
		t.Errorf("within 5 ms %v, want 0.8", got)
	}
	if got := h.Within(25 * time.Millisecond); got != 0.99 {
		t.Errorf("within 25 ms %v, want 0.99", got)
	}
	if got := h.Within(500 * time.Microsecond); got != 0 {
		t.Errorf("within 0.5 ms %v, want 0", got)
	}
	// P50: rank 50 of the first bucket's 50 -> its upper bound.
	if got := h.Quantile(0.5); math.Abs(got-1) > 1e-9 {
		t.Errorf("P50 %v ms, want 1", got)
	}
	// P90: rank 90, the second bucket holds ranks 50-80, the third 80-99:
	// 5 + 20*(10/19) ms.
	if got, want := h.Quantile(0.9), 5+20*10.0/19; math.Abs(got-want) > 1e-9 {
		t.Errorf("P90 %v ms, want %v", got, want)
	}
	// P99.9 falls in +Inf: the bound below it.
	if got := h.Quantile(0.999); got != 25 {
		t.Errorf("P99.9 %v ms, want 25", got)
	}
}
