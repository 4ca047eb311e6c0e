package orderdb_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

var errAfter = errors.New("a later step of the unit failed")

// Buyers write orders at once, each in a unit of work that also writes one
// more row (an item, standing for the event or record a service adds) and
// then, for every third buyer, fails. Each unit commits whole or not at
// all: the units that failed left no order, no extra row and no stock
// taken; the others left both rows, and the stock taken is exactly their
// CREATED orders'. The order's own write is a transaction of the store's
// (a savepoint inside the unit).
func TestUnitOfWorkCommitsTheChangeAndTheExtraRowTogether(t *testing.T) {
	t.Parallel()
	const stock, buyers = 12, 30
	db, item := setup(t, stock)
	reqs := make([]order.FulfilRequest, buyers)
	for i := range reqs {
		reqs[i] = req(item, int64(i+1), 1)
	}
	// A store call that bypassed the unit would wait for a second
	// connection while the unit holds one; the deadline makes it fail.
	unitCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make([]error, buyers)
	outs := make([]order.FulfilOutcome, buyers)
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.InTx(unitCtx, func(ctx context.Context) error {
				o, err := db.Orders.FulfilOne(ctx, reqs[i])
				if err != nil {
					return err
				}
				outs[i] = o
				if _, err := db.Activities.CreateItem(ctx, fmt.Sprintf("extra-%d", i), 0); err != nil {
					return err
				}
				if i%3 == 0 {
					return errAfter
				}
				return nil
			})
		}()
	}
	wg.Wait()
	ctx := context.Background()
	created := 0
	for i, r := range reqs {
		_, orderErr := db.Orders.Order(ctx, r.Event.OrderNo)
		var extras int64
		if err := db.Gorm().Raw("SELECT COUNT(*) FROM items WHERE name = ?", fmt.Sprintf("extra-%d", i)).Scan(&extras).Error; err != nil {
			t.Fatal(err)
		}
		switch {
		case i%3 == 0:
			if !errors.Is(errs[i], errAfter) {
				t.Fatalf("buyer %d: unit error %v, want the step's own", i, errs[i])
			}
			if !errors.Is(orderErr, order.ErrNotFound) || extras != 0 {
				t.Fatalf("buyer %d: the unit failed but left its order (%v) or %d extra rows", i, orderErr, extras)
			}
		case errs[i] != nil:
			t.Fatalf("buyer %d: %v", i, errs[i])
		default:
			if orderErr != nil || extras != 1 {
				t.Fatalf("buyer %d: the unit committed but its order is %v and it has %d extra rows", i, orderErr, extras)
			}
			if outs[i].Status == order.Created {
				created++
			}
		}
	}
	left, err := db.Activities.ItemStock(ctx, item)
	if err != nil {
		t.Fatal(err)
	}
	if int(left)+created != stock || created == 0 {
		t.Fatalf("stock left %d with %d committed CREATED orders, want them to add up to %d", left, created, stock)
	}
}

// A unit inside a unit is a savepoint: its failure undoes its own writes
// only, and the outer unit goes on and commits. Inside a unit, its store
// calls see its writes; outside it, nothing shows before the commit.
func TestUnitOfWorkNestsAndIsolates(t *testing.T) {
	t.Parallel()
	db, _ := setup(t, 1)
	var inner, outer int64
	unitCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := db.InTx(unitCtx, func(ctx context.Context) error {
		err := db.InTx(ctx, func(ctx context.Context) error {
			it, err := db.Activities.CreateItem(ctx, "inner", 1)
			inner = it.ID
			if err != nil {
				return err
			}
			return errAfter
		})
		if !errors.Is(err, errAfter) {
			return fmt.Errorf("inner unit: %v, want its own error", err)
		}
		it, err := db.Activities.CreateItem(ctx, "outer", 1)
		if err != nil {
			return err
		}
		outer = it.ID
		if _, err := db.Activities.Item(ctx, outer); err != nil {
			return fmt.Errorf("the unit does not see its own write: %v", err)
		}
		if _, err := db.Activities.Item(unitCtx, outer); !errors.Is(err, order.ErrNotFound) {
			return fmt.Errorf("outside the unit, its write shows before the commit: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.Activities.Item(ctx, inner); !errors.Is(err, order.ErrNotFound) || inner == 0 {
		t.Fatalf("the failed inner unit's item %d: %v, want it rolled back", inner, err)
	}
	if _, err := db.Activities.Item(ctx, outer); err != nil {
		t.Fatalf("the outer unit's item: %v", err)
	}
}
