package draw_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/seckill/seckill/pkg/domain/draw"
)

func entries(n int, sizes []int64) []draw.Entry {
	out := make([]draw.Entry, n)
	for i := range out {
		sum := sha256.Sum256([]byte(fmt.Sprint("entry ", i)))
		out[i] = draw.Entry{ID: hex.EncodeToString(sum[:16]), ItemID: sizes[i%len(sizes)], Quantity: 1 + i%3/2}
	}
	return out
}

// record is a drawn record of n entries over sizes, each with stock units.
func record(t *testing.T, n int, stock int64) draw.Record {
	t.Helper()
	seed := draw.NewSeed()
	sizes := []int64{11, 12, 13}
	es := entries(n, sizes)
	st := map[int64]int64{}
	var ss []draw.Size
	for _, id := range sizes {
		st[id] = stock
		ss = append(ss, draw.Size{ItemID: id, Stock: stock})
	}
	return draw.Record{ActivityID: 7, State: draw.StateDrawn, Commitment: seed.Commitment(), Seed: seed.String(),
		Digest: draw.Digest(es), Sizes: ss, Entries: draw.Pick(seed, es, st)}
}

func TestPickFillsEachSizeInRankOrder(t *testing.T) {
	rec := record(t, 300, 20)
	won := map[int64]int64{}
	seenAlternate := map[int64]int{}
	for _, e := range rec.Entries {
		if e.Outcome == draw.Won {
			won[e.ItemID] += int64(e.Quantity)
		}
	}
	for _, s := range rec.Sizes {
		if won[s.ItemID] > s.Stock {
			t.Errorf("size %d: %d units won of %d", s.ItemID, won[s.ItemID], s.Stock)
		}
		// First fit: every alternate's quantity was above what was left
		// when its turn came, so a size is left short only by less than
		// the largest quantity (2 here).
		if s.Stock-won[s.ItemID] >= 2 {
			t.Errorf("size %d: %d of %d units left unwon with alternates waiting", s.ItemID, s.Stock-won[s.ItemID], s.Stock)
		}
	}
	// Keys ascend along the ranking.
	seed, _ := draw.ParseSeed(rec.Seed)
	for i := 1; i < len(rec.Entries); i++ {
		a, b := draw.Key(seed, rec.Entries[i-1].ID), draw.Key(seed, rec.Entries[i].ID)
		if string(a[:]) > string(b[:]) {
			t.Fatalf("ranks %d and %d out of key order", i, i+1)
		}
		if rec.Entries[i].Outcome == draw.Alternate {
			seenAlternate[rec.Entries[i].ItemID]++
		}
	}
	if len(seenAlternate) != 3 {
		t.Errorf("alternates by size %v, want some for each of 3", seenAlternate)
	}
	if err := draw.Verify(rec); err != nil {
		t.Fatalf("Verify of an honest record: %v", err)
	}
}

func TestPickDependsOnTheSeedAlone(t *testing.T) {
	es := entries(50, []int64{1})
	seed := draw.NewSeed()
	a := draw.Pick(seed, es, map[int64]int64{1: 5})
	rev := make([]draw.Entry, len(es))
	for i, e := range es {
		rev[len(es)-1-i] = e
	}
	b := draw.Pick(seed, rev, map[int64]int64{1: 5})
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("rank %d: %v from one order of the list, %v from another", i+1, a[i], b[i])
		}
	}
	if draw.Digest(es) != draw.Digest(rev) {
		t.Error("the digest depends on the list's order")
	}
	c := draw.Pick(draw.NewSeed(), es, map[int64]int64{1: 5})
	same := 0
	for i := range a {
		if a[i].ID == c[i].ID {
			same++
		}
	}
	if same > 10 {
		t.Errorf("another seed left %d of 50 ranks alike", same)
	}
}

func TestDigestIsTheDocumentedOne(t *testing.T) {
	es := []draw.Entry{{ID: "bb", ItemID: 2, Quantity: 1}, {ID: "aa", ItemID: 10, Quantity: 3}}
	sum := sha256.Sum256([]byte("aa,10,3\nbb,2,1\n"))
	if got, want := draw.Digest(es), hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("Digest = %s, want %s", got, want)
	}
}

