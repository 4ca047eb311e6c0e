package order

import "strings"

const (
	// drawKeyPrefix starts the idempotency key of a draw entry's order.
	// ':' is outside a buyer's key alphabet (ValidIdempotencyKey), so no
	// buyer's request can carry one: a buyer who sent the entry's key in
	// another sale would otherwise hold it, and the entry's order with it.
	drawKeyPrefix = "draw:"
	// legacyDrawKeyPrefix is the form the drawer's keys had before, a
	// valid buyer key: orders of draws reserved before the upgrade keep it.
	legacyDrawKeyPrefix = "draw-"
)

// DrawKey is the idempotency key of the order the drawer makes for the
// draw entry entryID: one order an entry, whatever number a retry brings.
func DrawKey(entryID string) string { return drawKeyPrefix + entryID }

// LegacyDrawKey is DrawKey in the form before (see legacyDrawKeyPrefix):
// the key an entry's order reserved before the upgrade may hold.
func LegacyDrawKey(entryID string) string { return legacyDrawKeyPrefix + entryID }

// DrawEntryOf returns the entry a drawer's key names, in either form, and
// whether k is one. A key of the old form may also be a buyer's.
func DrawEntryOf(k string) (string, bool) {
	if e, ok := strings.CutPrefix(k, drawKeyPrefix); ok {
		return e, true
	}
	return strings.CutPrefix(k, legacyDrawKeyPrefix)
}

// ValidEventKey reports whether k may key an order's event: a buyer's key
// (ValidIdempotencyKey) or the drawer's (DrawKey of an id of a buyer key's
// characters), at most 64 bytes either way, as MySQL keeps it.
func ValidEventKey(k string) bool {
	if e, ok := strings.CutPrefix(k, drawKeyPrefix); ok {
		return len(k) <= 64 && ValidIdempotencyKey(e)
	}
	return ValidIdempotencyKey(k)
}
