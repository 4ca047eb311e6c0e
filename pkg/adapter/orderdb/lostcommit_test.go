package orderdb_test

import (
	"context"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/payment"
)

// proxiedOrderDB opens a second handle on db's database through a MySQL
// proxy, so a test can lose the answer to one statement.
func proxiedOrderDB(t *testing.T, db *mysqltest.DB) (*proxytest.Proxy, *orderdb.DB) {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	p := proxytest.Start(t, cfg.Addr, proxytest.MySQL)
	cfg.Addr = p.Addr()
	via, err := orderdb.Open(orderdb.Config{DSN: cfg.FormatDSN(), MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { via.Close() })
	if err := via.Ping(context.Background()); err != nil {
		t.Fatalf("MySQL through the proxy: %v", err)
	}
	return p, via
}

// cutCommit arms a cut after the next COMMIT's answer starts arriving.
func cutCommit(p *proxytest.Proxy) { p.CutAfter(proxytest.MySQLQuery("COMMIT"), time.Second) }

// waitCutOver waits until MySQL answers through the proxy again.
func waitCutOver(t *testing.T, via *orderdb.DB) {
	t.Helper()
	waittest.UntilEvery(t, 15*time.Second, 250*time.Millisecond, "MySQL answers through the proxy after the cut", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return via.Ping(ctx) == nil
	})
}

// The COMMIT of a restock reaches MySQL and its answer is lost: the call
// fails, yet the restock is committed; the retry with the same key finds
// it (not created again) and the stock was raised exactly once.
func TestRestockLostCommitRetryFindsIt(t *testing.T) {
	t.Parallel()
	const stock, qty = 10, 7
	db, item := setup(t, stock)
	p, via := proxiedOrderDB(t, db)
	ctx := context.Background()

	cutCommit(p)
	if r, created, err := via.Restocks.Restock(ctx, item, "restock-lost", qty); err == nil {
		t.Fatalf("restock answered through a cut COMMIT: %+v created=%v", r, created)
	} else {
		t.Logf("restock with its COMMIT answer lost: %v", err)
	}
	if got := p.Lost(); got != 1 {
		t.Fatalf("proxy lost %d answers, want 1 (the COMMIT's)", got)
	}

	// Committed: seen directly, not through the proxy.
	pending, err := db.Restocks.PendingRestocks(ctx, item)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].Key != "restock-lost" || pending[0].Quantity != qty {
		t.Fatalf("restocks after the lost COMMIT %+v, want the one of key restock-lost, %d units", pending, qty)
	}
	if got, err := db.Activities.ItemStock(ctx, item); err != nil || got != stock+qty {
		t.Fatalf("item_stock after the lost COMMIT %d (%v), want %d: it committed", got, err, stock+qty)
	}

	waitCutOver(t, via)
	r, created, err := via.Restocks.Restock(ctx, item, "restock-lost", qty)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if created {
		t.Fatalf("the retry created the restock again: %+v", r)
	}
	if r.ID != pending[0].ID || r.Key != "restock-lost" || r.Quantity != qty || r.ItemID != item {
		t.Fatalf("the retry answered %+v, want the committed restock %+v", r, pending[0])
	}
	if got, err := db.Activities.ItemStock(ctx, item); err != nil || got != stock+qty {
		t.Fatalf("item_stock after the retry %d (%v), want %d: raised once", got, err, stock+qty)
	}
	if pending, err := db.Restocks.PendingRestocks(ctx, item); err != nil || len(pending) != 1 {
		t.Fatalf("restocks after the retry %+v (%v), want one", pending, err)
	}
	if got := p.Lost(); got != 1 {
		t.Fatalf("proxy lost %d answers, want 1", got)
	}
}

