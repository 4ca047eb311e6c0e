//go:build chaos

package chaos

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/domain/order"
)

// N8. A drop with a waiting room while the api's Redis loses answers of
// every script the room runs: joins (the join runs again and finds the one
// place it made), advances (the next run admits by the time, nobody
// twice), and reserves in room mode (the retry with the same key finds the
// order, or the 503's release gave the admission back). Every unit sells
// once, only to admitted buyers, one order each; Redis ends equal to MySQL.
func TestChaosNetRedisRoomRepliesLost(t *testing.T) {
	fault(t)
	roomRepliesLost(t, false)
}

// N8c. N8 on the Redis Cluster: the room's keys share the sale's slot.
func TestChaosNetRedisClusterRoomRepliesLost(t *testing.T) {
	fault(t)
	roomRepliesLost(t, true)
}

// roomBuyer is what one buyer of roomRepliesLost saw.
type roomBuyer struct {
	admitted bool
	orderNo  string
	soldOut  bool
}

func roomRepliesLost(t *testing.T, cluster bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3, RedisCluster: cluster})
	apiRedis, env := redisProxy(t, cluster)
	api := p.StartAPI(env)
	p.StartConsumer()
	const buyers = 120
	startsIn := 8 * time.Second
	sale := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{15, 25}, StartsIn: startsIn,
		WaitingRoom: map[string]any{"admit_per_second": 100, "admission_ttl_seconds": 30}})
	start := time.Now().Add(startsIn)
	queuePath := fmt.Sprintf("/api/v1/activities/%d/queue", sale.ActivityID)
	type place struct {
		State     string `json:"state"`
		Position  *int64 `json:"position"`
		Admission string `json:"admission"`
	}
	// retry sends until the api answers something other than a 503, a
	// 429 or no answer, for at most 30 s.
	retry := func(f func() (int, error)) int {
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, err := f()
			if (err == nil && code != http.StatusServiceUnavailable && code != http.StatusTooManyRequests) || time.Now().After(deadline) {
				return code
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The joins, three of their answers lost.
	apiRedis.LoseReply(luaScript("room_join"), 3)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 20)
	for u := int64(1); u <= buyers; u++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var pl place
			if code := retry(func() (int, error) { return api.Do("POST", queuePath, u, "", nil, nil, &pl) }); code != 200 || pl.State != "WAITING" {
				t.Errorf("buyer %d's join: %d %+v", u, code, pl)
			}
		}()
	}
	wg.Wait()
	apiRedis.WaitLost(t, 3, 10*time.Second)
	if time.Now().After(start) {
		t.Fatalf("the joins took past the start: give them more time")
	}
	time.Sleep(time.Until(start))

	// From the start: advances and reserves lose answers too.
	apiRedis.LoseReply(luaScript("room_advance"), 3)
	apiRedis.LoseReply(luaScript("reserve"), 3)
	seen := make([]roomBuyer, buyers+1)
	var unadmitted atomic.Int64
	for u := int64(1); u <= buyers; u++ {
		wg.Go(func() {
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				var pl place
				if code := retry(func() (int, error) { return api.Do("GET", queuePath, u, "", nil, nil, &pl) }); code != 200 {
					t.Errorf("buyer %d's poll: %d", u, code)
					return
				}
				switch pl.State {
				case "SOLD_OUT":
					seen[u].soldOut = true
					return
				case "ADMITTED":
				default:
					time.Sleep(200 * time.Millisecond)
					continue
				}
				seen[u].admitted = true
				if u%10 == 0 {
					// An order without the admission reserves nothing.
					if pl, _ := api.PlaceOrderAdmitted(strconv.FormatInt(u, 10), fmt.Sprintf("bare-%d", u), sale.ActivityID, sale.Items[0].ID, 1, ""); pl.Code != 403 {
						t.Errorf("buyer %d's order without the admission: %+v", u, pl)
					}
					unadmitted.Add(1)
				}
				for _, it := range sale.Items {
					var got pipelinetest.Placed
					retry(func() (int, error) {
						var err error
						got, err = api.PlaceOrderAdmitted(strconv.FormatInt(u, 10), fmt.Sprintf("room-%d", u), sale.ActivityID, it.ID, 1, pl.Admission)
						return got.Code, err
					})
					if got.Code == 202 {
						seen[u].orderNo = got.OrderNo
						return
					}
					if got.Error != "SOLD_OUT" {
						t.Errorf("buyer %d's order of item %d: %+v", u, it.ID, got)
						return
					}
				}
				return // both sizes sold out under the buyer: done
			}
			t.Errorf("buyer %d: neither admitted nor told SOLD_OUT within a minute", u)
		})
	}
	wg.Wait()
	apiRedis.WaitLost(t, 9, 10*time.Second)

	accepted := map[string]int64{}
	soldOut := 0
	for u := int64(1); u <= buyers; u++ {
		b := seen[u]
		if b.orderNo != "" {
			if !b.admitted {
				t.Errorf("buyer %d got order %s without being admitted", u, b.orderNo)
			}
			accepted[b.orderNo] = u
		}
		if b.soldOut {
			soldOut++
		}
	}
	inv := settle(t, p, sale, accepted, 60*time.Second)
	final, err := p.DB.Orders.Orders(t.Context(), keys(accepted))
	if err != nil {
		t.Fatal(err)
	}
	for no, u := range accepted {
		if final[no].Status != order.Created {
			t.Errorf("buyer %d's order %s ended %s %s", u, no, final[no].Status, final[no].FailureReason)
		}
	}
	if inv.LiveUnits != sale.Stock || len(accepted) != int(sale.Stock) {
		t.Fatalf("%d live units in %d orders, want the %d units sold, one to each of %d admitted buyers", inv.LiveUnits, len(accepted), sale.Stock, sale.Stock)
	}
	t.Logf("%d orders, %d waiters told SOLD_OUT, %d orders without an admission refused, answers lost %d",
		len(accepted), soldOut, unadmitted.Load(), apiRedis.Lost())
}
