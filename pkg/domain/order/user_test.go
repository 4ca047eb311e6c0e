package order

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestValidUserID(t *testing.T) {
	cases := []struct {
		name string
		id   string
		ok   bool
	}{
		{"number", "1001", true},
		{"UUID", "f3a1c9e2-7d4b-4c1e-9a63-2b8f0e5d7c41", true},
		{"Auth0", "auth0|65ab12", true},
		{"braces and colons", "{i1}:q:1", true},
		{"128 characters", strings.Repeat("ü", 128), true},
		{"129 characters", strings.Repeat("u", 129), false},
		{"empty", "", false},
		{"not UTF-8", "a\xffb", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidUserID(tc.id); got != tc.ok {
				t.Fatalf("ValidUserID(%q) = %v", tc.id, got)
			}
		})
	}
}

func TestNumericUserID(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "1001": 1001, "9223372036854775807": 1<<63 - 1,
		"0": 0, "01": 0, "+1": 0, "-1": 0, " 1": 0, "1a": 0, "9223372036854775808": 0, "": 0} {
		got, ok := NumericUserID(in)
		if got != want || ok != (want > 0) {
			t.Errorf("NumericUserID(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
}

// A numeric buyer's event carries user_id as a number, as before ids were
// strings (a consumer of the previous release still reads it); any other
// id as a string. Both come back as they went.
func TestEventUserIDOnTheWire(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ user, wire string }{
		{"1001", `"user_id":1001`},
		{"01001", `"user_id":"01001"`},
		{"auth0|65ab{i1}:q", `"user_id":"auth0|65ab{i1}:q"`},
	} {
		e := Event{Version: EventVersion, OrderNo: "01KB0000000000000000000000-3", IdempotencyKey: "k",
			UserID: tc.user, ItemID: 3, ActivityID: 4, Quantity: 1, ReservedAt: at, RequestID: "r"}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.wire) {
			t.Fatalf("%q encoded as %s, want %s in it", tc.user, b, tc.wire)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil || back != e {
			t.Fatalf("decoded %+v, %v; want %+v", back, err, e)
		}
	}
	// An event the previous release wrote.
	var old Event
	err := json.Unmarshal([]byte(`{"v":1,"order_no":"01KB0000000000000000000000-3","idempotency_key":"k","user_id":42,
		"item_id":3,"activity_id":4,"quantity":1,"reserved_at":"2026-11-30T12:00:00Z"}`), &old)
	if err != nil || old.UserID != "42" || old.Validate() != nil {
		t.Fatalf("old event: %+v, %v, %v", old, err, old.Validate())
	}
	// A bad user_id or another field of the wrong type is an error, and
	// what decodes is kept (the router releases a dead letter's
	// reservation with it).
	for _, bad := range []string{`{"user_id":4.5`, `{"user_id":{}`, `{"user_id":[1]`, `{"user_id":"u","quantity":"two"`} {
		var e Event
		err := json.Unmarshal([]byte(bad+`,"order_no":"01KB0000000000000000000000-3","item_id":3}`), &e)
		if err == nil || e.OrderNo != "01KB0000000000000000000000-3" || e.ItemID != 3 {
			t.Errorf("%s decoded as %+v, %v; want an error and the order number and item kept", bad, e, err)
		}
	}
}
