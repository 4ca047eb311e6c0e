package strategies

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/seckill/seckill/internal/testkit/redistest"
)

// The safe strategies never oversell and never let a buyer order twice,
// however the requests race: 40 buyers, each clicking 5 times at once, for
// 25 units.
func TestSafeStrategiesUnderConcurrency(t *testing.T) {
	for _, name := range []string{"lock", "lua"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rdb, prefix := redistest.New(t)
			s, err := ByName(name, rdb, prefix)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := Load(ctx, rdb, s, 25); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			accepted := 0
			for user := range int64(40) {
				for range 5 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						err := s.Place(ctx, user+1, 1)
						switch {
						case err == nil:
							mu.Lock()
							accepted++
							mu.Unlock()
						case errors.Is(err, ErrSoldOut), errors.Is(err, ErrAlready):
						default:
							t.Error(err)
						}
					}()
				}
			}
			wg.Wait()
			got, err := Count(ctx, rdb, s)
			if err != nil {
				t.Fatal(err)
			}
			want := Tally{Orders: 25, Units: 25, Buyers: 25, Duplicates: 0, FinalStock: 0}
			if got != want || accepted != 25 {
				t.Fatalf("tally %+v with %d accepted; want %+v and 25", got, accepted, want)
			}
		})
	}
}

// One request at a time, the naive strategy behaves: its flaw is only the
// race, which the compare scenario shows live.
func TestNaiveSequential(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	s := NewNaive(rdb, prefix)
	ctx := context.Background()
	if err := Load(ctx, rdb, s, 2); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		user int64
		want error
	}{{1, nil}, {1, ErrAlready}, {2, nil}, {3, ErrSoldOut}}
	for _, st := range steps {
		if err := s.Place(ctx, st.user, 1); !errors.Is(err, st.want) {
			t.Fatalf("user %d: err = %v, want %v", st.user, err, st.want)
		}
	}
	got, err := Count(ctx, rdb, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Tally{Orders: 2, Units: 2, Buyers: 2, FinalStock: 0}); got != want {
		t.Fatalf("tally %+v, want %+v", got, want)
	}
}

func TestByName(t *testing.T) {
	for _, n := range Names {
		if _, err := ByName(n, nil, "p"); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := ByName("optimistic", nil, "p"); err == nil {
		t.Error("an unknown strategy was accepted")
	}
}
