package httpapi

import (
	"bytes"
	"encoding/json"

	"github.com/seckill/seckill/pkg/domain/order"
)

// optional is a body field that may be left out but, when given, must be
// a value of T: unlike a pointer field, an explicit null is told apart from
// "left out", so that refuseNull can refuse it by name.
type optional[T any] struct {
	Set   bool
	Null  bool
	Value T
}

// UnmarshalJSON records the value, or that it was null.
func (o *optional[T]) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Null = true
		return nil
	}
	if err := json.Unmarshal(b, &o.Value); err != nil {
		return err
	}
	o.Set = true
	return nil
}

// ptr is the value's address, nil when the field was left out.
func (o optional[T]) ptr() *T {
	if !o.Set {
		return nil
	}
	return &o.Value
}

func (o optional[T]) null() bool { return o.Null }

// MarshalJSON writes the value, or null; with the omitzero option a field
// left out stays out.
func (o optional[T]) MarshalJSON() ([]byte, error) {
	if !o.Set {
		return []byte("null"), nil
	}
	return json.Marshal(o.Value)
}

// field is an optional body field and its JSON name.
type field struct {
	name string
	f    interface{ null() bool }
}

// refuseNull is an invalid-argument error naming the first field given as
// null, or nil.
func refuseNull(fields ...field) error {
	for _, f := range fields {
		if f.f.null() {
			return order.Errorf(order.ErrInvalidArgument, "%s must not be null: leave it out instead", f.name)
		}
	}
	return nil
}
