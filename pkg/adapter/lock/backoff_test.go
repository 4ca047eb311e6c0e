package lock

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	const lo, hi = 10 * time.Millisecond, 200 * time.Millisecond
	tests := []struct {
		name    string
		attempt int
		min     time.Duration
		max     time.Duration
	}{
		{name: "first retry", attempt: 0, min: 5 * time.Millisecond, max: 10 * time.Millisecond},
		{name: "doubles", attempt: 1, min: 10 * time.Millisecond, max: 20 * time.Millisecond},
		{name: "doubles again", attempt: 3, min: 40 * time.Millisecond, max: 80 * time.Millisecond},
		{name: "reaches the cap", attempt: 5, min: 100 * time.Millisecond, max: 200 * time.Millisecond},
		{name: "stays at the cap", attempt: 1000, min: 100 * time.Millisecond, max: 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			seen := map[time.Duration]bool{}
			for range 1000 {
				d := backoff(tt.attempt, lo, hi)
				if d < tt.min || d > tt.max {
					t.Fatalf("backoff(%d) = %v, want within [%v, %v]", tt.attempt, d, tt.min, tt.max)
				}
				seen[d] = true
			}
			if len(seen) < 10 {
				t.Errorf("backoff(%d) took only %d distinct values in 1000 draws; want jitter", tt.attempt, len(seen))
			}
		})
	}
}
