package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// One pick whose reserve keeps failing is backed off on its own; the rest
// of the draw goes on. The winner of size A finds a stray record holding
// its quota in Redis, so its reserve is refused (ALREADY_PURCHASED) at
// every try. Meanwhile size B's winner gets its order, cancels it, and B's
// alternate gets the unit; A's unit goes to no one else. Once the stray
// record is gone, A's winner gets its order, after its backoff.
func TestDrawPickFailingBacksOffAlone(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer("SECKILL_DRAW_EVERY=200ms", "SECKILL_CLOSER_EVERY=200ms")
	s := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{1, 1}, EntriesCloseIn: 4 * time.Second})
	sizeA, sizeB := s.Items[0].ID, s.Items[1].ID
	const stuck = 1 // A's only entrant: its winner
	enter(t, api, s, stuck, sizeA)
	enter(t, api, s, 2, sizeB)
	enter(t, api, s, 3, sizeB)
	// The stray record: the quota of A's winner in the sale, held by an
	// order that does not exist.
	ctx := context.Background()
	quota := p.Store.Keys(reservation.In(s.ItemID, sizeA)).Quota(s.ActivityID, strconv.Itoa(stuck))
	if err := p.Redis.Set(ctx, quota, "01M8WM2ZJ137TBZ1SV7JB368DZ-1", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}

	pick := func(user int64) pipelinetest.Pick {
		t.Helper()
		for _, r := range ranking(t, p, s.ActivityID) {
			if r.UserID == strconv.FormatInt(user, 10) {
				return r
			}
		}
		return pipelinetest.Pick{}
	}
	// B's winner gets its order while A's winner is refused.
	var winnerB, altB int64
	waittest.UntilEvery(t, 60*time.Second, 200*time.Millisecond, "size B's winner to have a CREATED order", func() bool {
		for _, u := range []int64{2, 3} {
			if r := pick(u); r.Outcome == draw.Won && r.Status == "CREATED" {
				winnerB, altB = u, 5-u
				return true
			}
		}
		return false
	})
	if a := pick(stuck); a.Outcome != draw.Won || a.Status != "" {
		t.Fatalf("A's winner: %+v, want WON without an order while its quota is held", a)
	}
	if r := pick(altB); r.Outcome != draw.Alternate || r.OrderNo != "" {
		t.Fatalf("B's alternate before a unit came back: %+v", r)
	}
	// The winner of B cancels: its unit goes to B's alternate, though A's
	// winner still fails.
	no := pick(winnerB).OrderNo
	if code, err := api.Do("POST", fmt.Sprintf("/api/v1/orders/%s/cancel", no), winnerB, "", nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("cancel %s: %d %v", no, code, err)
	}
	waittest.UntilEvery(t, 60*time.Second, 200*time.Millisecond, "size B's alternate to get the unit back", func() bool {
		return pick(altB).Status == "CREATED"
	})
	if a := pick(stuck); a.Status != "" {
		t.Fatalf("A's winner has an order while its quota is held: %+v", a)
	}
	if n := p.Count("SELECT COUNT(*) FROM orders WHERE item_id = ? AND status IN ('CREATED', 'PAID')", sizeA); n != 0 {
		t.Fatalf("%d live orders of size A: its unit went to someone else", n)
	}

	// The stray record goes: A's winner gets its order after its backoff.
	if err := p.Redis.Del(ctx, quota).Err(); err != nil {
		t.Fatal(err)
	}
	waittest.UntilEvery(t, 90*time.Second, 500*time.Millisecond, "A's winner to get its order", func() bool {
		return pick(stuck).Status == "CREATED"
	})
	for item, want := range map[int64]int64{sizeA: 1, sizeB: 1} {
		if n := p.Count("SELECT COUNT(*) FROM orders WHERE item_id = ? AND status IN ('CREATED', 'PAID')", item); n != want {
			t.Errorf("item %d: %d live orders, want %d", item, n, want)
		}
	}
}

// A pick numbered and reserved before the upgrade, under the drawer's key
// of then (draw-<entry>), goes on with that key: the drawer finds its
// reservation by it, publishes its event and marks it issued; one order,
// its unit taken once.
func TestDrawPickReservedUnderTheOldKeyKeepsIt(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	s := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{1}, EntriesCloseIn: 3 * time.Second})
	size := s.Items[0].ID
	enter(t, api, s, 1, size)
	ctx := context.Background()
	// A consumer writes the entry to MySQL (its drawer's first pass, at
	// its start, finds nothing due; the next is an hour away), and stops.
	writer := p.StartConsumer("SECKILL_DRAW_EVERY=1h")
	waittest.Until(t, 30*time.Second, "the entry in MySQL", func() bool {
		return p.Count("SELECT COUNT(*) FROM draw_entries WHERE activity_id = ?", s.ActivityID) == 1
	})
	if err := writer.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The drawer of before: the draw, the winner's number, its reserve
	// under the old key; then it stopped (its event never published).
	waittest.UntilEvery(t, 30*time.Second, 200*time.Millisecond, "the draw to run", func() bool {
		res, err := p.DB.Draws.RunDrawWith(ctx, s.ActivityID, time.Now(), draw.Pick)
		if err != nil {
			t.Fatal(err)
		}
		return res.Ran
	})
	winners, err := p.DB.Draws.WinnersWithoutOrders(ctx, s.ActivityID, 10)
	if err != nil || len(winners) != 1 {
		t.Fatalf("winners: %+v %v", winners, err)
	}
	w := winners[0]
	no, err := p.DB.Draws.NumberPick(ctx, w.EntryID, order.NewNumberGenerator().NextFor(s.ItemID, w.UserID))
	if err != nil {
		t.Fatal(err)
	}
	old := order.LegacyDrawKey(w.EntryID)
	if _, err := p.Store.Reservations.Reserve(ctx, reservation.Reservation{OrderNo: no, UserID: w.UserID, ItemID: size, Tag: s.ItemID,
		ActivityID: s.ActivityID, Quantity: 1, IdempotencyKey: old, At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}

	p.StartConsumer("SECKILL_DRAW_EVERY=200ms")
	// Issued: the drawer itself found the reservation and published it (the
	// sweep would publish a reservation left RESERVED too, but a drawer
	// that reserves under the new key is refused, the quota held by its
	// own order, and retries the pick for as long as the sale runs).
	waittest.UntilEvery(t, 60*time.Second, 200*time.Millisecond, "the winner's order, issued by the drawer", func() bool {
		return p.Count("SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'CREATED'", no) == 1 &&
			p.Count("SELECT COUNT(*) FROM draw_results WHERE entry_id = ? AND issued", w.EntryID) == 1
	})
	if n := p.Count("SELECT COUNT(*) FROM orders WHERE order_no = ? AND idempotency_key = ?", no, old); n != 1 {
		t.Errorf("the order is not keyed %q", old)
	}
	if n := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ?", s.ActivityID); n != 1 {
		t.Errorf("%d orders of the sale, want the winner's", n)
	}
	p.WaitSaleDrained(s, 30*time.Second)
	snap, err := p.Store.Stock.Stock(ctx, reservation.In(s.ItemID, size))
	if err != nil || snap.Stock != 0 {
		t.Errorf("Redis stock %+v %v, want 0: the unit taken once", snap, err)
	}
	if db, err := p.DB.Activities.ItemStock(ctx, size); err != nil || db != 0 {
		t.Errorf("MySQL stock %d %v, want 0", db, err)
	}
}
