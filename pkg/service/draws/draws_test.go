package draws_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/service/draws"
)

// The service runs the draw in the store's transaction: once, with the
// entries taken before the close, and a record that verifies.
func TestRunDrawsOnce(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	ctx := context.Background()
	it, err := db.Activities.CreateItem(ctx, "sneaker", 2)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	closes := now.Add(time.Minute)
	a, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, Items: []activity.Item{{ItemID: it.ID}},
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PerUserLimit: 1,
		Draw: activity.Draw{EntriesCloseAt: closes, Seed: draw.NewSeed()}})
	if err != nil {
		t.Fatal(err)
	}
	s := &draws.Service{Tx: db, Store: db.Draws, Now: func() time.Time { return now }}
	for u := range 5 {
		if _, created, err := s.Enter(ctx, a, strconv.Itoa(u), 0, 1); err != nil || !created {
			t.Fatalf("enter %d: created %v, %v", u, created, err)
		}
	}
	if res, err := s.Run(ctx, a.ID, closes.Add(-time.Millisecond)); err != nil || res.Ran {
		t.Fatalf("a run before the close: %+v, %v; want nothing done", res, err)
	}
	res, err := s.Run(ctx, a.ID, closes)
	if err != nil || !res.Ran || res.Entries != 5 || res.Winners != 2 {
		t.Fatalf("the run: %+v, %v; want 5 entries, 2 winners", res, err)
	}
	if again, err := s.Run(ctx, a.ID, closes.Add(time.Second)); err != nil || again.Ran {
		t.Fatalf("a second run: %+v, %v; want nothing done", again, err)
	}
	rec, err := db.Draws.DrawRecord(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := draw.Verify(rec); err != nil {
		t.Fatalf("the record does not verify: %v", err)
	}
}
