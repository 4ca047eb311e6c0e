package draw

import (
	"testing"
	"time"
)

func TestEntryIDForIsTheBuyersInTheSale(t *testing.T) {
	key := []byte("k")
	a := EntryIDFor(key, 7, "alice")
	if !ValidEntryID(a) {
		t.Fatalf("%q is not an entry id", a)
	}
	if EntryIDFor(key, 7, "alice") != a {
		t.Fatal("the same buyer in the same sale got another id")
	}
	for _, other := range []string{EntryIDFor(key, 8, "alice"), EntryIDFor(key, 7, "bob"), EntryIDFor([]byte("k2"), 7, "alice"),
		// A buyer whose id holds the separator is another buyer.
		EntryIDFor(key, 1, "7|alice")} {
		if other == a {
			t.Fatalf("another buyer, sale or key got %q", a)
		}
	}
}

func TestAcceptedRoundTrips(t *testing.T) {
	a := Accepted{Entry: Entry{ID: EntryIDFor([]byte("k"), 1, "u"), ItemID: 12, Quantity: 2}, At: time.UnixMilli(1_790_000_000_123).UTC()}
	got, err := ParseAccepted(a.String())
	if err != nil || got != a {
		t.Fatalf("ParseAccepted(%q) = %+v, %v; want %+v", a.String(), got, err, a)
	}
	for _, bad := range []string{"", "x|1|1|1", a.ID + "|0|1|1", a.ID + "|1|0|1", a.ID + "|1|1", a.ID + "|1|1|x", a.ID + "|1|1|1|1"} {
		if _, err := ParseAccepted(bad); err == nil {
			t.Errorf("ParseAccepted(%q) took it", bad)
		}
	}
}
