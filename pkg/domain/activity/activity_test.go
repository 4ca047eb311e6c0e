package activity

import (
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

func TestActiveAt(t *testing.T) {
	now := time.Now()
	a := Activity{StartsAt: now, EndsAt: now.Add(time.Minute)}
	if !a.ActiveAt(now) || a.ActiveAt(now.Add(-time.Second)) || a.ActiveAt(now.Add(time.Minute)) {
		t.Fatal("ActiveAt window is [starts_at, ends_at)")
	}
}

func TestPaymentWindowOr(t *testing.T) {
	tests := []struct {
		name string
		own  time.Duration
		def  time.Duration
		want time.Duration
	}{
		{"the activity's own", 5 * time.Minute, 30 * time.Minute, 5 * time.Minute},
		{"none of its own: the default", 0, 30 * time.Minute, 30 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Activity{PaymentWindow: tt.own}).PaymentWindowOr(tt.def); got != tt.want {
				t.Errorf("PaymentWindowOr(%v) = %v, want %v", tt.def, got, tt.want)
			}
		})
	}
}

func TestRefusal(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	sale := Activity{StartsAt: start, EndsAt: start.Add(time.Hour), PerUserLimit: 2}
	cancelled := sale
	cancelled.EndsAt, cancelled.CancelledAt = start.Add(time.Minute), start.Add(time.Minute)
	cases := []struct {
		name string
		a    Activity
		at   time.Time
		qty  int
		want string
	}{
		{"within the sale", sale, start.Add(time.Minute), 2, ""},
		{"at the start", sale, start, 1, ""},
		{"before the start", sale, start.Add(-time.Millisecond), 1, order.ReasonSaleNotStarted},
		{"at the end", sale, start.Add(time.Hour), 1, order.ReasonSaleEnded},
		{"after the end", sale, start.Add(2 * time.Hour), 1, order.ReasonSaleEnded},
		{"above the limit", sale, start.Add(time.Minute), 3, order.ReasonOverLimit},
		{"ended beats the limit", sale, start.Add(time.Hour), 3, order.ReasonSaleEnded},
		{"after a cancel", cancelled, start.Add(time.Minute), 1, order.ReasonSaleCancelled},
		{"before a cancel", cancelled, start.Add(time.Second), 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Refusal(tc.at, tc.qty); got != tc.want {
				t.Fatalf("Refusal = %q, want %q", got, tc.want)
			}
		})
	}
}
