package reconcile

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// addItem creates another item with stock units and an activity on sale in
// the fixture's stores, and warms it.
func (f *fixture) addItem(stock int64) int64 {
	f.t.Helper()
	it, err := f.db.Activities.CreateItem(f.ctx, "hoodie", stock)
	if err != nil {
		f.t.Fatal(err)
	}
	now := time.Now()
	if _, err := f.db.Activities.CreateActivity(f.ctx, activity.Activity{ItemID: it.ID, StartsAt: now.Add(-time.Minute),
		EndsAt: now.Add(time.Hour), PerUserLimit: 5}); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.store.Stock.Warmup(f.ctx, reservation.One(it.ID), 2*time.Hour, func(ctx context.Context) (int64, error) {
		return f.db.Activities.ItemStock(ctx, it.ID)
	}); err != nil {
		f.t.Fatal(err)
	}
	return it.ID
}

// poison replaces the item's stock key with a hash: every script that
// reads it fails with WRONGTYPE, on every run, until someone deletes it.
func (f *fixture) poison(item int64) {
	f.t.Helper()
	k := f.store.Keys(reservation.One(item)).Stock()
	if err := f.rdb.Del(f.ctx, k).Err(); err != nil {
		f.t.Fatal(err)
	}
	if err := f.rdb.HSet(f.ctx, k, "stock", 10).Err(); err != nil {
		f.t.Fatal(err)
	}
}

// uncheckedErr is the error of a run's only item, which the run must have
// left unchecked, going on without an error of its own.
func uncheckedErr(t *testing.T, rep Report, err error) error {
	t.Helper()
	if err != nil {
		t.Fatalf("the run stopped: %v; want it to go on past an item's failure", err)
	}
	if len(rep.Items) != 1 || rep.Items[0].Verdict != Unchecked {
		t.Fatalf("report %+v, want one unchecked item", rep.Items)
	}
	return rep.Items[0].err
}

func byItem(t *testing.T, rep Report, item int64) ItemReport {
	t.Helper()
	for _, it := range rep.Items {
		if it.ItemID == item {
			return it
		}
	}
	t.Fatalf("item %d not in the report %+v", item, rep.Items)
	return ItemReport{}
}

// One item whose check always fails (its stock key is a hash: the read
// script gets WRONGTYPE) does not keep the others unchecked: the item
// before it and the one after it are checked and their drift repaired,
// and the failing one is named in the report with its error; the run's
// exit code is 1. Once the fault is gone the next run repairs it too.
func TestReconcileOneFailingItemDoesNotBlockTheOthers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	drifted := f.item
	bad := f.addItem(10)
	lost := f.addItem(7)
	f.rdb.IncrBy(f.ctx, f.store.Keys(reservation.One(drifted)).Stock(), 3) // Redis could sell 3 units too many
	f.rdb.Del(f.ctx, f.store.Keys(reservation.One(lost)).Stock())          // Redis lost the item's stock
	f.poison(bad)

	l := f.lock()
	rep, err := f.c.Run(f.ctx, f.targets(), CheckAndRepair, l)
	l.Release(f.ctx)
	if err != nil {
		t.Fatalf("run stopped: %v", err)
	}
	if len(rep.Items) != 3 {
		t.Fatalf("%d items in the report, want 3: %+v", len(rep.Items), rep.Items)
	}
	if it := byItem(t, rep, drifted); it.Verdict != Repaired || it.Drift != 3 {
		t.Fatalf("drifted item %+v, want repaired from drift +3", it)
	}
	if it := byItem(t, rep, lost); it.Verdict != Repaired {
		t.Fatalf("item that lost its stock key %+v, want repaired", it)
	}
	it := byItem(t, rep, bad)
	if it.Verdict != Unchecked || !strings.Contains(it.Error, "WRONGTYPE") || !strings.HasPrefix(it.Error, "check: ") {
		t.Fatalf("failing item %+v, want unchecked with the WRONGTYPE error of its check", it)
	}
	if rep.ExitCode() != 1 || !strings.Contains(rep.Summary(), "1 unchecked") {
		t.Fatalf("exit %d, summary %q; want 1 and the unchecked item counted", rep.ExitCode(), rep.Summary())
	}
	if got := rep.UncheckedItems(); len(got) != 1 || got[0].ItemID != bad {
		t.Fatalf("unchecked items %+v, want only %d", got, bad)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "item "+strconv.FormatInt(bad, 10)+": unchecked: check: ") {
		t.Fatalf("table does not name the failing item and its error:\n%s", table.String())
	}
	if !strings.Contains(f.logBuf.String(), `"level":"DEBUG","msg":"item could not be checked or repaired; the run goes on with the other items","item_id":`+strconv.FormatInt(bad, 10)+`,"stage":"check"`) {
		t.Fatalf("no log line naming the failing item")
	}

	// The others are repaired in Redis, the failing one untouched.
	for item, want := range map[int64]int64{drifted: 10, lost: 7} {
		if s, err := f.store.Stock.Stock(f.ctx, reservation.One(item)); err != nil || !s.Warmed || s.Stock != want {
			t.Fatalf("item %d after the repair: Redis %+v (%v), want stock %d", item, s, err, want)
		}
	}
	if typ := f.rdb.Type(f.ctx, f.store.Keys(reservation.One(bad)).Stock()).Val(); typ != "hash" {
		t.Fatalf("the failing item's stock key is a %s now", typ)
	}

	// The fault goes (the key is deleted): the next run repairs it.
	f.rdb.Del(f.ctx, f.store.Keys(reservation.One(bad)).Stock())
	rep, err = f.c.Run(f.ctx, f.targets(), CheckAndRepair, f.lock())
	if err != nil || rep.ExitCode() != 0 || byItem(t, rep, bad).Verdict != Repaired {
		t.Fatalf("after the fault: err %v, report %+v", err, rep.Items)
	}
}

// A check that fails because a store is down stops the run (every other
// item would fail the same way, after its own timeouts): Run pings the
// stores after an item failed, and one that does not answer ends the run
// with an error.
func TestReconcileStoreDownStopsTheRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, -time.Minute)
	f.addItem(5)
	targets := f.targets()
	rdb := stockredis.NewClient(stockredis.Config{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { rdb.Close() })
	down := stockredis.New(rdb, f.prefix)
	c := *f.c
	c.Stock, c.Stores = down.Reconciler, []Pinger{down, f.db.DB}
	rep, err := c.Run(f.ctx, targets, CheckOnly, nil)
	if err == nil || !errors.Is(err, order.ErrUnavailable) || !strings.Contains(err.Error(), "a store is down") {
		t.Fatalf("err %v, want the run stopped: a store is down", err)
	}
	if len(rep.Items) != 1 || rep.Items[0].Verdict != Unchecked {
		t.Fatalf("report %+v, want only the first item, unchecked", rep.Items)
	}
}
