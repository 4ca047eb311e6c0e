package warmup_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/consumer/internal/warmup"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/sales"
)

// A warm-up pass costs what is due, not what the database holds: with 800
// past sales, 100 of which ended without ever being warmed up (no consumer
// ran), and none due, a pass reads a few index entries, where it read
// every past sale never warmed up (idx_activities_warmup's range
// starts_at <= lead time) before 0011.
func TestIdlePassReadsOnlyWhatIsDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	db := mysqltest.New(t)
	l, err := mysqltest.LoadHistory(ctx, db.DB, mysqltest.History{Orders: 8000, Sales: 800})
	if err != nil {
		t.Fatal(err)
	}
	session := db.OneSession(t)
	s := &warmup.Scheduler{DB: session.Activities, Sales: &sales.Service{Tx: session, Sales: session.Activities, Warmups: session.Activities, Restocks: session.Restocks, Stock: stockredis.New(rdb, prefix).Stock}, Log: slog.New(slog.DiscardHandler),
		Locker: lock.New(rdb, lock.Options{Prefix: prefix, InstanceID: "warmup-idle"})}
	var warmed []int64
	read := mysqltest.RowsRead(t, session, func() {
		if warmed, err = s.Once(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if len(warmed) != 0 {
		t.Errorf("idle pass warmed %v, want none", warmed)
	}
	if read > 20 {
		t.Errorf("idle pass read %d rows and index entries with %d past sales, want at most 20", read, len(l.Activities))
	}
	t.Logf("idle pass read %d rows and index entries", read)
}

// A pass lists the due sales a page at a time and goes through every page:
// 250 sales due at once are all warmed up by one pass.
func TestOnePassWarmsMoreSalesThanAPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	db := mysqltest.New(t)
	store := stockredis.New(rdb, prefix)
	starts := time.Now().Add(time.Minute)
	var due []activity.Activity
	for i := range 250 {
		it, err := db.Activities.CreateItem(ctx, "sneaker", int64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		// Some share a start, so the pages part within one starts_at.
		a, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: starts.Add(time.Duration(i/7) * time.Millisecond),
			EndsAt: starts.Add(time.Hour), PerUserLimit: 1})
		if err != nil {
			t.Fatal(err)
		}
		due = append(due, a)
	}
	s := &warmup.Scheduler{DB: db.DB.Activities, Sales: &sales.Service{Tx: db.DB, Sales: db.DB.Activities, Warmups: db.DB.Activities, Restocks: db.DB.Restocks, Stock: store.Stock}, Lead: time.Hour, Log: slog.New(slog.DiscardHandler),
		Locker: lock.New(rdb, lock.Options{Prefix: prefix, InstanceID: "warmup-pages"})}
	warmed, err := s.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(warmed) != len(due) {
		t.Fatalf("one pass warmed %d sales, want %d", len(warmed), len(due))
	}
	for i, a := range due {
		snap, err := store.Stock.Stock(ctx, reservation.One(a.ItemID))
		if err != nil {
			t.Fatal(err)
		}
		if !snap.Warmed || snap.Stock != int64(i+1) {
			t.Errorf("sale %d: Redis %+v, want warmed with stock %d", a.ID, snap, i+1)
		}
	}
	if again, err := s.Once(ctx); err != nil || len(again) != 0 {
		t.Fatalf("second pass warmed %v (%v), want none", again, err)
	}
}
