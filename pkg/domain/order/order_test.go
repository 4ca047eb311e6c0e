package order

import (
	"errors"
	"fmt"
	"strings"
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
		{"a code's digest", func(e *Event) { e.AccessCode = "0123456789abcdef0123456789abcdef" }, true},
		{"a code's digest too short", func(e *Event) { e.AccessCode = "0123456789abcdef" }, false},
		{"a code given as typed, not its digest", func(e *Event) { e.AccessCode = "ABCD-EFGH-JKMN-PQRS-TVWX-YZ012345" }, false},
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

// The code's digest travels in the event's JSON, and an event without one
// writes none (an older consumer reads it as it always did).
func TestEventAccessCodeOnTheWire(t *testing.T) {
	e := Event{Version: EventVersion, OrderNo: NewNumberGenerator().Next(3), IdempotencyKey: "k", UserID: "1", ItemID: 3,
		ActivityID: 1, Quantity: 1, ReservedAt: time.Now().UTC(), AccessCode: "0123456789abcdef0123456789abcdef"}
	b, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Event
	if err := back.UnmarshalJSON(b); err != nil || back.AccessCode != e.AccessCode {
		t.Fatalf("read back %+v, %v from %s", back, err, b)
	}
	e.AccessCode = ""
	if b, _ := e.MarshalJSON(); strings.Contains(string(b), "access_code") {
		t.Fatalf("an event without a code writes %s", b)
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
