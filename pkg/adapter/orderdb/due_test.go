package orderdb_test

import (
	"context"
	"testing"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
)

// The closer's list of a cancelled sale's unpaid orders reads a batch, not
// the sale: with 10,000 CREATED orders of a cancelled sale, a call for 500
// reads about 500 index entries (it read and sorted all 10,000 when it
// ordered them by id), and the batches go through them all, each once.
func TestCancelledUnpaidReadsABatchNotTheSale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := mysqltest.New(t)
	l, err := mysqltest.LoadHistory(ctx, db.DB, mysqltest.History{Orders: 20_000, Sales: 2})
	if err != nil {
		t.Fatal(err)
	}
	cancelled := l.Activities[1] // LoadHistory cancels the sale in the middle
	// Its orders left unpaid by the cancel, none closed yet.
	if err := db.Gorm().Exec(`UPDATE orders SET status = 'CREATED', failure_reason = NULL, released_at = NULL
		WHERE activity_id = ?`, cancelled).Error; err != nil {
		t.Fatal(err)
	}
	session := db.OneSession(t)
	var nos []string
	read := mysqltest.RowsRead(t, session, func() {
		if nos, err = session.Orders.CancelledUnpaid(ctx, 0, 500); err != nil {
			t.Fatal(err)
		}
	})
	if len(nos) != 500 {
		t.Fatalf("listed %d, want 500", len(nos))
	}
	if read > 600 {
		t.Errorf("listing 500 of 10,000 unpaid orders of a cancelled sale read %d rows and index entries, want at most 600", read)
	}
	t.Logf("read %d rows and index entries for a batch of 500", read)
	// Batches (each closing what it listed) go through every order once.
	seen := map[string]bool{}
	for {
		nos, err := db.Orders.CancelledUnpaid(ctx, cancelled, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(nos) == 0 {
			break
		}
		for _, no := range nos {
			if seen[no] {
				t.Fatalf("order %s listed again after it was closed", no)
			}
			seen[no] = true
		}
		if err := db.Gorm().Exec("UPDATE orders SET status = 'CLOSED' WHERE order_no IN ?", nos).Error; err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 10_000 {
		t.Fatalf("the batches listed %d orders, want the sale's 10,000", len(seen))
	}
}
