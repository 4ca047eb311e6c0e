package activity

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

func TestCheckDraw(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	starts, ends := now.Add(time.Hour), now.Add(3*time.Hour)
	sale := func(closes time.Time, window time.Duration) Activity {
		return Activity{StartsAt: starts, EndsAt: ends, StockBuckets: 1, PaymentWindow: window, Draw: Draw{EntriesCloseAt: closes}}
	}
	for _, tc := range []struct {
		name string
		a    Activity
		def  time.Duration
		want string // in the message; "" when valid
	}{
		{"the programs' window left before the end", sale(ends.Add(-30*time.Minute), 0), 30 * time.Minute, ""},
		{"the sale's own window left before the end", sale(ends.Add(-time.Minute), time.Minute), time.Hour, ""},
		{"1 ms before the end", sale(ends.Add(-time.Millisecond), 0), 30 * time.Minute, "at least the payment window (30m0s) before ends_at"},
		{"less than the programs' window", sale(ends.Add(-29*time.Minute), 0), 30 * time.Minute, "payment window (30m0s)"},
		{"less than the sale's own window", sale(ends.Add(-59*time.Second), time.Minute), time.Second, "payment window (1m0s)"},
		{"at the end", sale(ends, 0), 0, "entries_close_at must be before ends_at"},
		{"before the start", sale(starts, 0), 0, "after starts_at"},
		{"first come", Activity{StartsAt: starts, EndsAt: ends}, time.Hour, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.CheckDraw(now, tc.def)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, order.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want ErrInvalidArgument with %q", err, tc.want)
			}
		})
	}
}
