package draw_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/seckill/seckill/pkg/domain/draw"
)

// verifyWhole is Verify as it was before the Verifier: the whole record
// ranked again with Pick, held here to show the Verifier answers what it
// answered, message for message.
func verifyWhole(rec draw.Record) error {
	if rec.State != draw.StateDrawn {
		return fmt.Errorf("the draw is %s, not %s: there is nothing to verify yet", rec.State, draw.StateDrawn)
	}
	seed, err := draw.ParseSeed(rec.Seed)
	if err != nil {
		return err
	}
	var errs []error
	if got := seed.Commitment(); got != rec.Commitment {
		errs = append(errs, fmt.Errorf("commitment: SHA-256 of the seed is %s, the record says %s", got, rec.Commitment))
	}
	entries := make([]draw.Entry, len(rec.Entries))
	seen := make(map[string]bool, len(rec.Entries))
	for i, e := range rec.Entries {
		entries[i] = e.Entry
		if seen[e.ID] {
			errs = append(errs, fmt.Errorf("entry %s is listed twice", e.ID))
		}
		seen[e.ID] = true
	}
	if got := draw.Digest(entries); got != rec.Digest {
		errs = append(errs, fmt.Errorf("entries_digest: the entries hash to %s, the record says %s", got, rec.Digest))
	}
	stock := make(map[int64]int64, len(rec.Sizes))
	for _, s := range rec.Sizes {
		stock[s.ItemID] = s.Stock
	}
	want := draw.Pick(seed, entries, stock)
	ranked := 0
	for i, w := range want {
		got := rec.Entries[i]
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
	return errors.Join(errs...)
}

// tamperings are changes of a drawn record, each breaking it another way
// (and one keeping it).
var tamperings = []struct {
	name   string
	change func(*draw.Record)
}{
	{"none", func(*draw.Record) {}},
	{"another seed", func(r *draw.Record) { r.Seed = draw.NewSeed().String() }},
	{"another commitment and seed", func(r *draw.Record) {
		s := draw.NewSeed()
		r.Seed, r.Commitment = s.String(), s.Commitment()
	}},
	{"an entry's size", func(r *draw.Record) { r.Entries[40].ItemID = 99 }},
	{"an entry's quantity", func(r *draw.Record) { r.Entries[3].Quantity++ }},
	{"an entry left out", func(r *draw.Record) { r.Entries = r.Entries[1:] }},
	{"two entries swapped", func(r *draw.Record) { r.Entries[0], r.Entries[1] = r.Entries[1], r.Entries[0] }},
	{"the ranking reversed", func(r *draw.Record) { slices.Reverse(r.Entries) }},
	{"an entry listed twice, in its place", func(r *draw.Record) {
		r.Entries = slices.Insert(r.Entries, 10, r.Entries[10])
	}},
	{"an entry listed twice, elsewhere", func(r *draw.Record) { r.Entries = append(r.Entries, r.Entries[5], r.Entries[5]) }},
	{"every alternate made a winner", func(r *draw.Record) {
		for i := range r.Entries {
			r.Entries[i].Outcome = draw.Won
		}
	}},
	{"an outcome made up", func(r *draw.Record) { r.Entries[7].Outcome = "LUCKY" }},
	{"an id not hex", func(r *draw.Record) { r.Entries[12].ID = strings.ToUpper(r.Entries[12].ID) }},
	{"a quantity out of range", func(r *draw.Record) { r.Entries[20].Quantity = 1 << 40 }},
	{"a negative quantity", func(r *draw.Record) { r.Entries[0].Quantity = -3 }},
	{"more stock claimed", func(r *draw.Record) { r.Sizes[0].Stock++ }},
	{"no entries", func(r *draw.Record) { r.Entries = nil }},
	{"a bad seed", func(r *draw.Record) { r.Seed = "zz" }},
	{"not drawn", func(r *draw.Record) { r.State = draw.StateClosed }},
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// The Verifier, given a record whole (Verify) or read as a stream
// (Verifier.Read, with its fields in the api's order or with the entries
// first), answers what the whole record's check answered.
func TestVerifierAnswersAsTheWholeRecordsCheck(t *testing.T) {
	for _, tc := range tamperings {
		t.Run(tc.name, func(t *testing.T) {
			rec := record(t, 200, 20)
			tc.change(&rec)
			want := errText(verifyWhole(rec))
			if got := errText(draw.Verify(rec)); got != want {
				t.Fatalf("Verify:\n%s\nwant:\n%s", got, want)
			}
			b, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			first, err := json.Marshal(struct {
				Entries []draw.Ranked `json:"entries"`
				draw.Record
			}{rec.Entries, rec})
			if err != nil {
				t.Fatal(err)
			}
			for name, body := range map[string][]byte{"as served": b, "entries first": first} {
				v := draw.NewVerifier()
				head, err := v.Read(bytes.NewReader(body))
				if err != nil {
					t.Fatalf("%s: Read: %v", name, err)
				}
				if head.Digest != rec.Digest || head.Seed != rec.Seed || len(head.Sizes) != len(rec.Sizes) {
					t.Fatalf("%s: head %+v", name, head)
				}
				if n, _ := v.Entries(); n != len(rec.Entries) {
					t.Fatalf("%s: %d entries read, want %d", name, n, len(rec.Entries))
				}
				if got := errText(v.Err()); got != want {
					t.Fatalf("%s: Read then Err:\n%s\nwant:\n%s", name, got, want)
				}
			}
		})
	}
}

// A receipt is held to the streamed record as CheckReceipt holds it to the
// whole one.
func TestVerifierHoldsReceipts(t *testing.T) {
	rec := record(t, 60, 5)
	e := rec.Entries[17]
	genuine := draw.Receipt{EntryID: e.ID, ActivityID: rec.ActivityID, ItemID: e.ItemID, Quantity: e.Quantity, Commitment: rec.Commitment}
	missing, other, sale := genuine, genuine, genuine
	missing.EntryID = strings.Repeat("0", 32)
	other.Quantity++
	sale.Commitment = draw.NewSeed().Commitment()
	receipts := []draw.Receipt{genuine, missing, other, sale}
	b, _ := json.Marshal(rec)
	v := draw.NewVerifier(receipts...)
	if _, err := v.Read(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	for i, r := range receipts {
		want := errText(rec.CheckReceipt(r))
		if got := errText(v.ReceiptErr(i)); got != want {
			t.Errorf("receipt %d: %s, want %s", i, got, want)
		}
	}
	if v.ReceiptErr(0) != nil || v.ReceiptErr(1) == nil || v.ReceiptErr(2) == nil || v.ReceiptErr(3) == nil {
		t.Errorf("receipts: %v, %v, %v, %v; want only the first kept", v.ReceiptErr(0), v.ReceiptErr(1), v.ReceiptErr(2), v.ReceiptErr(3))
	}
}

// RecordWriter writes, a page at a time, the bytes json.Marshal writes for
// the whole record.
func TestRecordWriterWritesWhatMarshalWrites(t *testing.T) {
	drawn := record(t, 95, 7)
	drawn.Restocks = []draw.Restock{{ItemID: 11, Quantity: 3}}
	for name, rec := range map[string]draw.Record{
		"drawn":           drawn,
		"drawn, no entry": {ActivityID: 3, State: draw.StateDrawn, Commitment: "c", Seed: "s", Digest: "d", Sizes: []draw.Size{{ItemID: 1, Stock: 2}}},
		"open":            {ActivityID: 3, State: draw.StateOpen, Commitment: "<c&>"},
		"an id to escape": {ActivityID: 3, State: draw.StateDrawn, Entries: []draw.Ranked{{Entry: draw.Entry{ID: "<\"\u2028>"}}}},
	} {
		for _, page := range []int{1, 10, 1000} {
			want, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			head, err := draw.HeadJSON(rec)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			w := draw.NewRecordWriter(&got, head)
			for es := rec.Entries; len(es) > 0; {
				n := min(page, len(es))
				if err := w.Entries(es[:n]); err != nil {
					t.Fatal(err)
				}
				es = es[n:]
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("%s, pages of %d:\n%s\nwant:\n%s", name, page, got.Bytes(), want)
			}
		}
	}
}

// Read refuses what is not one record, saying why.
func TestReadRefusesWhatIsNotARecord(t *testing.T) {
	rec := record(t, 5, 1)
	b, _ := json.Marshal(rec)
	sum := sha256.Sum256(b)
	for name, body := range map[string]string{
		"a list":             "[]",
		"cut short":          string(b[:len(b)/2]),
		"two lists":          `{"entries":[],"entries":[]}`,
		"an entry not one":   `{"state":"DRAWN","entries":[1]}`,
		"entries not a list": `{"entries":{}}`,
		"data after it":      string(b) + hex.EncodeToString(sum[:]),
	} {
		if _, err := draw.NewVerifier().Read(strings.NewReader(body)); err == nil {
			t.Errorf("%s: read as a record", name)
		}
	}
}
