package orderdb_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/draw"
)

// Entries holding presale codes: each new entry takes MySQL's use of its
// code in the transaction that writes it and its row names the code; a
// batch written again, and an entry twice in one batch, take nothing more;
// an entry whose use MySQL refuses (none left: Redis loaded a count older
// than entries on their way) is written all the same, holding the code,
// and counted CodeRefused, so every entry the api answered 201 is drawn.
func TestWriteEntriesTakeTheirCodes(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	closes := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	a := drawSale(t, db, closes, 5)
	raw, err := sql.Open("mysql", db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	add := func(code string, uses int) access.Digest {
		d := access.Hash([]byte("k"), a.ID, code)
		if _, err := raw.Exec("INSERT INTO sale_codes (activity_id, digest, uses, used, created_at) VALUES (?, ?, ?, 0, NOW(3))", a.ID, d, uses); err != nil {
			t.Fatal(err)
		}
		return d
	}
	used := func(d access.Digest) int {
		var n int
		if err := raw.QueryRow("SELECT used FROM sale_codes WHERE activity_id = ? AND digest = ?", a.ID, d).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	codeOf := func(user string) string {
		var d sql.NullString
		if err := raw.QueryRow("SELECT access_code FROM draw_entries WHERE activity_id = ? AND user_id = ?", a.ID, user).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d.String
	}
	two, one := add("TWOUSES", 2), add("ONEUSE", 1)
	at := closes.Add(-time.Second)
	with := func(user string, d access.Digest) draw.EntryEvent {
		e := entryEvent(a, user, 0, at)
		e.AccessCode = d
		return e
	}
	batch := []draw.EntryEvent{with("1", two), with("2", one), entryEvent(a, "3", 0, at), with("1", two)}
	w, err := db.Draws.WriteEntries(ctx, batch)
	if err != nil || w.New != 3 || w.Known != 1 || w.CodeRefused != 0 {
		t.Fatalf("first batch: %+v, %v; want 3 new, 1 known, none refused", w, err)
	}
	if used(two) != 1 || used(one) != 1 {
		t.Fatalf("used: two %d, one %d; want 1 and 1", used(two), used(one))
	}
	if codeOf("1") != string(two) || codeOf("2") != string(one) || codeOf("3") != "" {
		t.Fatalf("rows' codes: %q %q %q", codeOf("1"), codeOf("2"), codeOf("3"))
	}
	// Redelivered: nothing new, no use taken again.
	if w, err := db.Draws.WriteEntries(ctx, batch); err != nil || w.New != 0 || w.Known != 4 {
		t.Fatalf("the batch again: %+v, %v", w, err)
	}
	if used(two) != 1 || used(one) != 1 {
		t.Fatalf("used after the batch again: two %d, one %d; want 1 and 1", used(two), used(one))
	}
	// The one-use code again, by another buyer (Redis's copy lagged):
	// written, holding it, refused by MySQL's count.
	w, err = db.Draws.WriteEntries(ctx, []draw.EntryEvent{with("4", one)})
	if err != nil || w.New != 1 || w.CodeRefused != 1 {
		t.Fatalf("an entry beyond its code's uses: %+v, %v; want written and counted refused", w, err)
	}
	if used(one) != 1 || codeOf("4") != string(one) {
		t.Fatalf("after the refused use: used %d (want 1), row's code %q", used(one), codeOf("4"))
	}
	res, err := db.Draws.RunDrawWith(ctx, a.ID, closes, draw.Pick)
	if err != nil || !res.Ran || res.Entries != 4 {
		t.Fatalf("the draw: %+v, %v; want all 4 entries drawn", res, err)
	}
}
