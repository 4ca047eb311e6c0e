package activity_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Which sales of an item block another: overlapping windows of a sale that
// is neither cancelled nor over; windows that only touch do not overlap.
func TestCheckOneOwner(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	h := func(n int) time.Time { return now.Add(time.Duration(n) * time.Hour) }
	sale := activity.Activity{ID: 9, StartsAt: h(1), EndsAt: h(3)}
	for _, tc := range []struct {
		name    string
		other   activity.Activity
		refused bool
	}{
		{"inside", activity.Activity{ID: 1, StartsAt: h(2), EndsAt: h(2).Add(time.Minute)}, true},
		{"around", activity.Activity{ID: 1, StartsAt: h(0), EndsAt: h(4)}, true},
		{"overlapping its start", activity.Activity{ID: 1, StartsAt: h(0), EndsAt: h(1).Add(time.Millisecond)}, true},
		{"overlapping its end", activity.Activity{ID: 1, StartsAt: h(3).Add(-time.Millisecond), EndsAt: h(5)}, true},
		{"live now", activity.Activity{ID: 1, StartsAt: h(-1), EndsAt: h(2)}, true},
		{"ending when it starts", activity.Activity{ID: 1, StartsAt: h(0), EndsAt: h(1)}, false},
		{"starting when it ends", activity.Activity{ID: 1, StartsAt: h(3), EndsAt: h(4)}, false},
		{"itself", activity.Activity{ID: 9, StartsAt: h(0), EndsAt: h(4)}, false},
		{"cancelled", activity.Activity{ID: 1, StartsAt: h(-1), EndsAt: h(4), CancelledAt: h(-1)}, false},
		{"over", activity.Activity{ID: 1, StartsAt: h(-2), EndsAt: now}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The sale itself may start in the past, as a sale may.
			s := sale
			if tc.name == "over" {
				s.StartsAt = h(-1)
			}
			err := activity.CheckOneOwner(s, 7, []activity.Activity{tc.other}, now)
			if tc.refused != errors.Is(err, activity.ErrItemInAnotherActivity) || !tc.refused && err != nil {
				t.Fatalf("%v, want refused %v", err, tc.refused)
			}
			if m := order.ClientMessage(err); tc.refused && (!strings.Contains(m, "item 7 ") || !strings.Contains(m, "sale 1 ")) {
				t.Fatalf("message %q does not name item 7 and sale 1", m)
			}
		})
	}
}

// The drawer's key is one no buyer can send, and the event takes it; the
// form before is still read as the drawer's.
func TestDrawKey(t *testing.T) {
	const entry = "0123456789abcdef0123456789abcdef"
	k := order.DrawKey(entry)
	if order.ValidIdempotencyKey(k) {
		t.Fatalf("a buyer may send the drawer's key %q", k)
	}
	for _, c := range []struct {
		key   string
		valid bool
	}{
		{k, true}, {order.LegacyDrawKey(entry), true}, {"buyer-key_1", true},
		{"draw:", false}, {"draw:" + entry + "/x", false}, {"draw:" + entry + entry, false}, {"x:y", false},
	} {
		if order.ValidEventKey(c.key) != c.valid {
			t.Errorf("ValidEventKey(%q) = %v", c.key, !c.valid)
		}
	}
	for _, key := range []string{k, order.LegacyDrawKey(entry)} {
		if got, ok := order.DrawEntryOf(key); !ok || got != entry {
			t.Errorf("DrawEntryOf(%q) = %q %v", key, got, ok)
		}
	}
	if _, ok := order.DrawEntryOf("buyer-key"); ok {
		t.Error("a buyer's key read as the drawer's")
	}
}
