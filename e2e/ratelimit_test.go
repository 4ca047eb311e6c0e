package e2e_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
)

// One user hammering the API is throttled with 429 RATE_LIMITED and a
// Retry-After, while other users keep being served.
func TestRateLimitDoesNotLetOneUserStarveOthers(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI("SECKILL_RATE_LIMIT_USER=5")
	p.StartConsumer()
	sale := api.CreateSale(1000, 1)

	var limited, served atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 { // the hammer: user 666, as fast as it can
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var body struct {
					Error struct{ Code string } `json:"error"`
				}
				code, err := api.Do("GET", "/api/v1/orders/01KB000000000000000000000-1", 666, "", nil, nil, &body)
				if err != nil {
					t.Error(err)
					return
				}
				if code == 429 && body.Error.Code == "RATE_LIMITED" {
					limited.Add(1)
				} else {
					served.Add(1)
				}
			}
		}()
	}
	// Meanwhile 50 other users each place an order: every one is answered
	// normally.
	accepted, codes := crowd(t, api, sale.ActivityID, userRange(1, 50), 10)
	close(stop)
	wg.Wait()
	if len(accepted) != 50 {
		t.Fatalf("other users: accepted %d, refused %v; want all 50 served", len(accepted), codes)
	}
	if limited.Load() == 0 || served.Load() > limited.Load() {
		t.Fatalf("the hammering user got %d answers and %d rate-limited; want mostly limited", served.Load(), limited.Load())
	}
	t.Logf("hammer: %d served, %d limited", served.Load(), limited.Load())
	p.WaitFinal(accepted, 30*time.Second)
}
