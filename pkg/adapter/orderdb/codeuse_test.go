package orderdb_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
)

// codes is the raw connection the tests put sale_codes rows in with, as
// the operator's store would, and read them back with.
type codes struct {
	t   *testing.T
	raw *sql.DB
}

func openCodes(t *testing.T, db *mysqltest.DB) codes {
	t.Helper()
	raw, err := sql.Open("mysql", db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return codes{t, raw}
}

// add writes a code of activity 1 with uses and used; subject "" is anyone's.
func (c codes) add(code string, uses, used int, subject string, revoked bool) string {
	c.t.Helper()
	d := string(access.Hash([]byte("k"), 1, code))
	var sub any
	if subject != "" {
		sub = subject
	}
	q := "INSERT INTO sale_codes (activity_id, digest, uses, used, subject, revoked_at, created_at) VALUES (1, ?, ?, ?, ?, IF(?, NOW(3), NULL), NOW(3))"
	if _, err := c.raw.Exec(q, d, uses, used, sub, revoked); err != nil {
		c.t.Fatal(err)
	}
	return d
}

func (c codes) used(digest string) int {
	c.t.Helper()
	var n int
	if err := c.raw.QueryRow("SELECT used FROM sale_codes WHERE activity_id = 1 AND digest = ?", digest).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

func (c codes) accessCode(orderNo string) string {
	c.t.Helper()
	var d sql.NullString
	if err := c.raw.QueryRow("SELECT access_code FROM orders WHERE order_no = ?", orderNo).Scan(&d); err != nil {
		c.t.Fatal(err)
	}
	return d.String
}

func coded(r order.FulfilRequest, digest string) order.FulfilRequest {
	r.Event.AccessCode = digest
	return r
}

// The consumer's write takes a use of each order's code in MySQL, in the
// batch's transaction or the order's own; an order whose code MySQL has no
// use of fails for it, taking no stock, and one that finds no stock takes
// no use.
func TestFulfilTakesTheCode(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 5)
	ctx := context.Background()
	c := openCodes(t, db)
	a, b := c.add("ALPHA", 1, 0, "", false), c.add("BRAVO", 2, 0, "1", false)

	// A batch MySQL takes whole.
	ok1, ok2 := coded(req(item, 1, 1), b), coded(req(item, 2, 1), a)
	out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{ok1, ok2, req(item, 3, 1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []order.FulfilRequest{ok1, ok2} {
		if o := out[r.Event.OrderNo]; o.Status != order.Created {
			t.Fatalf("%s: %+v", r.Event.OrderNo, o)
		}
		if got := c.accessCode(r.Event.OrderNo); got != r.Event.AccessCode {
			t.Fatalf("access_code %q, want %q", got, r.Event.AccessCode)
		}
	}
	if c.used(a) != 1 || c.used(b) != 1 {
		t.Fatalf("used %d and %d, want 1 and 1", c.used(a), c.used(b))
	}

	// A batch with refused codes: it goes order by order, and each fails
	// for its own reason.
	revoked := c.add("REVOKED", 1, 0, "", true)
	refusals := []struct {
		r    order.FulfilRequest
		want string
	}{
		{coded(req(item, 4, 1), a), order.ReasonCodeUsed},
		{coded(req(item, 5, 1), b), order.ReasonCodeInvalid}, // bound to buyer 1
		{coded(req(item, 6, 1), revoked), order.ReasonCodeInvalid},
		{coded(req(item, 7, 1), string(access.Hash([]byte("k"), 1, "NEVER"))), order.ReasonCodeInvalid},
	}
	reqs := []order.FulfilRequest{req(item, 8, 1)}
	for _, f := range refusals {
		reqs = append(reqs, f.r)
	}
	if out, err = mysqltest.Fulfil(ctx, db.DB, reqs); err != nil {
		t.Fatal(err)
	}
	for _, f := range refusals {
		if o := out[f.r.Event.OrderNo]; o.Status != order.Failed || o.Reason != f.want {
			t.Fatalf("%s: %+v, want FAILED %s", f.r.Event.OrderNo, o, f.want)
		}
	}
	if s, _ := db.Activities.ItemStock(ctx, item); s != 1 {
		t.Fatalf("stock %d, want 1 (four orders sold, the refused took none)", s)
	}
	// The last unit goes; then an order with a good code finds no stock
	// and keeps no use.
	if _, err = mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{req(item, 9, 1)}); err != nil {
		t.Fatal(err)
	}
	short := coded(req(item, 1, 1), b)
	short.Event.IdempotencyKey = "short"
	if out, err = mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{short}); err != nil {
		t.Fatal(err)
	}
	if o := out[short.Event.OrderNo]; o.Status != order.Failed || o.Reason != order.ReasonOutOfStock {
		t.Fatalf("no stock: %+v", o)
	}
	if c.used(a) != 1 || c.used(b) != 1 || c.used(revoked) != 0 {
		t.Fatalf("used %d, %d, %d; want 1, 1, 0", c.used(a), c.used(b), c.used(revoked))
	}
}

// Buyers' orders racing for one single-use code in separate consumers'
// transactions: exactly one is created.
func TestFulfilCodeRace(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 100)
	ctx := context.Background()
	c := openCodes(t, db)
	d := c.add("SINGLE", 1, 0, "", false)
	var wg sync.WaitGroup
	var mu sync.Mutex
	status := map[string]int{}
	for u := range 16 {
		wg.Go(func() {
			r := coded(req(item, int64(u+1), 1), d)
			out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{r})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			o := out[r.Event.OrderNo]
			status[string(o.Status)+" "+o.Reason]++
		})
	}
	wg.Wait()
	if status["CREATED "] != 1 || status["FAILED "+order.ReasonCodeUsed] != 15 {
		t.Fatalf("outcomes %v, want one CREATED and 15 FAILED CODE_USED", status)
	}
	if c.used(d) != 1 {
		t.Fatalf("used %d, want 1", c.used(d))
	}
	if s, _ := db.Activities.ItemStock(ctx, item); s != 99 {
		t.Fatalf("stock %d, want 99", s)
	}
}

