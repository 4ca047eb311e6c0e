// Package draw holds the rules of a draw sale: a sale that takes entries
// for a window instead of orders, then picks its winners at random in a way
// anyone can check from the published record alone.
//
// The scheme, in order:
//
//  1. When the sale is made, a secret seed of 32 random bytes is drawn and
//     only its commitment, SHA-256(seed) in hex, is shown; the commitment
//     is stored apart from the seed and neither changes afterwards.
//  2. Buyers enter from the start until entries_close_at: one entry a buyer,
//     naming a size (item) and a quantity. Each entry gets a random id.
//  3. At entries_close_at the list is frozen. Its digest is SHA-256 of the
//     lines "<entry_id>,<item_id>,<quantity>\n", one an entry, sorted by
//     entry id (byte order), in hex.
//  4. Each entry's key is HMAC-SHA256(key = the seed's 32 bytes, message =
//     the entry id's text). The entries in ascending order of their keys
//     (compared as bytes) are the ranking.
//  5. Walking the ranking from the top, an entry wins when its quantity fits
//     the units of its size not yet won (each size starts with its stock at
//     the draw); every other entry is an alternate of its size, in the same
//     order. Units that come back later (a winner who does not pay, a
//     cancel, a restock) go to the first alternate of that size, in ranking
//     order, whose quantity fits them.
//  6. The record (seed, digest, stock of each size, every entry in ranking
//     order with its outcome) is published; Verify recomputes all of it.
//  7. Each entry's answer carries the commitment: it is the buyer's
//     receipt, and CheckReceipt holds the record to it (the same
//     commitment, the entry in the list), so a record made with another
//     seed, or without an entry, is caught by any buyer who kept theirs.
package draw

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/domain/room"
)

// Seed is the draw's secret: room.Seed (32 random bytes, committed to by
// SHA-256 before the entries).
type Seed = room.Seed

// ParseSeed reads a seed from its hex form.
func ParseSeed(s string) (Seed, error) {
	var seed Seed
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(seed) {
		return seed, errors.New("the seed is not 64 hex digits")
	}
	copy(seed[:], b)
	return seed, nil
}

// The states of a draw, in the order they come.
const (
	StateOpen   = "OPEN"   // entries are taken (from the sale's start)
	StateClosed = "CLOSED" // entries_close_at passed: the list is frozen, not yet drawn
	StateDrawn  = "DRAWN"  // the winners are picked and the record is published
)

// The outcomes of an entry at the draw.
const (
	Won       = "WON"
	Alternate = "ALTERNATE"
)

// Entry is one buyer's entry as the record shows it (no personal data).
type Entry struct {
	ID       string `json:"entry_id"`
	ItemID   int64  `json:"item_id"`
	Quantity int    `json:"quantity"`
}

// Ranked is an entry in the ranking, with its outcome at the draw.
type Ranked struct {
	Entry
	Outcome string `json:"outcome"`
}

// Size is a size's stock when the draw ran.
type Size struct {
	ItemID int64 `json:"item_id"`
	Stock  int64 `json:"stock"`
}

// EntryIDLen is how long an entry id is: 32 lowercase hex digits (16
// random bytes).
const EntryIDLen = 32

