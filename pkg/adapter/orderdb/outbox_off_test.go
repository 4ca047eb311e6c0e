package orderdb_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/domain/order"
)

// With the outbox off (SECKILL_OUTBOX=off) orders written at once are all
// there and the outbox holds none of their events; the same database
// opened with it on records them.
func TestTheOutboxOffRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	on := mysqltest.New(t)
	off, err := orderdb.Open(orderdb.Config{DSN: on.DSN, NoEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	a := on.OpenSale(t, 100, order.Money{})
	gen := order.NewNumberGenerator()
	write := func(db *orderdb.DB, from int) {
		var wg sync.WaitGroup
		for u := from; u < from+20; u++ {
			wg.Go(func() {
				req := order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: gen.Next(a.ItemID), IdempotencyKey: "k",
					UserID: strconv.Itoa(u), ItemID: a.ItemID, ActivityID: a.ID, Quantity: 1, ReservedAt: time.Now()}, PayDeadline: time.Now().Add(time.Hour)}
				if _, err := mysqltest.Fulfil(ctx, db, []order.FulfilRequest{req}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	write(off, 1)
	var orders, events int64
	on.Gorm().Raw("SELECT COUNT(*) FROM orders").Scan(&orders)
	on.Gorm().Raw("SELECT COUNT(*) FROM outbox_events").Scan(&events)
	if orders != 20 || events != 0 {
		t.Fatalf("with the outbox off: %d orders, %d events; want 20 and none", orders, events)
	}
	write(on.DB, 21)
	on.Gorm().Raw("SELECT COUNT(*) FROM outbox_events").Scan(&events)
	if events != 20 {
		t.Fatalf("with the outbox on: %d events, want 20", events)
	}
}
