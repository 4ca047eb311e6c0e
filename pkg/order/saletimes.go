package order

import (
	"fmt"
	"time"
)

// The range a sale's times must be within. A sale's times set the
// lifetimes of its item's Redis keys (its end plus the payment window plus
// KeyMargin), and time.Time.Sub saturates at about 292 years, after which
// adding the payment window wraps negative: an end in the year 3000 (an
// operator's typo) made every warm-up of it fail. The API refuses times
// outside this range (400 INVALID_ARGUMENT), and KeyLifetime refuses to
// compute a lifetime for a sale outside it (one written to MySQL by hand).
const (
	// MaxSaleLead is how far after now a sale may start: 1,825 days,
	// about five years.
	MaxSaleLead = 1825 * 24 * time.Hour
	// MaxSaleLength is how long a sale may last (ends_at - starts_at):
	// 90 days.
	MaxSaleLength = 90 * 24 * time.Hour
	// MaxPaymentWindow is the longest payment window a sale may have.
	MaxPaymentWindow = 7 * 24 * time.Hour
)

// KeyMargin is how long an item's keys outlive what they serve: quota and
// idempotency records live this long past the sale's end, reservations and
// stock this long past the payment window after it.
const KeyMargin = 24 * time.Hour

// CheckSaleTimes refuses (ErrInvalidArgument) a sale whose times are not
// within the range: ends_at after starts_at, starts_at at most MaxSaleLead
// after now, ends_at at most MaxSaleLength after starts_at.
func CheckSaleTimes(starts, ends, now time.Time) error {
	day := func(d time.Duration) int64 { return int64(d / (24 * time.Hour)) }
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	switch {
	case !ends.After(starts):
		return Errorf(ErrInvalidArgument, "ends_at must be after starts_at (starts_at %s, ends_at %s)", at(starts), at(ends))
	case starts.After(now.Add(MaxSaleLead)):
		return Errorf(ErrInvalidArgument, "starts_at %s is too far ahead: a sale starts at most %d days (about five years) from now",
			at(starts), day(MaxSaleLead))
	case ends.Sub(starts) > MaxSaleLength:
		// Sub saturates rather than wraps, so a window of centuries is
		// still longer than the bound.
		return Errorf(ErrInvalidArgument, "the sale from %s to %s is too long: ends_at is at most %d days after starts_at",
			at(starts), at(ends), day(MaxSaleLength))
	}
	return nil
}

// maxKeyExtra bounds what KeyLifetime adds past a sale's end.
const maxKeyExtra = MaxSaleLead + MaxSaleLength

// KeyLifetime is how long from now a key must live to outlast end by extra
// (the payment window, KeyMargin, or both): end - now + extra, negative
// when that moment has passed. An end further from now than a sale within
// the range can have (MaxSaleLead + MaxSaleLength), or an extra that is
// negative or as large, is an error (ErrInvalidArgument) rather than a
// lifetime that saturated or wrapped: every key lifetime computed from a
// sale's times goes through here.
func KeyLifetime(end, now time.Time, extra time.Duration) (time.Duration, error) {
	left := end.Sub(now)
	if left > MaxSaleLead+MaxSaleLength {
		return 0, Errorf(ErrInvalidArgument, "the sale ends at %s, more than %d days from now: outside the range a sale's times may have (starts_at at most %d days ahead, at most %d days long); its keys' lifetime is not computed",
			end.UTC().Format(time.RFC3339), int64((MaxSaleLead+MaxSaleLength)/(24*time.Hour)),
			int64(MaxSaleLead/(24*time.Hour)), int64(MaxSaleLength/(24*time.Hour)))
	}
	if extra < 0 || extra > maxKeyExtra {
		return 0, fmt.Errorf("key lifetime: %s past the end is out of range: %w", extra, ErrInvalidArgument)
	}
	// Both terms are bounded (left from below by Sub's saturation at
	// math.MinInt64, which adding a positive extra cannot wrap).
	return left + extra, nil
}
