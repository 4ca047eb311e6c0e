package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// drawOfTwo makes a draw of one size of 2 units with 4 entrants (users
// 1-4) and waits for its two winners' orders: it returns the sale and the
// users in rank order, winners first. window is the sale's payment window
// (0: the consumer's).
func drawOfTwo(t *testing.T, p *pipelinetest.Pipeline, api *pipelinetest.API, window time.Duration) (pipelinetest.Sale, []int64) {
	t.Helper()
	s := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{2}, EntriesCloseIn: 4 * time.Second, PaymentWindow: window})
	for u := int64(1); u <= 4; u++ {
		enter(t, api, s, u, s.Items[0].ID)
	}
	var users []int64
	waittest.UntilEvery(t, 60*time.Second, 200*time.Millisecond, "both winners' orders CREATED", func() bool {
		rows := ranking(t, p, s.ActivityID)
		users = users[:0]
		created := 0
		for _, r := range rows {
			u, _ := strconv.ParseInt(r.UserID, 10, 64)
			users = append(users, u)
			if r.Outcome == draw.Won && r.Status == "CREATED" {
				created++
			}
		}
		return created == 2
	})
	return s, users
}

// entryOf is the buyer's entry as GET .../entries/me answers it, with its
// order's status in MySQL ("" without an order).
// A 503 (a read MySQL did not answer in time on a loaded machine) is
// asked again, as the buyer's page does.
func entryOf(t *testing.T, p *pipelinetest.Pipeline, api *pipelinetest.API, s pipelinetest.Sale, user int64) (pipelinetest.Entry, string) {
	t.Helper()
	var e pipelinetest.Entry
	waittest.UntilEvery(t, 10*time.Second, 100*time.Millisecond, "the buyer's entry", func() bool {
		code, got, err := api.MyEntry(strconv.FormatInt(user, 10), s.ActivityID)
		if err == nil && code != 200 && code != 503 {
			t.Fatalf("entry of %d: %d %+v", user, code, got)
		}
		e = got
		return err == nil && code == 200
	})
	if e.OrderNo == "" {
		return e, ""
	}
	var status string
	p.DB.Gorm().Raw("SELECT status FROM orders WHERE order_no = ?", e.OrderNo).Scan(&status)
	return e, status
}

// An alternate is promoted only for units MySQL says came back. Redis
// shows a unit MySQL does not have (as a Redis restored from a copy taken
// before the winners' orders does until the heal checks it): nobody is
// promoted for it, and the first alternate stays first. A winner cancels:
// that unit, real in both stores, goes to the first alternate, and its
// order is CREATED, with the entry's entry.promoted; the second alternate
// waits. The operator ends the sale: the drawer tells the second it was
// not selected, once, and the draw is settled.
func TestDrawPromotesOnlyUnitsMySQLTookBack(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer("SECKILL_DRAW_EVERY=200ms")
	s, users := drawOfTwo(t, p, api, 0)
	size := s.Items[0].ID
	winner, first, second := users[0], users[2], users[3]

	ctx := context.Background()
	stock := p.Store.Keys(reservation.In(s.ItemID, size)).Stock()
	if err := p.Redis.IncrBy(ctx, stock, 1).Err(); err != nil {
		t.Fatal(err)
	}
	// Many drawer passes (every 200 ms): none may promote for that unit.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		if e, status := entryOf(t, p, api, s, first); e.State != "ALTERNATE" || e.AlternateRank != 1 {
			t.Fatalf("the first alternate, for a unit only Redis shows: %+v (order %s), want ALTERNATE 1", e, status)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if n := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'FAILED'", s.ActivityID); n != 0 {
		t.Fatalf("%d failed orders in the sale", n)
	}

	no := myEntry(t, api, s, winner).OrderNo
	if code, err := api.Do("POST", fmt.Sprintf("/api/v1/orders/%s/cancel", no), winner, "", nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("cancel %s: %d %v", no, code, err)
	}
	waittest.UntilEvery(t, 60*time.Second, 200*time.Millisecond, "the first alternate's order CREATED", func() bool {
		e, status := entryOf(t, p, api, s, first)
		return e.State == "WON" && status == "CREATED"
	})
	if e, status := entryOf(t, p, api, s, second); e.State != "ALTERNATE" || e.AlternateRank != 1 {
		t.Errorf("the second alternate: %+v (order %s), want ALTERNATE 1", e, status)
	}
	if n := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'FAILED'", s.ActivityID); n != 0 {
		t.Errorf("%d failed orders in the sale", n)
	}
	promoted := myEntry(t, api, s, first)
	if got := entryEvents(t, p, promoted.EntryID); got != "entry.alternate entry.promoted:"+promoted.OrderNo {
		t.Errorf("the promoted alternate's events: %s", got)
	}

	if code, err := api.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/end", s.ActivityID), 1, auth.RoleAdmin, nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("end the sale: %d %v", code, err)
	}
	waiting := myEntry(t, api, s, second)
	waittest.UntilEvery(t, 30*time.Second, 200*time.Millisecond, "the draw settled", func() bool {
		return p.Count("SELECT COUNT(*) FROM activity_draws WHERE activity_id = ? AND settled_at IS NOT NULL", s.ActivityID) == 1
	})
	time.Sleep(time.Second) // more drawer passes: they write nothing more
	if got := entryEvents(t, p, waiting.EntryID); got != "entry.alternate entry.not_selected:SALE_ENDED" {
		t.Errorf("the alternate left waiting at the end: %s", got)
	}
	if got := entryEvents(t, p, promoted.EntryID); got != "entry.alternate entry.promoted:"+promoted.OrderNo {
		t.Errorf("the promoted alternate's events after the end: %s", got)
	}
}

