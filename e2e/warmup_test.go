package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/auth"
	"github.com/seckill/seckill/pkg/order"
	"github.com/seckill/seckill/pkg/pipelinetest"
	"github.com/seckill/seckill/pkg/waittest"
)

// Nobody calls the warm-up: two consumer processes with a 2 s lead warm an
// activity starting in 4 s, one of them, once; at its start the crowd buys
// every unit, and the stores and the reconciler agree.
func TestActivityWarmsItselfUpOnSchedule(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 2})
	api := p.StartAPI()
	consumers := []*pipelinetest.Proc{p.StartConsumer("SECKILL_WARMUP_LEAD=2s"), p.StartConsumer("SECKILL_WARMUP_LEAD=2s")}
	const stock = 20
	var item struct {
		ItemID int64 `json:"item_id"`
	}
	if code, err := api.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil, map[string]any{"name": "drop", "stock": stock}, &item); err != nil || code != 201 {
		t.Fatalf("create item: %d %v", code, err)
	}
	starts := time.Now().UTC().Add(4 * time.Second).Truncate(time.Millisecond)
	var act struct {
		ActivityID int64 `json:"activity_id"`
	}
	if code, err := api.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil, map[string]any{"item_id": item.ItemID,
		"starts_at": starts, "ends_at": starts.Add(time.Hour)}, &act); err != nil || code != 201 {
		t.Fatalf("create activity: %d %v", code, err)
	}
	sale := pipelinetest.Sale{ItemID: item.ItemID, ActivityID: act.ActivityID, Stock: stock}

	var seen time.Time
	waittest.UntilEvery(t, 30*time.Second, 10*time.Millisecond, "the consumers to warm the activity up", func() bool {
		snap, err := p.Store.Stock(context.Background(), item.ItemID)
		if err == nil && snap.Warmed {
			seen = time.Now()
		}
		return !seen.IsZero()
	})
	if seen.Before(starts.Add(-2*time.Second)) || !seen.Before(starts) {
		t.Fatalf("warmed (seen) at %s, want between the lead time %s and the start %s",
			seen.Format(time.StampMilli), starts.Add(-2*time.Second).Format(time.StampMilli), starts.Format(time.StampMilli))
	}
	waittest.Until(t, 10*time.Second, "the sale to start", func() bool { return time.Now().After(starts.Add(100 * time.Millisecond)) })

	accepted, codes := crowd(t, api, sale.ActivityID, userRange(1, 60), 30)
	if len(accepted) != stock || codes["SOLD_OUT"] != 60-stock {
		t.Fatalf("accepted %d, refused %v; want %d accepted, the rest SOLD_OUT", len(accepted), codes, stock)
	}
	final := p.WaitFinal(accepted, 60*time.Second)
	if got := countStatus(final); got[order.Created] != stock {
		t.Fatalf("statuses %v, want %d CREATED", got, stock)
	}
	p.WaitDrained(sale.ItemID, 10*time.Second)
	p.Check(sale)
	logged := 0
	for _, c := range consumers {
		logged += strings.Count(c.Log(), "activity warmed up on schedule")
	}
	if logged != 1 {
		t.Fatalf("%d scheduled warm-ups logged by the two consumers, want 1", logged)
	}
	if res := p.Reconcile("--item", fmt.Sprint(sale.ItemID)); res.Code != 0 {
		t.Fatalf("reconciler exit %d:\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
}
