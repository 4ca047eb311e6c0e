package activity

import (
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// The range a sale's times must be within. A sale's times set the
// lifetimes of its item's Redis keys (its end plus the payment window plus
// KeyMargin), and time.Time.Sub saturates at about 292 years, after which
// adding the payment window wraps negative: an end in the year 3000 (an
// operator's typo) made every warm-up of it fail. The API refuses times
// outside this range (400 INVALID_ARGUMENT), and KeyLifetime refuses to
// compute a lifetime for a sale outside it (one written to MySQL by hand).
const (
	// MaxLead is how far after now a sale may start: 1,825 days,
	// about five years.
	MaxLead = 1825 * 24 * time.Hour
	// MaxLength is how long a sale may last (ends_at - starts_at):
	// 90 days.
	MaxLength = 90 * 24 * time.Hour
	// MaxPaymentWindow is the longest payment window a sale may have.
	MaxPaymentWindow = 7 * 24 * time.Hour
)

// CheckTimes refuses (ErrInvalidArgument) a sale whose times are not
// within the range: ends_at after starts_at, starts_at at most MaxSaleLead
// after now, ends_at at most MaxSaleLength after starts_at.
func CheckTimes(starts, ends, now time.Time) error {
	day := func(d time.Duration) int64 { return int64(d / (24 * time.Hour)) }
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	switch {
	case !ends.After(starts):
		return order.Errorf(order.ErrInvalidArgument, "ends_at must be after starts_at (starts_at %s, ends_at %s)", at(starts), at(ends))
	case starts.After(now.Add(MaxLead)):
		return order.Errorf(order.ErrInvalidArgument, "starts_at %s is too far ahead: a sale starts at most %d days (about five years) from now",
			at(starts), day(MaxLead))
	case ends.Sub(starts) > MaxLength:
		// Sub saturates rather than wraps, so a window of centuries is
		// still longer than the bound.
		return order.Errorf(order.ErrInvalidArgument, "the sale from %s to %s is too long: ends_at is at most %d days after starts_at",
			at(starts), at(ends), day(MaxLength))
	}
	return nil
}
