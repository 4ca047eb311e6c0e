package activity

import (
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// The lifetimes of a sale's keys all come from its end: quota and
// idempotency records KeyMargin past it, item keys the payment window and
// KeyMargin past it, each refused for a sale outside the range.
func TestActivityKeyLifetimes(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name          string
		act           Activity
		def           time.Duration
		records, keys time.Duration
		ok            bool
	}{
		{"an hour left, the default window", Activity{EndsAt: now.Add(time.Hour)}, DefaultPaymentWindow,
			time.Hour + order.KeyMargin, time.Hour + DefaultPaymentWindow + order.KeyMargin, true},
		{"its own window", Activity{EndsAt: now.Add(time.Hour), PaymentWindow: 5 * time.Minute}, DefaultPaymentWindow,
			time.Hour + order.KeyMargin, time.Hour + 5*time.Minute + order.KeyMargin, true},
		{"ended two days ago", Activity{EndsAt: now.Add(-48 * time.Hour)}, time.Hour,
			-24 * time.Hour, -23 * time.Hour, true},
		{"the year 3000", Activity{EndsAt: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}, DefaultPaymentWindow, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			records, rerr := tc.act.RecordsLifetime(now)
			keys, kerr := tc.act.KeysLifetime(now, tc.def)
			if !tc.ok {
				if !errors.Is(rerr, order.ErrInvalidArgument) || !errors.Is(kerr, order.ErrInvalidArgument) {
					t.Fatalf("lifetimes %s (%v), %s (%v): want ErrInvalidArgument", records, rerr, keys, kerr)
				}
				return
			}
			if rerr != nil || kerr != nil {
				t.Fatal(rerr, kerr)
			}
			if records != tc.records || keys != tc.keys {
				t.Fatalf("lifetimes %s, %s; want %s, %s", records, keys, tc.records, tc.keys)
			}
			if got := tc.act.RecordsLiveUntil(); !got.Equal(now.Add(records)) {
				t.Fatalf("RecordsLiveUntil %s, want %s", got, now.Add(records))
			}
			if got := tc.act.KeysLiveUntil(tc.def); !got.Equal(now.Add(keys)) {
				t.Fatalf("KeysLiveUntil %s, want %s", got, now.Add(keys))
			}
		})
	}
}
