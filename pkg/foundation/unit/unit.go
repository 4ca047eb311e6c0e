// Package unit names the unit of work a service runs a state change in:
// the store offers it (orderdb.DB.InTx), the service draws its boundary,
// so whatever else must commit with the change (a record, an event) is
// written in the same transaction or not at all.
package unit

import "context"

// Work runs fn as one transaction: the store calls fn makes with the
// context it is given commit when fn returns nil and roll back when it
// returns an error, which InTx returns. Inside another unit, fn runs in a
// savepoint of it.
type Work interface {
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
}

// Do runs fn in a unit of w and returns what fn returned (the zero value
// when the unit did not commit).
func Do[T any](ctx context.Context, w Work, fn func(ctx context.Context) (T, error)) (T, error) {
	var out T
	err := w.InTx(ctx, func(ctx context.Context) error {
		v, err := fn(ctx)
		out = v
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}