// entryEvents is the entry's stream in the outbox, in seq order: each
// event's type, with its order for entry.promoted and its reason for
// entry.not_selected; seq counts from 1 with no gap.
func entryEvents(t *testing.T, p *pipelinetest.Pipeline, entry string) string {
	t.Helper()
	evs, err := p.DB.Outbox.Stream(context.Background(), "entry_"+entry)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range evs {
		if e.Data.Seq != i+1 {
			t.Fatalf("entry %s: event %d has seq %d", entry, i, e.Data.Seq)
		}
		switch e.Type {
		case outbox.EntryPromoted:
			got = append(got, string(e.Type)+":"+e.Data.OrderNo)
		case outbox.EntryNotSelected:
			got = append(got, string(e.Type)+":"+e.Data.Reason)
		default:
			got = append(got, string(e.Type))
		}
	}
	return strings.Join(got, " ")
}

// An alternate whose promoted order MySQL fails for lack of stock keeps
// its rank, never shows WON with a failed order, and is promoted again,
// under its same key, when units come back. The drawer dies after
// reserving the first alternate's order for a winner's cancelled unit; the
// unit then leaves MySQL (by hand, as a second store's drift would); the
// next drawer publishes the order and the consumer fails it OUT_OF_STOCK.
// A restock brings a unit back: the first alternate, not the second, gets
// it, with a new order, CREATED. In "retire's answer lost" the drawer had
// already numbered the alternate anew when the release that frees its key
// from the failed order went unanswered (the pick left numbered, the key
// still naming the failed order): the next pass retires that order and
// reserves the new number all the same.
func TestDrawAlternateWhoseOrderFailedKeepsItsPlace(t *testing.T) {
	t.Parallel()
	for _, lostRetire := range []bool{false, true} {
		name := "promoted again"
		if lostRetire {
			name = "retire's answer lost"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			alternateWhoseOrderFailed(t, lostRetire)
		})
	}
}

