package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// The whole flash sale on a real 3-master Redis Cluster, with two API
// processes and three consumers, one of them killed mid-sale.
func TestEndToEndOnRedisCluster(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 6, RedisCluster: true})
	api1, api2 := p.StartAPI(), p.StartAPI()
	consumers := startConsumersWithoutSweep(p, 3)
	// Three items: their hash tags spread over the masters.
	sales := []pipelinetest.Sale{api1.CreateSale(100, 1), api1.CreateSale(100, 1), api2.CreateSale(100, 1)}

	type result struct {
		accepted map[string]int64
		codes    map[string]int
	}
	results := make([]result, len(sales))
	done := make(chan int, len(sales))
	for i, s := range sales {
		api := api1
		if i%2 == 1 {
			api = api2
		}
		go func() {
			a, c := crowd(t, api, s.ActivityID, userRange(int64(i*10000+1), 400), 40)
			results[i] = result{a, c}
			done <- i
		}()
	}
	killWorkingConsumer(t, consumers)
	for range sales {
		<-done
	}
	for i, s := range sales {
		r := results[i]
		if len(r.accepted) != 100 || r.codes["SOLD_OUT"] != 300 {
			t.Fatalf("sale %d: accepted %d, refused %v", i, len(r.accepted), r.codes)
		}
		final := p.WaitFinal(r.accepted, 90*time.Second)
		if got := countStatus(final); got[order.Created] != 100 {
			t.Fatalf("sale %d: %v", i, got)
		}
		p.WaitDrained(s.ItemID, 30*time.Second)
		if inv := p.Check(s); inv.DBStock != 0 || inv.RedisStock != 0 {
			t.Fatalf("sale %d: %+v", i, inv)
		}
	}
}

// One hot item whose stock is split over 3 buckets on different masters:
// 1,000 buyers for 100 units through two API processes and three
// consumers, one of them killed mid-sale. Exactly 100 orders, MySQL and the
// sum of the buckets at 0, and the reconciler agrees.
func TestEndToEndBucketsOnRedisCluster(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 6, RedisCluster: true})
	api1, api2 := p.StartAPI(), p.StartAPI()
	consumers := startConsumersWithoutSweep(p, 3)
	sale := api1.CreateBucketedSale(100, 1, 3)
	k := p.Store.Keys(reservation.One(sale.ItemID))
	for b := range 3 {
		if n, err := p.Redis.Get(context.Background(), k.Bucket(b)).Int64(); err != nil || n < 33 {
			t.Fatalf("bucket %d after warmup: %d %v", b, n, err)
		}
	}

	type result struct {
		accepted map[string]int64
		codes    map[string]int
	}
	results := make(chan result, 2)
	for i, api := range []*pipelinetest.API{api1, api2} {
		go func() {
			a, c := crowd(t, api, sale.ActivityID, userRange(int64(i*500+1), 500), 50)
			results <- result{a, c}
		}()
	}
	// The item's events share one partition: the consumer that owns it dies.
	killWorkingConsumer(t, consumers)
	accepted, codes := map[string]int64{}, map[string]int{}
	for range 2 {
		r := <-results
		for no, u := range r.accepted {
			accepted[no] = u
		}
		for c, n := range r.codes {
			codes[c] += n
		}
	}
	if len(accepted) != 100 || codes["SOLD_OUT"] != 900 {
		t.Fatalf("accepted %d, refused %v; want 100 and 900 SOLD_OUT", len(accepted), codes)
	}
	final := p.WaitFinal(accepted, 90*time.Second)
	if got := countStatus(final); got[order.Created] != 100 {
		t.Fatalf("statuses %v, want 100 CREATED", got)
	}
	p.WaitDrained(sale.ItemID, 30*time.Second)
	if inv := p.Check(sale); inv.DBStock != 0 || inv.RedisStock != 0 || inv.LiveOrders != 100 {
		t.Fatalf("after the sale: %+v", inv)
	}
	if res := p.Reconcile("--item", fmt.Sprint(sale.ItemID)); res.Code != 0 {
		t.Fatalf("reconciler exit %d:\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
}

// startConsumersWithoutSweep starts n consumers with the stranded-
// reservation sweep off (it would start after an hour), so only Kafka's
// redelivery can finish what a killed one left.
func startConsumersWithoutSweep(p *pipelinetest.Pipeline, n int) []*pipelinetest.Proc {
	var out []*pipelinetest.Proc
	for range n {
		out = append(out, p.StartConsumer("SECKILL_CONSUMER_BATCH=20", "SECKILL_SWEEP_AFTER=1h"))
	}
	return out
}

// killWorkingConsumer kills, with SIGKILL, a consumer that has created
// orders, so its partitions and unfinished work must move to the others.
func killWorkingConsumer(t *testing.T, consumers []*pipelinetest.Proc) {
	t.Helper()
	var working *pipelinetest.Proc
	waittest.UntilEvery(t, 60*time.Second, 5*time.Millisecond, "a consumer created an order", func() bool {
		for _, c := range consumers {
			if strings.Contains(c.Log(), `"msg":"order created"`) {
				working = c
				return true
			}
		}
		return false
	})
	working.Kill()
}
