package orderdb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
)

// Orders answers for any number of order numbers: 70,000 of them (more
// than the 65,535 placeholders MySQL allows in one statement, Error 1390
// before) are read ListBatch a statement, and every one MySQL has is found.
func TestOrdersReadsMoreNumbersThanOneStatementHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := mysqltest.New(t)
	if _, err := mysqltest.LoadHistory(ctx, db.DB, mysqltest.History{Orders: 3000, Sales: 2}); err != nil {
		t.Fatal(err)
	}
	var have []string
	if err := db.Gorm().Raw("SELECT order_no FROM orders ORDER BY id").Scan(&have).Error; err != nil {
		t.Fatal(err)
	}
	nos := make([]string, 0, 70_000)
	for i := range 70_000 - len(have) {
		nos = append(nos, fmt.Sprintf("NOT-AN-ORDER-%d", i))
		if i%23 == 0 && len(have) > 0 { // the real ones spread over the chunks
			nos, have = append(nos, have[0]), have[1:]
		}
	}
	nos = append(nos, have...)
	got, err := db.Orders.Orders(ctx, nos)
	if err != nil {
		t.Fatalf("read %d orders: %v", len(nos), err)
	}
	if len(got) != 3000 {
		t.Fatalf("found %d orders among %d numbers, want the 3000 MySQL has", len(got), len(nos))
	}
}
