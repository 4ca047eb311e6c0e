package orderdb

import (
	"context"

	"gorm.io/gorm"
)

// conn is the pool the stores share. A store's statement runs in the unit
// of work its context carries (DB.InTx), or on its own when there is none;
// a store method that opens a transaction of its own opens a savepoint
// inside the unit instead, so it still fails as a whole and the unit
// commits or rolls back everything written in it.
type conn struct{ gdb *gorm.DB }

// unitKey finds a unit of work of the pool gdb in a context (a context
// may carry units of several pools: tests open more than one).
type unitKey struct{ gdb *gorm.DB }

// db is the handle a store's statements run on for ctx.
func (c conn) db(ctx context.Context) *gorm.DB {
	if tx, ok := ctx.Value(unitKey(c)).(*gorm.DB); ok {
		return tx.WithContext(ctx)
	}
	return c.gdb.WithContext(ctx)
}

// InTx runs fn as one unit of work: every store call fn makes with the
// context it is given runs in one MySQL transaction, which commits when fn
// returns nil and rolls back when it returns an error (that error is
// returned as it is). A service uses it to own its transaction boundary:
// the state change its store makes and any row written beside it (an
// event, a record) commit together or not at all. Inside another unit, fn
// runs in a savepoint of it.
//
// A unit's reads see its own writes; a plain read is a consistent read
// (from the unit's first one), so a store that must see rows committed
// since locks them. Begin and commit failures wrap order.ErrUnavailable: a
// failed commit may or may not have committed, as a lost answer to any
// statement.
func (db *DB) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	c := conn{db.gdb}
	var fnErr error
	err := c.db(ctx).Transaction(func(tx *gorm.DB) error {
		fnErr = fn(context.WithValue(ctx, unitKey{db.gdb}, tx))
		return fnErr
	})
	if err != nil && fnErr == nil {
		return wrap("run a unit of work", err)
	}
	return err
}