// ValidEntryID reports whether id has the form of an entry id.
func ValidEntryID(id string) bool {
	if len(id) != EntryIDLen {
		return false
	}
	for i := range len(id) {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Digest is the frozen list's digest: SHA-256, in hex, of one line
// "<entry_id>,<item_id>,<quantity>\n" an entry, sorted by entry id.
func Digest(entries []Entry) string {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b Entry) int { return strings.Compare(a.ID, b.ID) })
	h := sha256.New()
	var line []byte
	for _, e := range sorted {
		line = digestLine(line[:0], e)
		h.Write(line)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// digestLine appends e's line of the digest to line.
func digestLine(line []byte, e Entry) []byte {
	line = append(line, e.ID...)
	line = append(line, ',')
	line = strconv.AppendInt(line, e.ItemID, 10)
	line = append(line, ',')
	line = strconv.AppendInt(line, int64(e.Quantity), 10)
	return append(line, '\n')
}

// Key is an entry's key in the ranking: HMAC-SHA256(seed, entry id).
func Key(seed Seed, entryID string) [sha256.Size]byte {
	m := hmac.New(sha256.New, seed[:])
	m.Write([]byte(entryID))
	var k [sha256.Size]byte
	m.Sum(k[:0])
	return k
}

// Ranker ranks a draw's entries under its seed against each size's stock
// (Pick).
type Ranker func(seed Seed, entries []Entry, stock map[int64]int64) []Ranked

// Pick ranks entries by their keys under seed and gives each its outcome
// against stock, the units of each size (by item id): the whole draw.
// Equal keys (a 2⁻²⁵⁶ chance) fall back to the entry ids.
func Pick(seed Seed, entries []Entry, stock map[int64]int64) []Ranked {
	type keyed struct {
		key [sha256.Size]byte
		e   Entry
	}
	ks := make([]keyed, len(entries))
	for i, e := range entries {
		ks[i] = keyed{Key(seed, e.ID), e}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := bytes.Compare(a.key[:], b.key[:]); c != 0 {
			return c
		}
		return strings.Compare(a.e.ID, b.e.ID)
	})
	left := make(map[int64]int64, len(stock))
	for id, n := range stock {
		left[id] = n
	}
	out := make([]Ranked, len(ks))
	for i, k := range ks {
		out[i] = Ranked{Entry: k.e, Outcome: Alternate}
		if q := int64(k.e.Quantity); q <= left[k.e.ItemID] {
			left[k.e.ItemID] -= q
			out[i].Outcome = Won
		}
	}
	return out
}

// Restock is units added to a size, as its restock recorded them: the
// record lists those from the sale's start to the draw, which moved the
// stock the draw gave out (Sizes), so an auditor sees when and how much.
type Restock struct {
	ItemID   int64     `json:"item_id"`
	Quantity int64     `json:"quantity"`
	At       time.Time `json:"at"`
}

// Record is a sale's draw as GET /api/v1/activities/{id}/draw publishes
// it. Seed, Digest, Sizes, Restocks and Entries are there once the state
// is DRAWN.
type Record struct {
	ActivityID int64  `json:"activity_id"`
	State      string `json:"state"`
	Commitment string `json:"commitment"`
	Seed       string `json:"seed,omitempty"`
	Digest     string `json:"entries_digest,omitempty"`
	// Sizes is each size's stock when the draw ran, in the sale's order.
	Sizes []Size `json:"sizes,omitempty"`
	// Restocks are the restocks of the sizes recorded from the sale's
	// start to the draw, in time order (information: Verify recomputes
	// nothing from them).
	Restocks []Restock `json:"restocks,omitempty"`
	// Entries is every entry, in ranking order.
	Entries []Ranked `json:"entries,omitempty"`
}

// Verify recomputes rec from what it publishes: the commitment from the
// seed, the digest from the entries, the ranking from the seed and the
// entry ids, and each entry's outcome from the ranking and the sizes'
// stock. It returns every mismatch it found, joined; nil when the record
// holds. A record too large to hold is checked the same way by a Verifier
// as it is read (Verifier.Read).
func Verify(rec Record) error {
	v := NewVerifier()
	v.Head(rec)
	for _, e := range rec.Entries {
		v.Add(e)
	}
	return v.Err()
}

// Receipt is what a buyer keeps of their entry: the entry's answer as they
// received it (POST /api/v1/activities/{id}/entries or GET .../entries/me),
// which names the entry and the commitment the sale was made with. Other
// fields of the answer are ignored.
type Receipt struct {
	EntryID    string `json:"entry_id"`
	ActivityID int64  `json:"activity_id"`
	ItemID     int64  `json:"item_id"`
	Quantity   int    `json:"quantity"`
	Commitment string `json:"commitment"`
}

// Check reports whether r has what a receipt needs: an entry id and the
// commitment it was answered with.
func (r Receipt) Check() error {
	if !ValidEntryID(r.EntryID) || r.Commitment == "" {
		return fmt.Errorf("not an entry's receipt: it needs entry_id (%d hex digits) and commitment", EntryIDLen)
	}
	return nil
}

// CheckReceipt holds rec to a buyer's receipt: the same sale, the same
// commitment (fixed when the sale was made, so a record whose commitment
// differs is not the draw the buyer entered), and, once drawn, the entry
// in the ranking with its item and quantity. It returns every breach,
// joined; nil when the record keeps the receipt.
func (rec Record) CheckReceipt(r Receipt) error {
	var found *Entry
	if i := slices.IndexFunc(rec.Entries, func(e Ranked) bool { return e.ID == r.EntryID }); i >= 0 {
		found = &rec.Entries[i].Entry
	}
	return checkReceipt(rec, r, found)
}

// checkReceipt holds rec to r, whose entry rec lists first as found (nil:
// not listed).
func checkReceipt(rec Record, r Receipt, found *Entry) error {
	if err := r.Check(); err != nil {
		return err
	}
	var errs []error
	if r.ActivityID != rec.ActivityID {
		errs = append(errs, fmt.Errorf("entry %s is of activity %d, the record of activity %d", r.EntryID, r.ActivityID, rec.ActivityID))
	}
	if r.Commitment != rec.Commitment {
		errs = append(errs, fmt.Errorf("commitment: entry %s was answered with %s, the record says %s", r.EntryID, r.Commitment, rec.Commitment))
	}
	if rec.State != StateDrawn {
		return errors.Join(errs...)
	}
	switch {
	case found == nil:
		errs = append(errs, fmt.Errorf("entry %s (item %d, quantity %d) is missing from the record", r.EntryID, r.ItemID, r.Quantity))
	case found.ItemID != r.ItemID || found.Quantity != r.Quantity:
		errs = append(errs, fmt.Errorf("entry %s was answered for item %d, quantity %d; the record lists item %d, quantity %d",
			r.EntryID, r.ItemID, r.Quantity, found.ItemID, found.Quantity))
	}
	return errors.Join(errs...)
}

// NewSeed draws a seed from the system's random source.
func NewSeed() Seed { return room.NewSeed() }