func alternateWhoseOrderFailed(t *testing.T, lostRetire bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	fast := []string{"SECKILL_DRAW_EVERY=200ms"}
	c := p.StartConsumer(fast...)
	s, users := drawOfTwo(t, p, api, 0)
	size := s.Items[0].ID
	winner, first, second := users[0], users[2], users[3]
	if err := c.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	dying := p.StartConsumer(append(fast, "SECKILL_FAILPOINTS=draw-after-reserve")...)
	no := myEntry(t, api, s, winner).OrderNo
	if code, err := api.Do("POST", fmt.Sprintf("/api/v1/orders/%s/cancel", no), winner, "", nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("cancel %s: %d %v", no, code, err)
	}
	select {
	case <-dying.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the consumer with the reserve failpoint did not die")
	}
	var failed string
	p.DB.Gorm().Raw("SELECT order_no FROM draw_results WHERE activity_id = ? AND user_id = ?", s.ActivityID, strconv.FormatInt(first, 10)).Scan(&failed)
	if failed == "" {
		t.Fatal("the first alternate was not numbered before the failpoint")
	}
	if err := p.DB.Gorm().Exec("UPDATE item_stock SET stock = stock - 1 WHERE item_id = ?", size).Error; err != nil {
		t.Fatal(err)
	}

	p.StartConsumer(fast...)
	waittest.UntilEvery(t, 60*time.Second, 100*time.Millisecond, "the alternate's order FAILED and the alternate waiting again", func() bool {
		e, status := entryOf(t, p, api, s, first)
		if e.State == "WON" && status != "CREATED" && status != "" {
			t.Fatalf("the first alternate shows WON with its order %s %s", e.OrderNo, status)
		}
		return e.State == "ALTERNATE" && e.AlternateRank == 1 &&
			p.Count("SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'FAILED'", failed) == 1
	})
	for range 10 {
		if e, status := entryOf(t, p, api, s, first); e.State != "ALTERNATE" || e.AlternateRank != 1 {
			t.Fatalf("the first alternate with no unit back: %+v (order %s)", e, status)
		}
		time.Sleep(200 * time.Millisecond)
	}

	if lostRetire {
		var entry string
		p.DB.Gorm().Raw("SELECT entry_id FROM draw_results WHERE activity_id = ? AND user_id = ?", s.ActivityID, strconv.FormatInt(first, 10)).Scan(&entry)
		waittest.Until(t, 30*time.Second, "the drawer to take the failed order's number back", func() bool {
			return p.Count("SELECT COUNT(*) FROM draw_results WHERE entry_id = ? AND order_no IS NULL", entry) == 1
		})
		fresh := order.NewNumberGenerator().NextFor(s.ItemID, strconv.FormatInt(first, 10))
		if no, err := p.DB.Draws.NumberPick(context.Background(), entry, fresh); err != nil || no != fresh {
			t.Fatalf("number the alternate anew: %s %v", no, err)
		}
	}
	if r := restock(t, api, size, "back-1", 1); r.Code != 200 && r.Code != 201 {
		t.Fatalf("restock: %+v", r)
	}
	waittest.UntilEvery(t, 60*time.Second, 200*time.Millisecond, "the first alternate's new order CREATED", func() bool {
		e, status := entryOf(t, p, api, s, first)
		if e.State == "WON" && status == "FAILED" {
			t.Fatalf("the first alternate shows WON with its order %s FAILED", e.OrderNo)
		}
		return e.State == "WON" && status == "CREATED" && e.OrderNo != failed
	})
	if e, _ := entryOf(t, p, api, s, second); e.State != "ALTERNATE" || e.AlternateRank != 1 {
		t.Errorf("the second alternate: %+v, want ALTERNATE 1", e)
	}
	if n := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND user_id = ? AND status IN ('CREATED', 'PAID')", s.ActivityID, strconv.FormatInt(first, 10)); n != 1 {
		t.Errorf("the first alternate holds %d live orders", n)
	}
	a, err := p.DB.Draws.DrawAudit(context.Background(), s.ActivityID)
	if err != nil || a.Stray != 0 {
		t.Errorf("audit: %+v %v: the retired attempt counts as stray", a, err)
	}
	p.WaitSaleDrained(s, 30*time.Second)
	snap, err := p.Store.Stock.Stock(context.Background(), reservation.In(s.ItemID, size))
	db, dbErr := p.DB.Activities.ItemStock(context.Background(), size)
	if err != nil || dbErr != nil || snap.Stock != 0 || db != 0 {
		t.Errorf("stock: Redis %+v %v, MySQL %d %v; want 0 in both", snap, err, db, dbErr)
	}
}
