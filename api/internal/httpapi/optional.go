package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
)

// optional is a body field that may be left out but, when given, must be
// a value of T: unlike a pointer field, an explicit null is refused rather
// than read as "left out".
type optional[T any] struct {
	Set   bool
	Value T
}

var errNull = errors.New("a field that is given must not be null")

// UnmarshalJSON records the value; null is an error.
func (o *optional[T]) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return errNull
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
