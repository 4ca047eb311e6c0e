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
