package orderdb_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/seckill/seckill/pkg/mysqltest"
	"github.com/seckill/seckill/pkg/order"
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
			k, err := db.OrderNumberKey(context.Background())
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	again, err := db.OrderNumberKey(context.Background())
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
