//go:build chaos

package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
)

// 6. Redis restarts empty (its data is lost): the API refuses orders for the
// item (not warmed) instead of selling from nothing; the reconciler's
// repair restores stock and quotas from MySQL, and no user buys twice.
// The consumer's data-loss watch is off here, so the nightly reconciler is
// what repairs (chaos 12 shows the watch doing it on its own).
func TestChaosRedisRestartEmpty(t *testing.T) {
	fault(t)
	redisRestartEmpty(t, false)
}

// 6s. 6 with a sale in eight sizes of uneven stock, some buyers clicking
// on two sizes at once: the repair restores each size's stock and the
// sale-wide quota keys, so no buyer buys a second size.
func TestChaosRedisRestartEmptySized(t *testing.T) {
	fault(t)
	redisRestartEmpty(t, true)
}

func redisRestartEmpty(t *testing.T, sized bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	p.StartConsumer("SECKILL_HEAL_EVERY=off")
	sale := newSale(api, 200, sized)
	l := startLoad(api, sale, users(1, 150), 3*time.Second, 20)
	time.Sleep(time.Second)
	ctx := context.Background()
	if err := p.Redis.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	services(t, "stop", "redis")
	services(t, "start", "redis")
	l.wait()
	t.Logf("during the sale: %d accepted, refused %v", len(l.accepted), l.codes)

	// Not warmed: refused, nothing sold from nothing.
	if pl, err := buy(api, sale, 9001, "after-loss"); err != nil || pl.Error != "NOT_WARMED" {
		t.Fatalf("order after the loss: %+v %v, want 409 NOT_WARMED", pl, err)
	}
	// Every accepted order still reaches MySQL (the events were in Kafka).
	nos := make([]string, 0, len(l.accepted))
	for no := range l.accepted {
		nos = append(nos, no)
	}
	waittest.Until(t, 60*time.Second, "accepted orders to be final", func() bool {
		got, err := p.DB.Orders.Orders(ctx, nos)
		return err == nil && len(got) == len(nos)
	})
	item := itemIDs(sale)
	if r := p.Reconcile("--item", item); r.Code != 1 {
		t.Fatalf("reconciler before repair: exit %d, want 1 (not warmed)\n%s", r.Code, r.Stdout)
	}
	if r := p.Reconcile("--item", item, "--repair"); r.Code != 0 {
		t.Fatalf("reconciler --repair: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	// Previous buyers cannot buy again, their size or (in a sale in
	// sizes) another; new buyers take exactly what is left.
	for no, u := range l.accepted {
		if pl, _ := buy(api, sale, u, "second-try"); pl.Error != "ALREADY_PURCHASED" {
			t.Fatalf("user %d (order %s) could buy again after the repair: %+v", u, no, pl)
		}
		if !sale.Sized() {
			continue
		}
		if pl, _ := api.PlaceOrderItem(u, "other-size", sale.ActivityID, otherSize(sale, u), 1); pl.Error != "ALREADY_PURCHASED" {
			t.Fatalf("user %d (order %s) could buy another size after the repair: %+v", u, no, pl)
		}
	}
	more := startLoad(api, sale, users(5001, 300), 2*time.Second, 20).wait()
	all := map[string]int64{}
	for _, x := range []*load{l, more} {
		for no, u := range x.accepted {
			all[no] = u
		}
	}
	inv := settle(t, p, sale, all, 60*time.Second)
	if inv.LiveOrders != 200 || inv.DBStock != 0 {
		t.Fatalf("after the repair the sale ended at %+v, want all 200 units sold exactly", inv)
	}
	for _, it := range p.CheckItems(sale) {
		if it.DBStock != 0 {
			t.Fatalf("a size is left with %d units after the repair and 450 buyers: %+v", it.DBStock, it)
		}
	}
}
