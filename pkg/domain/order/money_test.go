package order_test

import (
	"errors"
	"testing"

	"github.com/seckill/seckill/pkg/domain/order"
)

func TestNewPrice(t *testing.T) {
	cases := []struct {
		name     string
		amount   int64
		currency string
		ok       bool
	}{
		{name: "euros", amount: 1999, currency: "EUR", ok: true},
		{name: "free", amount: 0, currency: "USD", ok: true},
		{name: "the largest", amount: order.MaxUnitPrice, currency: "JPY", ok: true},
		{name: "above the largest", amount: order.MaxUnitPrice + 1, currency: "JPY"},
		{name: "negative", amount: -1, currency: "EUR"},
		{name: "lower case", amount: 1, currency: "eur"},
		{name: "two letters", amount: 1, currency: "EU"},
		{name: "digits", amount: 1, currency: "978"},
		{name: "empty currency", amount: 1, currency: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := order.NewPrice("price", c.amount, c.currency)
			if c.ok != (err == nil) {
				t.Fatalf("NewPrice(%d, %q) = %v, %v", c.amount, c.currency, m, err)
			}
			if err != nil && (!errors.Is(err, order.ErrInvalidArgument) || order.ClientMessage(err) == "") {
				t.Fatalf("error %v is not an invalid argument with a message", err)
			}
			if err == nil && (m.Amount != c.amount || m.Currency != c.currency || !m.Priced()) {
				t.Fatalf("got %+v", m)
			}
		})
	}
}

func TestMoneyTimes(t *testing.T) {
	cases := []struct {
		name string
		unit order.Money
		qty  int
		want order.Money
	}{
		{name: "three", unit: order.Money{Amount: 1999, Currency: "EUR"}, qty: 3, want: order.Money{Amount: 5997, Currency: "EUR"}},
		{name: "free", unit: order.Money{Amount: 0, Currency: "EUR"}, qty: 5, want: order.Money{Amount: 0, Currency: "EUR"}},
		{name: "the largest order", unit: order.Money{Amount: order.MaxUnitPrice, Currency: "EUR"}, qty: order.MaxQuantity,
			want: order.Money{Amount: order.MaxUnitPrice * order.MaxQuantity, Currency: "EUR"}},
		{name: "no price stays none", unit: order.Money{}, qty: 2, want: order.Money{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.unit.Times(c.qty); got != c.want {
				t.Fatalf("%v × %d = %v, want %v", c.unit, c.qty, got, c.want)
			}
		})
	}
}
