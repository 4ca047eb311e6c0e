package reconcile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Restocks (half of them with their Redis step left undone, as an API
// that died after MySQL's commit, or answered 503) land while three
// warm-ups load the cold item from MySQL over and over, on one stock key
// and on 3 buckets. Then every restock is retried with its key (its Redis
// step again) and the reconciler repairs: every restocked unit is in Redis
// once, whatever the interleaving was (the seed is logged).
func TestRestocksAndWarmupsInterleaved(t *testing.T) {
	t.Parallel()
	for _, buckets := range []int{1, 3} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			f := newFixture(t, 20, time.Hour) // cold
			warmup := func() error {
				_, err := f.store.Stock.WarmupFrom(f.ctx, reservation.One(f.item), buckets, 2*time.Hour, f.db.Restocks)
				return err
			}
			const restocks = 24
			qty := make([]int64, restocks)
			step := make([]bool, restocks)
			total := int64(20)
			for i := range qty {
				qty[i] = 1 + rng.Int64N(9)
				step[i] = rng.IntN(2) == 0
				total += qty[i]
			}
			var wg sync.WaitGroup
			ids := make([]int64, restocks)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range restocks {
					rs, _, err := f.db.Restocks.Restock(f.ctx, f.item, fmt.Sprintf("r%d", i), qty[i])
					if err != nil {
						t.Error(err)
						return
					}
					ids[i] = rs.ID
					if step[i] {
						if _, err := f.store.Stock.Restock(f.ctx, reservation.One(f.item), rs.ID, rs.Quantity); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 8 {
						// A warm-up that keeps meeting restocks newer than its
						// read gives up (503) and is run again: fine here.
						if err := warmup(); err != nil && !errors.Is(err, order.ErrUnavailable) {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if s := f.redisStock(); s.Stock > total {
				t.Fatalf("Redis stock %d before the retries, MySQL %d: units offered that MySQL does not have", s.Stock, total)
			}
			if err := warmup(); err != nil {
				t.Fatal(err)
			}
			// The operator retries every restock (the same key runs its Redis
			// step again), then the reconciler repairs.
			for i, id := range ids {
				if _, err := f.store.Stock.Restock(f.ctx, reservation.One(f.item), id, qty[i]); err != nil {
					t.Fatal(err)
				}
			}
			if s := f.redisStock(); s.Stock != total {
				t.Fatalf("Redis stock %d after the retries, MySQL %d: want every restock in Redis once", s.Stock, total)
			}
			_, it := f.check(CheckAndRepair)
			if it.Verdict != OK && it.Verdict != Repaired {
				t.Fatalf("repair: %+v", it)
			}
			_, it = f.check(CheckOnly)
			wantItem(t, it, OK, total, total, 0, 0)
		})
	}
}
