package orderdb_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Instances starting together agree on one key, and a repeated call (as
// after a lost answer) returns it again.
func TestOrderNumberKey(t *testing.T) {
	t.Parallel()
	db := mysqltest.New(t)
	keys := make([][]byte, 4)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := db.Orders.OrderNumberKey(context.Background())
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	again, err := db.Orders.OrderNumberKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != order.NumberKeySize {
		t.Fatalf("key of %d bytes", len(again))
	}
	for _, k := range keys {
		if !bytes.Equal(k, again) {
			t.Fatalf("keys differ: %x and %x", k, again)
		}
	}
}

// The answer to the key's INSERT, or to its SELECT, is lost: the call
// fails, and the next call (the api's next start) reads the one key that
// won, the same every instance reads.
func TestOrderNumberKeyLostAnswer(t *testing.T) {
	t.Parallel()
	for _, stmt := range []string{"INSERT IGNORE INTO shared_keys", "SELECT value FROM shared_keys"} {
		t.Run(stmt, func(t *testing.T) {
			t.Parallel()
			db := mysqltest.New(t)
			p, via := proxiedOrderDB(t, db)
			ctx := context.Background()
			p.CutAfter(proxytest.MySQLQuery(stmt), time.Second)
			if k, err := via.Orders.OrderNumberKey(ctx); err == nil {
				t.Fatalf("key %x through a lost answer", k)
			}
			if got := p.Lost(); got != 1 {
				t.Fatalf("proxy lost %d answers, want 1", got)
			}
			waitCutOver(t, via)
			k, err := via.Orders.OrderNumberKey(ctx)
			if err != nil {
				t.Fatal(err)
			}
			direct, err := db.Orders.OrderNumberKey(ctx)
			if err != nil || !bytes.Equal(k, direct) {
				t.Fatalf("key %x after the lost answer, %x (%v) read directly", k, direct, err)
			}
		})
	}
}