// A close that ends a CREATED order unsold gives its code's use back in
// its transaction, once; a paid order keeps it.
func TestCloseGivesTheCodeBack(t *testing.T) {
	t.Parallel()
	db, item := setup(t, 10)
	ctx := context.Background()
	c := openCodes(t, db)
	d := c.add("COMEBACK", 2, 0, "", false)
	var nos []string
	var reqs []order.FulfilRequest
	for u := range 2 {
		r := coded(req(item, int64(u+1), 1), d)
		reqs = append(reqs, r)
		nos = append(nos, r.Event.OrderNo)
	}
	if _, err := mysqltest.Fulfil(ctx, db.DB, reqs); err != nil {
		t.Fatal(err)
	}
	if c.used(d) != 2 {
		t.Fatalf("used %d, want 2", c.used(d))
	}
	if tr, err := db.Orders.Pay(ctx, "2", nos[1]); err != nil || !tr.Won {
		t.Fatalf("pay: %+v, %v", tr, err)
	}
	for _, reason := range []string{order.ReasonPaymentTimeout, order.ReasonCancelled} {
		for _, no := range nos {
			if _, err := db.Orders.CloseOrder(ctx, "", no, reason); err != nil {
				t.Fatal(err)
			}
		}
	}
	if c.used(d) != 1 {
		t.Fatalf("used %d after the unpaid one closed (twice) and the paid one did not, want 1", c.used(d))
	}
	// The code that came back is used again.
	again := coded(req(item, 3, 1), d)
	out, err := mysqltest.Fulfil(ctx, db.DB, []order.FulfilRequest{again})
	if err != nil || out[again.Event.OrderNo].Status != order.Created {
		t.Fatalf("the code back: %+v, %v", out, err)
	}
	if c.used(d) != 2 {
		t.Fatalf("used %d, want 2", c.used(d))
	}
	if s, _ := db.Activities.ItemStock(ctx, item); s != 8 {
		t.Fatalf("stock %d, want 8", s)
	}
}
