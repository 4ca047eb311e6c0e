package draw

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Verifier checks a drawn record as its entries come, one at a time, so a
// record of a million entries is checked without holding it: what Verify
// answers for a record, a Verifier answers for the same record given as
// its head (Head) and its entries in order (Add).
//
// The ranking is sorted by a key each entry has on its own, so while the
// head came first (as the api writes it) the ranking is checked as a
// running comparison with the entry before, and each outcome against
// running counts of each size's units left. The digest, though, hashes
// the list sorted by entry id, which the ranking is not: the Verifier
// keeps each entry packed (its id's 16 bytes, its item, quantity and
// outcome, 32 bytes against about 100 of JSON) and sorts them at the end.
// A record whose ranking is out of order, or whose head came after its
// entries, is ranked again from those, as Verify ranks it, so its
// messages are Verify's.
type Verifier struct {
	head    Record
	hasHead bool
	// lateHead: the head changed after the first entry, so the running
	// check was made against another head, or none.
	lateHead bool

	// running is true while every entry so far was in ranking order under
	// the head's seed; key and id are the last entry's, left each size's
	// units not yet won, outcomes the outcomes found wrong on the way.
	running  bool
	seed     Seed
	key      [sha256.Size]byte
	id       string
	left     map[int64]int64
	outcomes []error

	list []packed
	// odd holds, by position, the entries that do not pack (an id not
	// of 32 lowercase hex digits, a quantity or outcome out of range):
	// only a tampered record has any.
	odd map[int]Ranked
	won int

	receipts []Receipt
	// found is, by the receipts' entry ids, each one's entry as first
	// listed; nil while missing.
	found map[string]*Entry
}

// packed is an entry of the list in 32 bytes.
type packed struct {
	id       [EntryIDLen / 2]byte
	item     int64
	quantity int32
	outcome  uint8 // packedWon, packedAlternate, or packedOdd (in odd)
}

const (
	packedWon = iota
	packedAlternate
	packedOdd
)

// NewVerifier is a Verifier that also holds the record to each receipt
// (Record.CheckReceipt): each is looked for as the entries pass.
func NewVerifier(receipts ...Receipt) *Verifier {
	v := &Verifier{receipts: receipts, found: make(map[string]*Entry, len(receipts))}
	for _, r := range receipts {
		v.found[r.EntryID] = nil
	}
	return v
}

// Head gives the record's fields but its entries (any rec has are not
// looked at). It may come after entries, as a saved record may list its
// fields in any order.
func (v *Verifier) Head(rec Record) {
	rec.Entries = nil
	v.head, v.hasHead = rec, true
	if len(v.list) > 0 {
		v.lateHead = true
	}
}

// Add takes the next entry of the ranking.
func (v *Verifier) Add(e Ranked) {
	pos := len(v.list)
	if pos == 0 {
		v.start()
	}
	if v.running {
		v.rank(pos, e)
	}
	if f, ok := v.found[e.ID]; ok && f == nil {
		v.found[e.ID] = &Entry{ID: e.ID, ItemID: e.ItemID, Quantity: e.Quantity}
	}
	if e.Outcome == Won {
		v.won++
	}
	p := packed{item: e.ItemID, quantity: int32(e.Quantity), outcome: packedOdd}
	switch e.Outcome {
	case Won:
		p.outcome = packedWon
	case Alternate:
		p.outcome = packedAlternate
	}
	if !ValidEntryID(e.ID) || e.Quantity < math.MinInt32 || e.Quantity > math.MaxInt32 || p.outcome == packedOdd {
		p.outcome = packedOdd
		if v.odd == nil {
			v.odd = map[int]Ranked{}
		}
		v.odd[pos] = e
	} else {
		hex.Decode(p.id[:], []byte(e.ID))
	}
	v.list = append(v.list, p)
}

// start begins the running check at the first entry, when the head is
// there and names a drawn record with a seed.
func (v *Verifier) start() {
	if !v.hasHead || v.head.State != StateDrawn {
		return
	}
	seed, err := ParseSeed(v.head.Seed)
	if err != nil {
		return
	}
	v.running, v.seed = true, seed
	v.left = make(map[int64]int64, len(v.head.Sizes))
	for _, s := range v.head.Sizes {
		v.left[s.ItemID] = s.Stock
	}
}

// rank checks the entry at pos against the one before it (Pick's order:
// ascending keys, then ids) and its outcome against the units left.
func (v *Verifier) rank(pos int, e Ranked) {
	k := Key(v.seed, e.ID)
	if pos > 0 {
		c := bytes.Compare(v.key[:], k[:])
		if c > 0 || c == 0 && v.id > e.ID {
			v.running, v.outcomes, v.left = false, nil, nil
			return
		}
	}
	v.key, v.id = k, e.ID
	want := Alternate
	if q := int64(e.Quantity); q <= v.left[e.ItemID] {
		v.left[e.ItemID] -= q
		want = Won
	}
	if e.Outcome != want {
		v.outcomes = append(v.outcomes, fmt.Errorf("rank %d, entry %s: the draw makes it %s, the record says %s", pos+1, e.ID, want, e.Outcome))
	}
}

