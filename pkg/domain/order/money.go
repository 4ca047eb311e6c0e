package order

import (
	"fmt"
	"regexp"
)

// Money is an amount in a currency's minor units (cents for EUR and USD,
// yen for JPY): an integer, never a float. The zero value (no currency)
// means "no price recorded": items, sales and orders made before prices
// existed, or without one.
type Money struct {
	// Amount is in the currency's minor units.
	Amount int64
	// Currency is an ISO 4217 code: three capital letters.
	Currency string
}

// MaxUnitPrice bounds a unit price (minor units) so that a unit price times
// MaxQuantity, and any sum of such amounts, stays far inside int64.
const MaxUnitPrice = 1_000_000_000_000

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// ValidCurrency reports whether c has the shape of an ISO 4217 code.
func ValidCurrency(c string) bool { return currencyRE.MatchString(c) }

// Priced reports whether m is a price (it has a currency).
func (m Money) Priced() bool { return m.Currency != "" }

// Times is the amount of q units at unit price m; no price stays none.
func (m Money) Times(q int) Money {
	if !m.Priced() {
		return Money{}
	}
	return Money{Amount: m.Amount * int64(q), Currency: m.Currency}
}

// String is the amount and its currency, "1999 EUR" (minor units).
func (m Money) String() string {
	if !m.Priced() {
		return "unpriced"
	}
	return fmt.Sprintf("%d %s", m.Amount, m.Currency)
}

// NewPrice checks a unit price given by an operator: amount (minor units)
// from 0 to MaxUnitPrice and an ISO 4217-shaped currency. The error is an
// *Error with ErrInvalidArgument whose message names the field.
func NewPrice(field string, amount int64, currency string) (Money, error) {
	if amount < 0 || amount > MaxUnitPrice {
		return Money{}, Errorf(ErrInvalidArgument, "%s must be an integer of minor units from 0 to %d", field, int64(MaxUnitPrice))
	}
	if !ValidCurrency(currency) {
		return Money{}, Errorf(ErrInvalidArgument, "currency must be an ISO 4217 code of three capital letters, such as EUR")
	}
	return Money{Amount: amount, Currency: currency}, nil
}

// OptionalPrice checks an optional price an operator gives as an amount and
// a currency: both (then as NewPrice does) or neither (a zero Money). field
// names the amount.
func OptionalPrice(field string, amount *int64, currency *string) (Money, error) {
	switch {
	case amount == nil && currency == nil:
		return Money{}, nil
	case amount == nil:
		return Money{}, Errorf(ErrInvalidArgument, "currency goes with %s", field)
	case currency == nil:
		return Money{}, Errorf(ErrInvalidArgument, "%s needs a currency (an ISO 4217 code such as EUR)", field)
	}
	return NewPrice(field, *amount, *currency)
}