// The COMMIT of a payment reaches MySQL and its answer is lost: the call
// fails, yet the payment is committed and the order PAID; the retry of the
// same notification answers Duplicate, with one payments row and the order
// PAID once.
func TestRecordPaymentLostCommitRetryIsDuplicate(t *testing.T) {
	t.Parallel()
	const stock = 10
	eur := order.Money{Amount: 1500, Currency: "EUR"}
	db, item := setup(t, stock)
	ctx := context.Background()
	r := req(item, 1, 1)
	r.UnitPrice = eur
	no := r.Event.OrderNo
	out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{r})
	if err != nil {
		t.Fatal(err)
	}
	if out[no].Status != order.Created {
		t.Fatalf("fixture order %+v, want CREATED", out[no])
	}
	p, via := proxiedOrderDB(t, db)
	pay := payment.Transaction{TransactionID: "tx-lost-commit", OrderNo: no, Amount: eur}

	cutCommit(p)
	if rec, err := via.Payments.RecordPayment(ctx, pay); err == nil {
		t.Fatalf("payment answered through a cut COMMIT: %+v", rec)
	} else {
		t.Logf("payment with its COMMIT answer lost: %v", err)
	}
	if got := p.Lost(); got != 1 {
		t.Fatalf("proxy lost %d answers, want 1 (the COMMIT's)", got)
	}

	// Committed: seen directly, not through the proxy.
	ps, err := db.Payments.PaymentsOf(ctx, no)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].TransactionID != pay.TransactionID || ps[0].Outcome != payment.Paid {
		t.Fatalf("payments after the lost COMMIT %+v, want one PAID of %s", ps, pay.TransactionID)
	}
	if o, err := db.Orders.Order(ctx, no); err != nil || o.Status != order.Paid {
		t.Fatalf("order after the lost COMMIT %+v (%v), want PAID: it committed", o, err)
	}

	waitCutOver(t, via)
	rec, err := via.Payments.RecordPayment(ctx, pay)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !rec.Duplicate || rec.Closed {
		t.Fatalf("the retry answered %+v, want a Duplicate", rec)
	}
	if rec.Payment.TransactionID != pay.TransactionID || rec.Payment.Outcome != payment.Paid || rec.Order.Status != order.Paid {
		t.Fatalf("the retry answered %+v, want the PAID payment and the PAID order", rec)
	}
	if ps, err := db.Payments.PaymentsOf(ctx, no); err != nil || len(ps) != 1 {
		t.Fatalf("payments after the retry %+v (%v), want one", ps, err)
	}
	counts, err := db.Orders.StatusCounts(ctx, item)
	if err != nil {
		t.Fatal(err)
	}
	if counts[order.Paid] != 1 || len(counts) != 1 {
		t.Fatalf("orders by status %v, want one PAID", counts)
	}
	// Paying does not move stock: the one unit the order took stays taken.
	if got, err := db.Activities.ItemStock(ctx, item); err != nil || got != stock-1 {
		t.Fatalf("item_stock %d (%v), want %d", got, err, stock-1)
	}
	if got := p.Lost(); got != 1 {
		t.Fatalf("proxy lost %d answers, want 1", got)
	}
}