func TestVerifyFindsEachChange(t *testing.T) {
	cases := []struct {
		name   string
		change func(*draw.Record)
		want   string
	}{
		{"another seed", func(r *draw.Record) { r.Seed = draw.NewSeed().String() }, "commitment"},
		{"another commitment and seed", func(r *draw.Record) {
			s := draw.NewSeed()
			r.Seed, r.Commitment = s.String(), s.Commitment()
		}, "rank"},
		{"an entry's size", func(r *draw.Record) { r.Entries[40].ItemID = 99 }, "entries_digest"},
		{"an entry's quantity", func(r *draw.Record) { r.Entries[3].Quantity++ }, "entries_digest"},
		{"an entry left out", func(r *draw.Record) { r.Entries = r.Entries[1:] }, "entries_digest"},
		{"two entries swapped", func(r *draw.Record) {
			r.Entries[0], r.Entries[1] = r.Entries[1], r.Entries[0]
		}, "rank 1"},
		{"an alternate made a winner", func(r *draw.Record) {
			for i := len(r.Entries) - 1; i >= 0; i-- {
				if r.Entries[i].Outcome == draw.Alternate {
					r.Entries[i].Outcome = draw.Won
					return
				}
			}
		}, "the draw makes it ALTERNATE"},
		{"more stock claimed", func(r *draw.Record) { r.Sizes[0].Stock++ }, "the draw makes it WON"},
		{"a bad seed", func(r *draw.Record) { r.Seed = "zz" }, "64 hex digits"},
		{"not drawn", func(r *draw.Record) { r.State = draw.StateClosed }, "nothing to verify"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := record(t, 200, 20)
			tc.change(&rec)
			err := draw.Verify(rec)
			if err == nil {
				t.Fatal("Verify passed a changed record")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify: %v; want it to name %q", err, tc.want)
			}
		})
	}
}

func TestValidEntryID(t *testing.T) {
	for id, want := range map[string]bool{
		strings.Repeat("a", 32): true, strings.Repeat("0", 32): true,
		strings.Repeat("A", 32): false, strings.Repeat("a", 31): false, strings.Repeat("g", 32): false,
	} {
		if draw.ValidEntryID(id) != want {
			t.Errorf("ValidEntryID(%q) = %v", id, !want)
		}
	}
}

func TestCheckReceipt(t *testing.T) {
	rec := record(t, 30, 5)
	e := rec.Entries[17]
	genuine := draw.Receipt{EntryID: e.ID, ActivityID: rec.ActivityID, ItemID: e.ItemID, Quantity: e.Quantity, Commitment: rec.Commitment}
	open := draw.Record{ActivityID: rec.ActivityID, State: draw.StateOpen, Commitment: rec.Commitment}
	other := draw.NewSeed().Commitment()
	for _, tc := range []struct {
		name string
		rec  draw.Record
		edit func(*draw.Receipt)
		want string // in the error; "" when the record keeps the receipt
	}{
		{"genuine", rec, func(*draw.Receipt) {}, ""},
		{"genuine, before the draw", open, func(*draw.Receipt) {}, ""},
		{"another commitment", rec, func(r *draw.Receipt) { r.Commitment = other }, "commitment: entry " + e.ID + " was answered with " + other},
		{"another commitment, before the draw", open, func(r *draw.Receipt) { r.Commitment = other }, "the record says " + rec.Commitment},
		{"an entry not in the record", rec, func(r *draw.Receipt) { r.EntryID = strings.Repeat("0", 32) }, "is missing from the record"},
		{"another item", rec, func(r *draw.Receipt) { r.ItemID++ }, "the record lists item"},
		{"another quantity", rec, func(r *draw.Receipt) { r.Quantity++ }, "the record lists item"},
		{"another sale", rec, func(r *draw.Receipt) { r.ActivityID++ }, "the record of activity 7"},
		{"no commitment", rec, func(r *draw.Receipt) { r.Commitment = "" }, "not an entry's receipt"},
		{"no entry id", rec, func(r *draw.Receipt) { r.EntryID = "" }, "not an entry's receipt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := genuine
			tc.edit(&r)
			err := tc.rec.CheckReceipt(r)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
