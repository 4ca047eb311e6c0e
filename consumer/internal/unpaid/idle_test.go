package unpaid_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/seckill/seckill/consumer/internal/unpaid"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// A closer pass costs what is due, not what the database holds: on the
// history of 40 past sales (200,000 orders: paid, closed and released,
// failed, unpaid with a year left to pay; one sale cancelled, its unpaid
// orders closed) with nothing due, a pass reads a handful of index
// entries, where it read every CLOSED order (releases due) and the whole
// orders table (cancelled sales' unpaid orders) before 0011.
func TestIdlePassReadsOnlyWhatIsDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	db := mysqltest.New(t)
	if _, err := mysqltest.LoadHistory(ctx, db.DB, mysqltest.History{Orders: 200_000}); err != nil {
		t.Fatal(err)
	}
	session := db.OneSession(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &unpaid.Closer{
		Lifecycle: &lifecycle.Service{Tx: session, Events: session.Outbox, DB: session.Orders, Payments: session.Payments, Stock: stockredis.New(rdb, prefix).Reservations, Log: log},
		Locker:    lock.New(rdb, lock.Options{Prefix: prefix, InstanceID: "closer-idle"}),
		Log:       log,
	}
	var st lifecycle.Stats
	read := mysqltest.RowsRead(t, session, func() {
		var err error
		if st, err = c.Once(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if st != (lifecycle.Stats{}) {
		t.Errorf("idle pass did %+v, want nothing", st)
	}
	// Three statements that find nothing: a few index dives each.
	if read > 30 {
		t.Errorf("idle pass read %d rows and index entries of a 200,000-order history, want at most 30", read)
	}
	t.Logf("idle pass read %d rows and index entries", read)
}