// The COMMIT of a cancel reaches MySQL and its answer is lost: the call
// fails, yet the sale is ended and cancelled; the operator's retry a moment
// later changes nothing more (the end stays at the first call's time, the
// cancellation at its first mark) and answers the ended sale.
func TestCancelLostCommitRetryChangesNothing(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 10)
	ctx := context.Background()
	act, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: item, StartsAt: time.Now().Add(-time.Minute),
		EndsAt: time.Now().Add(time.Hour), PerUserLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, via := proxiedOrderDB(t, db)
	cancelledAt := func() *time.Time {
		t.Helper()
		var at *time.Time
		if err := db.Gorm().WithContext(ctx).Raw("SELECT cancelled_at FROM activities WHERE id = ?", act.ID).Scan(&at).Error; err != nil {
			t.Fatal(err)
		}
		return at
	}

	first := time.Now().UTC().Truncate(time.Millisecond)
	before, err := db.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cutCommit(p)
	if a, err := via.Activities.EndActivity(ctx, act.ID, first, activity.CancelNow); err == nil {
		t.Fatalf("cancel answered through a cut COMMIT: %+v", a)
	} else {
		t.Logf("cancel with its COMMIT answer lost: %v", err)
	}
	if got := p.Lost(); got != 1 {
		t.Fatalf("proxy lost %d answers, want 1 (the COMMIT's)", got)
	}
	// Committed: seen directly, not through the proxy.
	ended, err := db.Activities.Activity(ctx, act.ID)
	if err != nil {
		t.Fatal(err)
	}
	marked := cancelledAt()
	if !ended.EndsAt.Equal(first) || marked == nil || marked.Before(before.Truncate(time.Millisecond)) {
		t.Fatalf("after the lost COMMIT: ends_at %s, cancelled_at %v; want ends_at %s and the cancel marked by MySQL's clock, not before %s",
			ended.EndsAt, marked, first, before)
	}

	waitCutOver(t, via)
	retry, err := via.Activities.EndActivity(ctx, act.ID, first.Add(2*time.Second), activity.CancelNow)
	if err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if !retry.EndsAt.Equal(first) {
		t.Fatalf("the retry moved ends_at to %s, want it left at %s", retry.EndsAt, first)
	}
	if again := cancelledAt(); again == nil || !again.Equal(*marked) {
		t.Fatalf("the retry moved cancelled_at to %v, want it left at %s", again, marked)
	}
}

// A cancel that waits for a payment holding the sale's row (the shared
// lock Pay and RecordPayment take) is recorded after that payment: the
// order's updated_at is never later than the sale's cancelled_at, although
// the cancel's caller read its clock before the wait.
func TestCancelIsRecordedAfterThePaymentItWaitedFor(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 10)
	ctx := context.Background()
	r := req(item, 1, 1)
	no := r.Event.OrderNo
	if out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{r}); err != nil || out[no].Status != order.Created {
		t.Fatalf("fixture order %+v (%v), want CREATED", out[no], err)
	}
	g := db.Gorm().WithContext(ctx)
	tx := g.Begin()
	if tx.Error != nil {
		t.Fatal(tx.Error)
	}
	defer tx.Rollback()
	// What Pay does, held open: the sale's row in share mode, then the
	// order paid.
	var sale struct{ CancelledAt *time.Time }
	if err := tx.Raw("SELECT cancelled_at FROM activities WHERE id = ? LOCK IN SHARE MODE", r.Event.ActivityID).
		Scan(&sale).Error; err != nil || sale.CancelledAt != nil {
		t.Fatalf("sale's row: cancelled_at %v (%v), want a sale not cancelled", sale.CancelledAt, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := db.Activities.EndActivity(ctx, r.Event.ActivityID, time.Now(), activity.CancelNow)
		done <- err
	}()
	// The cancel has read its clock and waits for the row.
	time.Sleep(300 * time.Millisecond)
	if res := tx.Exec("UPDATE orders SET status = 'PAID' WHERE order_no = ? AND status = 'CREATED'", no); res.Error != nil || res.RowsAffected != 1 {
		t.Fatalf("pay inside the held transaction: %v, %d rows", res.Error, res.RowsAffected)
	}
	select {
	case err := <-done:
		t.Fatalf("the cancel committed while a payment held the sale's row: %v", err)
	default:
	}
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var got struct {
		UpdatedAt   time.Time
		CancelledAt time.Time
	}
	if err := g.Raw(`SELECT o.updated_at, a.cancelled_at FROM orders o JOIN activities a ON a.id = o.activity_id
		WHERE o.order_no = ?`, no).Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	if got.UpdatedAt.After(got.CancelledAt) {
		t.Fatalf("order paid at %s, sale cancelled at %s: the record says paid after the cancel it came before",
			got.UpdatedAt.Format(time.StampMilli), got.CancelledAt.Format(time.StampMilli))
	}
}
