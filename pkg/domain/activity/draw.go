package activity

import (
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

// The ways a sale sells, as the API names them.
const (
	ModeFirstCome = "first_come"
	ModeDraw      = "draw"
)

// Draw is a draw sale's settings (package draw has its rules): buyers
// enter from StartsAt until EntriesCloseAt instead of ordering, and the
// draw then gives the stock to entries picked at random; the winners (and
// the alternates the stock comes back to) buy until EndsAt. The zero value
// is a first-come sale.
type Draw struct {
	EntriesCloseAt time.Time
	// Seed ranks the entries (draw.Seed); the seed itself is public once
	// the draw ran.
	Seed [32]byte
	// Commitment is SHA-256 of the seed, in hex, as it was when the sale
	// was made: public from then on, stored apart from the seed and never
	// changed, so a seed changed afterwards no longer matches it.
	Commitment string
}

// On reports whether the sale is a draw.
func (d Draw) On() bool { return !d.EntriesCloseAt.IsZero() }

// Mode names how the sale sells as the API does: ModeDraw for a draw,
// ModeFirstCome otherwise (a sale with a waiting room included).
func (a Activity) Mode() string {
	if a.Selling() == SellsByDraw {
		return ModeDraw
	}
	return ModeFirstCome
}

// NewDraw is the draw an operator asked for: mode is "" or ModeFirstCome
// (no draw, and then closes must be nil) or ModeDraw (closes required).
// Its seed is drawn when it is stored.
func NewDraw(mode string, closes *time.Time) (Draw, error) {
	switch mode {
	case "", ModeFirstCome:
		if closes != nil {
			return Draw{}, order.Errorf(order.ErrInvalidArgument, `entries_close_at is for a draw: give "mode": "draw" with it`)
		}
		return Draw{}, nil
	case ModeDraw:
		if closes == nil || closes.IsZero() {
			return Draw{}, order.Errorf(order.ErrInvalidArgument, "a draw needs entries_close_at (RFC 3339): when its entries close and its winners are drawn")
		}
		return Draw{EntriesCloseAt: *closes}, nil
	}
	return Draw{}, order.Errorf(order.ErrInvalidArgument, `mode must be "first_come" or "draw"`)
}

// CheckDraw checks the sale's draw against its other settings, at now (the
// shared clock's time when the sale is made), its payment window being
// its own or def (the programs' window).
func (a Activity) CheckDraw(now time.Time, def time.Duration) error {
	c := a.Draw.EntriesCloseAt
	w := a.PaymentWindowOr(def)
	switch {
	case !a.Draw.On():
		return nil
	case a.Room.On():
		return order.Errorf(order.ErrInvalidArgument, "a draw has no waiting room: nobody races to buy, so leave waiting_room out")
	case a.StockBuckets > 1:
		return order.Errorf(order.ErrInvalidArgument, "a draw keeps one stock key an item: leave stock_buckets out")
	case !c.After(now):
		return order.Errorf(order.ErrInvalidArgument, "entries_close_at must be in the future")
	case !c.After(a.StartsAt):
		return order.Errorf(order.ErrInvalidArgument, "entries_close_at must be after starts_at: entries open at the start")
	case !c.Before(a.EndsAt):
		// The winners buy within the sale: the consumer refuses an order
		// reserved at or after ends_at.
		return order.Errorf(order.ErrInvalidArgument, "entries_close_at must be before ends_at: the winners and alternates buy between the two")
	case a.EndsAt.Sub(c) < w:
		// The draw runs at the close and its winners' orders are made
		// within seconds: each must have its whole window to pay before
		// the sale ends.
		return order.Errorf(order.ErrInvalidArgument, "entries_close_at must leave at least the payment window (%s) before ends_at, so the winners have it to pay: it is %s before",
			w, a.EndsAt.Sub(c))
	}
	return nil
}

// EntriesOpenAt reports whether the draw takes entries at t: from the
// start, before entries_close_at, while the sale has not ended.
func (a Activity) EntriesOpenAt(t time.Time) bool {
	return a.Draw.On() && a.ActiveAt(t) && t.Before(a.Draw.EntriesCloseAt)
}

// DrawDueAt reports whether the draw is to be run at t: its entries have
// closed and the sale is still on (a sale ended or cancelled before its
// draw is not drawn: its winners could not buy).
func (a Activity) DrawDueAt(t time.Time) bool {
	return a.Draw.On() && !t.Before(a.Draw.EntriesCloseAt) && t.Before(a.EndsAt) && a.CancelledAt.IsZero()
}
