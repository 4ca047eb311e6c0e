package e2e_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/segmentio/kafka-go"
)

// A sale of one item that was running when the programs were upgraded to
// sales in sizes: its row has no items (activity_items is new), and Redis
// holds what the previous version wrote, by the key names it used (written
// here by name, not through this version's code: {i<item>}:stock,
// :inflight, :pending, :r:<no>, :q:<activity>:<user>, :k:<user>:<key>),
// with three orders reserved whose events, in the previous version's
// format, are in Kafka. The new api and consumer carry them all over: the
// three orders are created, their buyers cannot buy again, their keys give
// their orders back, the rest of the stock sells exactly, and Redis and
// MySQL agree.
func TestUpgradeCarriesARunningSaleOver(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	ctx := context.Background()
	it, err := p.DB.Activities.CreateItem(ctx, "sold before the upgrade", 10)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	act, err := p.DB.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PerUserLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Count("SELECT COUNT(*) FROM activity_items WHERE activity_id = ?", act.ID); n != 0 {
		t.Fatalf("a sale of one item has %d activity_items rows, want none (as before the upgrade)", n)
	}
	if _, err := p.Store.Stock.WarmupFrom(ctx, reservation.One(it.ID), 1, 2*time.Hour, p.DB.Restocks); err != nil {
		t.Fatal(err)
	}

	// The previous version's reserve script, by its key names.
	base := fmt.Sprintf("%s:{i%d}:", p.Prefix, it.ID)
	if got, err := p.Redis.Get(ctx, base+"stock").Int64(); err != nil || got != 10 {
		t.Fatalf("stock under the old name %sstock: %d %v", base, got, err)
	}
	gen := order.NewNumberGenerator()
	src, err := os.ReadFile("testdata/reserve-before-sizes.lua")
	if err != nil {
		t.Fatal(err)
	}
	reserve := redis.NewScript(string(src))
	orders := map[string]int64{}
	var msgs []kafka.Message
	for u := int64(1); u <= 3; u++ {
		no := gen.Next(it.ID)
		user, key := strconv.FormatInt(u, 10), fmt.Sprintf("old-%d", u)
		at := time.Now()
		keys := []string{base + "stock", base + "inflight", base + "pending",
			base + "r:" + no, fmt.Sprintf("%sq:%d:%s", base, act.ID, user), base + "k:" + user + ":" + key}
		res, err := reserve.Run(ctx, p.Redis, keys, it.ID, "", no, user, act.ID, 1, at.UnixMilli(), key,
			time.Hour.Milliseconds(), 2*time.Hour.Milliseconds()).Slice()
		if err != nil || res[0].(int64) != 1 {
			t.Fatalf("old reserve for user %d: %v %v", u, res, err)
		}
		orders[no] = u
		msgs = append(msgs, kafka.Message{Key: []byte(no), Value: fmt.Appendf(nil,
			`{"v":1,"order_no":%q,"idempotency_key":%q,"user_id":%d,"item_id":%d,"activity_id":%d,"quantity":1,"reserved_at":%q}`,
			no, key, u, it.ID, act.ID, at.UTC().Format(time.RFC3339Nano))})
	}
	p.Write(msgs...)

	// The upgrade: this version's programs start on that state.
	api := p.StartAPI()
	p.StartConsumer()
	final := p.WaitFinal(orders, 60*time.Second)
	for no, o := range final {
		if o.Status != order.Created {
			t.Fatalf("order %s reserved before the upgrade ended %s %s, want CREATED", no, o.Status, o.FailureReason)
		}
	}
	for no, u := range orders {
		if pl, err := api.PlaceOrder(u, "after-upgrade", act.ID, 1); err != nil || pl.Error != "ALREADY_PURCHASED" {
			t.Fatalf("buyer %d with a new key after the upgrade: %+v %v, want ALREADY_PURCHASED", u, pl, err)
		}
		if pl, err := api.PlaceOrder(u, fmt.Sprintf("old-%d", u), act.ID, 1); err != nil || pl.Code != 202 || pl.OrderNo != no {
			t.Fatalf("buyer %d replaying the key used before the upgrade: %+v %v, want 202 with %s", u, pl, err, no)
		}
	}
	more, codes := crowd(t, api, act.ID, userRange(100, 20), 10)
	if len(more) != 7 || codes["SOLD_OUT"] != 13 {
		t.Fatalf("after the upgrade: %d accepted, refusals %v; want the 7 units left and 13 SOLD_OUT", len(more), codes)
	}
	p.WaitFinal(more, 60*time.Second)
	p.WaitDrained(it.ID, 20*time.Second)
	if inv := p.Check(pipelinetest.Sale{ItemID: it.ID, ActivityID: act.ID, Stock: 10}); inv.LiveOrders != 10 || inv.DBStock != 0 {
		t.Fatalf("final %+v, want 10 live orders and nothing left", inv)
	}
	if res := p.Reconcile("--json", "--activity", strconv.FormatInt(act.ID, 10)); res.Code != 0 {
		t.Fatalf("reconciler after the upgrade: exit %d\n%s", res.Code, res.Stdout)
	}
}
