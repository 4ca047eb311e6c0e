package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
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
		snap, err := p.Store.Stock.Stock(context.Background(), reservation.One(item.ItemID))
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

// Two sales that can never be warmed up sit at the head of the schedule:
// one ending in the year 3000 (its row written straight into MySQL, as
// the API now refuses it: its keys' lifetime would overflow) and one whose
// bucket count contradicts its item's live keys (SETTING_LOCKED). A real
// sale created after them, starting 5 s later, is warmed on schedule all
// the same and its first order at its start is 202, not NOT_WARMED; each
// bad sale is logged with its id and the error once per backoff (5 s, not
// every second) and counted by pass.
func TestBadSaleDoesNotDelayScheduledWarmup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	admin := pipelinetest.FreeAddr(t)
	consumer := p.StartConsumer("SECKILL_WARMUP_LEAD=3s", "SECKILL_ADMIN_ADDR="+admin)
	t0 := time.Now()
	newItem := func(stock int64) int64 {
		var item struct {
			ItemID int64 `json:"item_id"`
		}
		if code, err := api.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil, map[string]any{"name": "drop", "stock": stock}, &item); err != nil || code != 201 {
			t.Fatalf("create item: %d %v", code, err)
		}
		return item.ItemID
	}
	soon := time.Now().UTC().Add(time.Second).Truncate(time.Millisecond)
	typo, err := p.DB.Activities.CreateActivity(ctx, activity.Activity{ItemID: newItem(10), StartsAt: soon,
		EndsAt: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), PerUserLimit: 1, StockBuckets: 1})
	if err != nil {
		t.Fatal(err)
	}
	live := api.CreateSale(10, 1) // its item's stock lives in one key
	// Starting before the real sale, but not before the schedule meets it
	// (a started sale whose item's stock lives in Redis is recorded as
	// warmed, not warmed again).
	lockedStarts := time.Now().UTC().Add(4 * time.Second).Truncate(time.Millisecond)
	locked, err := p.DB.Activities.CreateActivity(ctx, activity.Activity{ItemID: live.ItemID, StartsAt: lockedStarts,
		EndsAt: lockedStarts.Add(time.Hour), PerUserLimit: 1, StockBuckets: 3})
	if err != nil {
		t.Fatal(err)
	}

	item := newItem(5)
	starts := time.Now().UTC().Add(5 * time.Second).Truncate(time.Millisecond)
	var act struct {
		ActivityID int64 `json:"activity_id"`
	}
	if code, err := api.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil, map[string]any{"item_id": item,
		"starts_at": starts, "ends_at": starts.Add(time.Hour)}, &act); err != nil || code != 201 {
		t.Fatalf("create activity: %d %v", code, err)
	}
	waittest.Until(t, 30*time.Second, "the sale to start", func() bool { return time.Now().After(starts.Add(100 * time.Millisecond)) })
	placed, err := api.PlaceOrder(1, "first", act.ActivityID, 1)
	if err != nil || placed.Code != 202 {
		t.Fatalf("first order at the start: %+v %v, want 202 (the sale warmed on schedule)", placed, err)
	}
	final := p.WaitFinal(map[string]int64{placed.OrderNo: 1}, 30*time.Second)
	if o := final[placed.OrderNo]; o.Status != order.Created {
		t.Fatalf("first order: %+v, want CREATED", o)
	}

	elapsed := time.Since(t0)
	log := consumer.Log()
	for _, c := range []struct {
		id   int64
		says string
	}{{typo.ID, "outside the range"}, {locked.ID, "setting locked"}} {
		var lines []string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "a record failed in a periodic pass") && strings.Contains(l, fmt.Sprintf(`"activity_id":%d,`, c.id)) {
				lines = append(lines, l)
			}
		}
		// Tried at most once per backoff: 5 s, then doubling.
		if len(lines) == 0 || len(lines) > int(elapsed/(5*time.Second))+1 || !strings.Contains(lines[0], c.says) {
			t.Errorf("activity %d: %d failure lines in %s, want 1 to %d saying %q:\n%s", c.id, len(lines), elapsed.Round(time.Second),
				int(elapsed/(5*time.Second))+1, c.says, strings.Join(lines, "\n"))
		}
	}
	m := pipelinetest.ScrapeMetrics(t, "http://"+admin+"/metrics")
	if n := m.Value("seckill_pass_record_failures_total", "pass", "warmup"); n < 2 {
		t.Errorf("seckill_pass_record_failures_total{pass=warmup} = %v, want at least 2", n)
	}
	if n := m.Value("seckill_pass_records_skipped", "pass", "warmup"); n < 1 {
		t.Errorf("seckill_pass_records_skipped{pass=warmup} = %v, want at least the year-3000 sale", n)
	}
}
