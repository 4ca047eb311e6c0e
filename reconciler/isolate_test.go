package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// An item whose check fails at every run (its stock key is a hash: the read
// script gets WRONGTYPE) does not stop the run: the other item's drift is
// repaired, the report names the failing item with its error (verdict
// unchecked, field error), and the run exits 1 with the item in its error.
func TestReconcilerReportsAnUncheckedItemAndGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	bad, err := e.db.Activities.CreateItem(ctx, "hoodie", 5)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := e.db.Activities.CreateActivity(ctx, activity.Activity{ItemID: bad.ID, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	rdb := e.rdb
	rdb.HSet(ctx, e.store.Keys(reservation.One(bad.ID)).Stock(), "stock", 5)
	rdb.IncrBy(ctx, e.store.Keys(reservation.One(e.item)).Stock(), 4)

	r := e.run(t, "--json", "--repair", "--recheck", "10ms")
	var rep struct {
		ExitCode int `json:"exit_code"`
		Items    []struct {
			ItemID  int64  `json:"item_id"`
			Verdict string `json:"verdict"`
			Error   string `json:"error"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json output (exit %d, %v): %v\n%s\n%s", r.code, r.err, err, r.stdout, r.stderr)
	}
	if r.code != exitDrift || rep.ExitCode != 1 || len(rep.Items) != 2 {
		t.Fatalf("code %d, report %+v, want exit 1 and both items\n%s", r.code, rep, r.stderr)
	}
	for _, it := range rep.Items {
		switch it.ItemID {
		case e.item:
			if it.Verdict != "repaired" {
				t.Fatalf("drifted item %+v, want repaired", it)
			}
		case bad.ID:
			if it.Verdict != "unchecked" || !strings.HasPrefix(it.Error, "check: ") || !strings.Contains(it.Error, "WRONGTYPE") {
				t.Fatalf("failing item %+v, want unchecked with its check's WRONGTYPE error", it)
			}
		}
	}
	if msg := r.err.Error(); !strings.Contains(msg, "1 unchecked") || !strings.Contains(msg, "item "+itoa(bad.ID)+" unchecked: check: ") {
		t.Fatalf("error %q does not name the unchecked item", msg)
	}
	if !strings.Contains(r.stderr, `"level":"ERROR+4","msg":"item could not be checked or repaired; the run went on with the other items","item_id":`+itoa(bad.ID)+`,"err":"check: `) {
		t.Fatalf("no log line naming the failing item:\n%s", r.stderr)
	}
	if s, err := e.store.Stock.Stock(ctx, reservation.One(e.item)); err != nil || s.Stock != 10 {
		t.Fatalf("drifted item after the run: %+v (%v), want stock 10", s, err)
	}

	// The table names it too.
	r = e.run(t, "--recheck", "10ms")
	if r.code != exitDrift || !strings.Contains(r.stdout, "item "+itoa(bad.ID)+": unchecked: check: ") ||
		!strings.Contains(r.stdout, "2 items checked: 1 ok, 1 unchecked") {
		t.Fatalf("table run: code %d\n%s", r.code, r.stdout)
	}
}
