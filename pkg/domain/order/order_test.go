package order

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestOrderNumbers(t *testing.T) {
	g := NewNumberGenerator()
	prev := ""
	for range 1000 {
		no := g.Next(42)
		if !ValidOrderNo(no) || TagOf(no) != 42 {
			t.Fatalf("bad number %q (item %d)", no, TagOf(no))
		}
		if no <= prev {
			t.Fatalf("not increasing: %q after %q", no, prev)
		}
		prev = no
	}
}

func TestValidOrderNo(t *testing.T) {
	cases := map[string]bool{
		"01JDXYZ0000000000000000000-42":  true,
		"01JDXYZ0000000000000000000-0":   false,
		"01JDXYZ0000000000000000000":     false,
		"01jdxyz0000000000000000000-42":  false,
		"01JDXYZ0000000000000000000-4'2": false,
		"":                               false,
	}
	for s, want := range cases {
		if got := ValidOrderNo(s); got != want {
			t.Errorf("ValidOrderNo(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestEventValidate(t *testing.T) {
	no := NewNumberGenerator().Next(3)
	good := Event{Version: EventVersion, OrderNo: no, IdempotencyKey: "k", UserID: "1", ItemID: 3, ActivityID: 1, Quantity: 1, ReservedAt: time.Now()}
	cases := []struct {
		name string
		mod  func(*Event)
		ok   bool
	}{
		{"good", func(*Event) {}, true},
		{"unknown version", func(e *Event) { e.Version = 99 }, false},
		{"item other than the number's tag (a size of a sale of several)", func(e *Event) { e.ItemID = 4 }, true},
		{"number without a tag", func(e *Event) { e.OrderNo = e.OrderNo[:26] + "-0" }, false},
		{"zero quantity", func(e *Event) { e.Quantity = 0 }, false},
		{"huge quantity", func(e *Event) { e.Quantity = MaxQuantity + 1 }, false},
		{"bad key", func(e *Event) { e.IdempotencyKey = "a b" }, false},
		{"no time", func(e *Event) { e.ReservedAt = time.Time{} }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := good
			tc.mod(&e)
			if err := e.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

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

func TestErrorf(t *testing.T) {
	err := fmt.Errorf("pay order 1 via mysql 10.0.0.3: %w", Errorf(ErrNotPayable, "the order is %s", Closed))
	if !errors.Is(err, ErrNotPayable) || errors.Is(err, ErrNotCancellable) {
		t.Fatalf("errors.Is does not see the code of %v", err)
	}
	if got, want := ClientMessage(err), "order is not payable: the order is CLOSED"; got != want {
		t.Fatalf("ClientMessage = %q, want %q", got, want)
	}
	if got := ClientMessage(fmt.Errorf("%w: redis down", ErrUnavailable)); got != "" {
		t.Fatalf("ClientMessage of a bare sentinel = %q, want none", got)
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
		{"before the start", sale, start.Add(-time.Millisecond), 1, ReasonSaleNotStarted},
		{"at the end", sale, start.Add(time.Hour), 1, ReasonSaleEnded},
		{"after the end", sale, start.Add(2 * time.Hour), 1, ReasonSaleEnded},
		{"above the limit", sale, start.Add(time.Minute), 3, ReasonOverLimit},
		{"ended beats the limit", sale, start.Add(time.Hour), 3, ReasonSaleEnded},
		{"after a cancel", cancelled, start.Add(time.Minute), 1, ReasonSaleCancelled},
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
