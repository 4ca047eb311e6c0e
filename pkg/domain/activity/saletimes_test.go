package activity

import (
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

func TestCheckSaleTimes(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	year3000 := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		starts, ends time.Time
		ok           bool
	}{
		{"an hour from now", now.Add(time.Hour), now.Add(2 * time.Hour), true},
		{"started an hour ago", now.Add(-time.Hour), now.Add(time.Hour), true},
		{"starts at the furthest lead, lasts the longest", now.Add(MaxLead), now.Add(MaxLead + MaxLength), true},
		{"ends at its start", now, now, false},
		{"ends before its start", now, now.Add(-time.Second), false},
		{"starts a millisecond past the lead", now.Add(MaxLead + time.Millisecond), now.Add(MaxLead + time.Hour), false},
		{"lasts a millisecond too long", now, now.Add(MaxLength + time.Millisecond), false},
		{"ends in the year 3000", now.Add(time.Minute), year3000, false},
		{"a window of centuries in the past", time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTimes(tc.starts, tc.ends, now)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, order.ErrInvalidArgument)) {
				t.Fatalf("CheckSaleTimes: %v, want ok %v (else ErrInvalidArgument)", err, tc.ok)
			}
		})
	}
}

func TestKeyLifetime(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		end   time.Time
		extra time.Duration
		want  time.Duration
		ok    bool
	}{
		{"an hour left, a day past", now.Add(time.Hour), order.KeyMargin, 25 * time.Hour, true},
		{"ended an hour ago", now.Add(-time.Hour), 30 * time.Minute, -30 * time.Minute, true},
		{"ended in the year 1", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), MaxPaymentWindow + order.KeyMargin, 0, true},
		{"the furthest end a sale can have", now.Add(MaxLead + MaxLength), MaxPaymentWindow + order.KeyMargin,
			MaxLead + MaxLength + MaxPaymentWindow + order.KeyMargin, true},
		// time.Time.Sub saturates at about 292 years; adding the window
		// to that wrapped negative before.
		{"the year 3000", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), 30*time.Minute + order.KeyMargin, 0, false},
		{"just past the range", now.Add(MaxLead + MaxLength + time.Millisecond), 0, 0, false},
		{"a negative extra", now.Add(time.Hour), -time.Hour, 0, false},
		{"an extra of centuries", now.Add(time.Hour), 1<<63 - 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := KeyLifetime(tc.end, now, tc.extra)
			if !tc.ok {
				if !errors.Is(err, order.ErrInvalidArgument) {
					t.Fatalf("KeyLifetime: %s %v, want ErrInvalidArgument", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == 0 {
				// Long ended: negative, never wrapped to positive.
				if got >= 0 {
					t.Fatalf("KeyLifetime: %s, want negative", got)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("KeyLifetime: %s, want %s", got, tc.want)
			}
		})
	}
}