// entry is the entry at pos as it was given.
func (v *Verifier) entry(pos int) Ranked {
	p := v.list[pos]
	if p.outcome == packedOdd {
		return v.odd[pos]
	}
	out := Ranked{Entry: Entry{ID: hex.EncodeToString(p.id[:]), ItemID: p.item, Quantity: int(p.quantity)}, Outcome: Won}
	if p.outcome == packedAlternate {
		out.Outcome = Alternate
	}
	return out
}

// Entries is how many entries were given, and how many of them say WON.
func (v *Verifier) Entries() (entries, won int) { return len(v.list), v.won }

// Err is Verify's answer for the record given: every mismatch, joined;
// nil when it holds.
func (v *Verifier) Err() error {
	rec := v.head
	if rec.State != StateDrawn {
		return fmt.Errorf("the draw is %s, not %s: there is nothing to verify yet", rec.State, StateDrawn)
	}
	seed, err := ParseSeed(rec.Seed)
	if err != nil {
		return err
	}
	var errs []error
	if got := seed.Commitment(); got != rec.Commitment {
		errs = append(errs, fmt.Errorf("commitment: SHA-256 of the seed is %s, the record says %s", got, rec.Commitment))
	}
	digest, twice := v.digest()
	errs = append(errs, twice...)
	if digest != rec.Digest {
		errs = append(errs, fmt.Errorf("entries_digest: the entries hash to %s, the record says %s", digest, rec.Digest))
	}
	if v.running && !v.lateHead {
		errs = append(errs, v.outcomes...)
	} else {
		errs = append(errs, v.rankAgain(seed)...)
	}
	return errors.Join(errs...)
}

// digest hashes the list sorted by entry id (Digest), and names each
// entry listed again after its first place, in the order of the list.
func (v *Verifier) digest() (string, []error) {
	order := make([]int32, len(v.list))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := v.compareIDs(int(a), int(b)); c != 0 {
			return c
		}
		return int(a - b)
	})
	h := sha256.New()
	var line []byte
	var again []int32
	for i, pos := range order {
		e := v.entry(int(pos))
		if i > 0 && v.compareIDs(int(order[i-1]), int(pos)) == 0 {
			again = append(again, pos)
		}
		line = digestLine(line[:0], e.Entry)
		h.Write(line)
	}
	slices.Sort(again)
	twice := make([]error, len(again))
	for i, pos := range again {
		twice[i] = fmt.Errorf("entry %s is listed twice", v.entry(int(pos)).ID)
	}
	return hex.EncodeToString(h.Sum(nil)), twice
}

// compareIDs compares the ids of the entries at a and b as strings (the
// packed bytes compare as their lowercase hex does).
func (v *Verifier) compareIDs(a, b int) int {
	if v.list[a].outcome != packedOdd && v.list[b].outcome != packedOdd {
		return bytes.Compare(v.list[a].id[:], v.list[b].id[:])
	}
	return strings.Compare(v.entry(a).ID, v.entry(b).ID)
}

// rankAgain ranks the list under seed as Pick does and compares it with
// the list's order, place by place, as Verify does.
func (v *Verifier) rankAgain(seed Seed) []error {
	type keyed struct {
		key [sha256.Size]byte
		pos int32
	}
	ks := make([]keyed, len(v.list))
	for i := range ks {
		ks[i] = keyed{Key(seed, v.entry(i).ID), int32(i)}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := bytes.Compare(a.key[:], b.key[:]); c != 0 {
			return c
		}
		return v.compareIDs(int(a.pos), int(b.pos))
	})
	left := make(map[int64]int64, len(v.head.Sizes))
	for _, s := range v.head.Sizes {
		left[s.ItemID] = s.Stock
	}
	var errs []error
	ranked := 0
	for i, k := range ks {
		w, got := v.entry(int(k.pos)), v.entry(i)
		w.Outcome = Alternate
		if q := int64(w.Quantity); q <= left[w.ItemID] {
			left[w.ItemID] -= q
			w.Outcome = Won
		}
		switch {
		case got.ID != w.ID:
			if ranked < 5 {
				errs = append(errs, fmt.Errorf("rank %d: the seed ranks entry %s there, the record lists %s", i+1, w.ID, got.ID))
			}
			ranked++
		case got.Outcome != w.Outcome:
			errs = append(errs, fmt.Errorf("rank %d, entry %s: the draw makes it %s, the record says %s", i+1, w.ID, w.Outcome, got.Outcome))
		}
	}
	if ranked > 5 {
		errs = append(errs, fmt.Errorf("%d entries in all are out of their rank", ranked))
	}
	return errs
}

// ReceiptErr is Record.CheckReceipt's answer for the i-th receipt given to
// NewVerifier, against the record given.
func (v *Verifier) ReceiptErr(i int) error {
	return checkReceipt(v.head, v.receipts[i], v.found[v.receipts[i].EntryID])
}
