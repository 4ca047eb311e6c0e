package orderdb_test

import (
	"context"
	"slices"
	"testing"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
)

// MarkPublished marks the events it is given, found by (stream, seq) now
// that their ids have no key, and no other: the rest stay unpublished,
// and marking the same events again changes nothing.
func TestMarkPublishedMarksOnlyTheEventsGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := mysqltest.New(t)
	a := db.OpenSale(t, 100, order.Money{})
	if _, err := db.SeedLive(ctx, a, 30); err != nil {
		t.Fatal(err)
	}
	all := make([]int, outbox.Shards)
	for i := range all {
		all[i] = i
	}
	unpublished := func() []string {
		t.Helper()
		evs, err := db.Outbox.Unpublished(ctx, all, 1000)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(evs))
		for i, e := range evs {
			ids[i] = e.ID
		}
		slices.Sort(ids)
		return ids
	}
	evs, err := db.Outbox.Unpublished(ctx, all, 1000)
	if err != nil || len(evs) != 30 {
		t.Fatalf("%d events unpublished (%v), want 30", len(evs), err)
	}
	var marked []outbox.Event
	var rest []string
	for i, e := range evs {
		if i%3 == 0 {
			marked = append(marked, e)
		} else {
			rest = append(rest, e.ID)
		}
	}
	slices.Sort(rest)
	for range 2 {
		if err := db.Outbox.MarkPublished(ctx, marked); err != nil {
			t.Fatal(err)
		}
		if got := unpublished(); !slices.Equal(got, rest) {
			t.Fatalf("unpublished after marking %d of 30: %v, want %v", len(marked), got, rest)
		}
	}
	var published int64
	db.Gorm().Raw("SELECT COUNT(*) FROM outbox_events WHERE published_at IS NOT NULL").Scan(&published)
	if published != int64(len(marked)) {
		t.Fatalf("%d events published, want %d", published, len(marked))
	}
}
