package draws_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/draws"
)

var codeKey = []byte("draws codes test key")

// heldEntries is the entries' topic as the tests see it: every event
// acknowledged, in order, for the consumer's write.
type heldEntries struct {
	mu  sync.Mutex
	evs []draw.EntryEvent
}

func (h *heldEntries) PublishEntry(_ context.Context, e draw.EntryEvent) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.evs = append(h.evs, e)
	return nil
}

// A code_required draw sale's entries through Redis (the entries' path
// of ADR 7, a proxy between it and the service) to MySQL: no code, a
// code that cannot be one, one never given, one bound to another buyer
// and one whose uses are held are refused with nothing used; a buyer's
// retry answers their entry and uses nothing more, also when the first
// take's answer was lost; a buyer over the guess limit is refused before
// the code is looked at; MySQL's uses and draw_entries.access_code match
// Redis's once the consumer wrote the entries, and the draw takes every
// entry answered.
func TestEnterWithCodes(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	it, err := db.Activities.CreateItem(ctx, "sneaker", 3)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	closes := now.Add(time.Minute)
	a, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, Items: []activity.Item{{ItemID: it.ID}},
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PerUserLimit: 1, Access: access.CodeRequired,
		Draw: activity.Draw{EntriesCloseAt: closes, Seed: draw.NewSeed()}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("mysql", db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	p := redistest.NewProxied(t, false, "entry_take")
	store := stockredis.New(p.Client(t), p.Prefix)
	codesKey := store.Keys(reservation.One(it.ID)).Codes(a.ID)
	add := func(code string, uses int, subject string) access.Digest {
		n, err := access.Normalize(code)
		if err != nil {
			t.Fatal(err)
		}
		c := access.Code{Digest: access.Hash(codeKey, a.ID, n), Uses: uses, Subject: subject}
		var sub any
		if subject != "" {
			sub = subject
		}
		if _, err := raw.Exec("INSERT INTO sale_codes (activity_id, digest, uses, used, subject, created_at) VALUES (?, ?, ?, 0, ?, NOW(3))",
			a.ID, c.Digest, uses, sub); err != nil {
			t.Fatal(err)
		}
		if err := p.Direct.HSet(ctx, codesKey, string(c.Digest), c.RedisValue()).Err(); err != nil {
			t.Fatal(err)
		}
		return c.Digest
	}
	one, two, bound := add("ONE-USE-1", 1, ""), add("TWO-USES-2", 2, ""), add("BOUND-TO-9", 1, "9")
	if err := p.Direct.HSet(ctx, codesKey, access.LoadedField, "1").Err(); err != nil {
		t.Fatal(err)
	}
	left := func(d access.Digest) string {
		v, err := p.Direct.HGet(ctx, codesKey, string(d)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	used := func(d access.Digest) int {
		var n int
		if err := raw.QueryRow("SELECT used FROM sale_codes WHERE activity_id = ? AND digest = ?", a.ID, d).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	topic := &heldEntries{}
	s := &draws.Service{Tx: db, Store: db.Draws, Events: db.Outbox, Summaries: db.Draws, Now: func() time.Time { return now },
		Accepting: &draws.Accepting{Taking: store.Entries, Publisher: topic, Key: codeKey, Grace: time.Hour,
			Guesses: store.Reservations, PerBuyer: access.GuessLimit{Max: 4, Per: time.Minute},
			KeysFor: func(activity.Activity) time.Time { return now.Add(time.Hour) }}}

	for _, c := range []struct {
		name, user, code string
		want             error
	}{
		{"no code", "1", "", access.ErrCodeRequired},
		{"not a code", "1", "ab!", access.ErrCodeInvalid},
		{"never given", "1", "NOSUCHCODE", access.ErrCodeInvalid},
		{"bound to another buyer", "1", "bound-to-9", access.ErrCodeInvalid},
	} {
		if _, _, err := s.Enter(ctx, a, c.user, 0, 1, c.code, "10.0.0.1"); !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	e1, created, err := s.Enter(ctx, a, "1", 0, 1, "one use 1", "10.0.0.1")
	if err != nil || !created {
		t.Fatalf("buyer 1 with a one-use code: %v, %v", created, err)
	}
	if _, _, err := s.Enter(ctx, a, "2", 0, 1, "ONE-USE-1", "10.0.0.1"); !errors.Is(err, access.ErrCodeUsed) {
		t.Fatalf("buyer 2 with the used code: %v, want ErrCodeUsed", err)
	}
	// Buyer 1 again (its first answer lost, say): the entry, nothing used.
	if again, created, err := s.Enter(ctx, a, "1", 0, 1, "TWO-USES-2", "10.0.0.1"); err != nil || created || again.ID != e1.ID {
		t.Fatalf("buyer 1 again: %+v, %v, %v", again, created, err)
	}
	if _, created, err := s.Enter(ctx, a, "9", 0, 1, "BOUND-TO-9", "10.0.0.1"); err != nil || !created {
		t.Fatalf("buyer 9 with its own code: %v, %v", created, err)
	}
	// Buyer 3's take runs but its answer is lost: the adapter's run again
	// finds the entry, and the code is used once.
	p.LoseNext("entry_take")
	if _, _, err := s.Enter(ctx, a, "3", 0, 1, "TWO-USES-2", "10.0.0.1"); err != nil || p.Lost() != 1 {
		t.Fatalf("buyer 3 with the answer lost: %v (lost %d)", err, p.Lost())
	}
	if left(one) != "0|" || left(two) != "1|" || left(bound) != "0|9" {
		t.Fatalf("Redis's left: one %q, two %q, bound %q; want 0, 1, 0", left(one), left(two), left(bound))
	}

	// The consumer writes what the topic holds (buyer 1's twice, as a
	// retry publishes it again).
	w, err := s.WriteEntries(ctx, topic.evs)
	if err != nil || w.New != 3 || w.CodeRefused != 0 {
		t.Fatalf("the write: %+v, %v; want 3 new", w, err)
	}
	if used(one) != 1 || used(two) != 1 || used(bound) != 1 {
		t.Fatalf("MySQL's used: one %d, two %d, bound %d; want 1 each", used(one), used(two), used(bound))
	}
	for user, want := range map[string]access.Digest{"1": one, "3": two, "9": bound} {
		var got string
		if err := raw.QueryRow("SELECT access_code FROM draw_entries WHERE activity_id = ? AND user_id = ?", a.ID, user).Scan(&got); err != nil || got != string(want) {
			t.Fatalf("buyer %s's row holds %q (%v), want %s", user, got, err, want)
		}
	}
	if e, err := s.Entry(ctx, a, "3"); err != nil || e.UserID != "3" {
		t.Fatalf("buyer 3's entry: %+v, %v", e, err)
	}
	if _, err := s.Entry(ctx, a, "2"); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("buyer 2 (refused): %v, want not found", err)
	}
	// Guessing: buyer 7's fourth invalid code stops them, before any code
	// is looked at (a valid one included); buyer 1's three did not.
	for i, code := range []string{"GUESS-1", "GUESS-2", "x!", "GUESS-3"} {
		if _, _, err := s.Enter(ctx, a, "7", 0, 1, code, "10.0.0.7"); !errors.Is(err, access.ErrCodeInvalid) {
			t.Fatalf("guess %d: %v, want ErrCodeInvalid", i+1, err)
		}
	}
	if _, _, err := s.Enter(ctx, a, "7", 0, 1, "TWO-USES-2", "10.0.0.7"); !errors.Is(err, access.ErrTooManyGuesses) {
		t.Fatalf("buyer 7 after four invalid codes: %v, want ErrTooManyGuesses", err)
	}
	if left(two) != "1|" {
		t.Fatalf("the two-use code after buyer 7: %q, want 1| (nothing used)", left(two))
	}
	res, err := s.Run(ctx, a.ID, closes)
	if err != nil || !res.Ran || res.Entries != 3 {
		t.Fatalf("the draw: %+v, %v; want the 3 entries", res, err)
	}
}
