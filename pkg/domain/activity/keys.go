package activity

import (
	"fmt"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// DefaultPaymentWindow is how long a CREATED order of a sale without its
// own payment window may stay unpaid when the programs are not told
// otherwise (SECKILL_PAYMENT_WINDOW).
const DefaultPaymentWindow = 30 * time.Minute

// PaymentWindowOr is how long an order of this activity may stay unpaid:
// the activity's own window, else def (the global one).
func (a Activity) PaymentWindowOr(def time.Duration) time.Duration {
	if a.PaymentWindow > 0 {
		return a.PaymentWindow
	}
	return def
}

// RecordsLiveUntil is when the sale's quota and idempotency records may
// expire: its end plus KeyMargin, so a key accepted during the sale still
// gets its order back after it.
func (a Activity) RecordsLiveUntil() time.Time {
	return a.EndsAt.Add(order.KeyMargin)
}

// KeysLiveUntil is when the sale's item keys (stock or buckets, marker,
// reservations) may expire: its end, plus its payment window (def when it
// has none: the programs' global window), plus KeyMargin. Every key of an
// item is given a lifetime within it.
func (a Activity) KeysLiveUntil(def time.Duration) time.Time {
	return a.EndsAt.Add(a.PaymentWindowOr(def) + order.KeyMargin)
}

// RecordsLifetime is how long from now the sale's quota and idempotency
// records live (until RecordsLiveUntil), range-checked as KeyLifetime is.
func (a Activity) RecordsLifetime(now time.Time) (time.Duration, error) {
	return KeyLifetime(a.EndsAt, now, order.KeyMargin)
}

// KeysLifetime is how long from now the sale's item keys live (until
// KeysLiveUntil with def), range-checked as KeyLifetime is.
func (a Activity) KeysLifetime(now time.Time, def time.Duration) (time.Duration, error) {
	return KeyLifetime(a.EndsAt, now, a.PaymentWindowOr(def)+order.KeyMargin)
}

// maxKeyExtra bounds what KeyLifetime adds past a sale's end.
const maxKeyExtra = MaxLead + MaxLength

// KeyLifetime is how long from now a key must live to outlast end by extra
// (the payment window, KeyMargin, or both): end - now + extra, negative
// when that moment has passed. An end further from now than a sale within
// the range can have (MaxSaleLead + MaxSaleLength), or an extra that is
// negative or as large, is an error (ErrInvalidArgument) rather than a
// lifetime that saturated or wrapped: every key lifetime computed from a
// sale's times goes through here.
func KeyLifetime(end, now time.Time, extra time.Duration) (time.Duration, error) {
	left := end.Sub(now)
	if left > MaxLead+MaxLength {
		return 0, order.Errorf(order.ErrInvalidArgument, "the sale ends at %s, more than %d days from now: outside the range a sale's times may have (starts_at at most %d days ahead, at most %d days long); its keys' lifetime is not computed",
			end.UTC().Format(time.RFC3339), int64((MaxLead+MaxLength)/(24*time.Hour)),
			int64(MaxLead/(24*time.Hour)), int64(MaxLength/(24*time.Hour)))
	}
	if extra < 0 || extra > maxKeyExtra {
		return 0, fmt.Errorf("key lifetime: %s past the end is out of range: %w", extra, order.ErrInvalidArgument)
	}
	// Both terms are bounded (left from below by Sub's saturation at
	// math.MinInt64, which adding a positive extra cannot wrap).
	return left + extra, nil
}
