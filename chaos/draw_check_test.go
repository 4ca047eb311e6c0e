//go:build chaos || soak

package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
)

// What the chaos suite's draw scenarios (draw_test.go) and the soak's sale
// H share: an entry request, and the check of a drawn sale's final values.

// drawSize is one size of a draw sale and the units it was created with.
type drawSize struct {
	Name      string
	ID, Stock int64
}

// drawOrder is one order of the sale as MySQL holds it.
type drawOrder struct {
	OrderNo, UserID, Status, FailureReason, IdempotencyKey string
	ItemID                                                 int64
	Quantity                                               int
}

// drawBreaches checks the final values of the drawn sale activity once the
// pipeline has drained (api serves its record) and returns what it counted
// and every breach (none: the draw kept its promises):
//   - the record is DRAWN and verifies (draw.Verify), entry for entry the
//     ranking MySQL holds, one place for each entry taken;
//   - each size's winners fill its stock at the draw exactly (no alternate
//     that would have fitted);
//   - each order of the sale is the order of exactly one pick (its number,
//     key draw-<entry>, buyer, size and quantity), and no entry has two;
//   - every winner and every numbered pick has its order, issued, final
//     (CREATED, PAID, CLOSED, or FAILED with a reason); the alternates given
//     orders come first in their size's rank order;
//   - no oversell: per size live units + MySQL stock = initial + restocked,
//     MySQL and Redis stock never below zero; no buyer with two live orders;
//   - Redis stock = MySQL stock with nothing in flight; the reconciler exits
//     0 on every size, and its verify-draw holds the published record.
func drawBreaches(p *pipelinetest.Pipeline, api *pipelinetest.API, activity int64, sizes []drawSize) (string, []string) {
	ctx := context.Background()
	g := p.DB.Gorm().WithContext(ctx)
	var br []string
	fail := func(format string, args ...any) { br = append(br, fmt.Sprintf(format, args...)) }

	var rec draw.Record
	if code, err := api.Do("GET", fmt.Sprintf("/api/v1/activities/%d/draw", activity), 0, "", nil, nil, &rec); err != nil || code != 200 {
		return "", []string{fmt.Sprintf("the draw's record: %d %v", code, err)}
	}
	if err := draw.Verify(rec); err != nil {
		fail("the published record does not verify: %v", err)
	}
	picks, err := p.Picks(activity)
	if err != nil {
		return "", []string{fmt.Sprintf("read the ranking: %v", err)}
	}
	var entries int64
	if err := g.Raw("SELECT COUNT(*) FROM draw_entries WHERE activity_id = ?", activity).Scan(&entries).Error; err != nil {
		return "", []string{fmt.Sprintf("count the entries: %v", err)}
	}
	if int64(len(picks)) != entries || len(rec.Entries) != len(picks) {
		fail("%d entries, %d ranked in MySQL, %d in the record", entries, len(picks), len(rec.Entries))
	}
	for i := 0; i < min(len(picks), len(rec.Entries)); i++ {
		if e := rec.Entries[i]; e.ID != picks[i].EntryID || e.Outcome != picks[i].Outcome {
			fail("rank %d: the record has %s %s, MySQL %s %s", i+1, e.ID, e.Outcome, picks[i].EntryID, picks[i].Outcome)
			break
		}
	}

	// Winners fill each size's stock at the draw, exactly.
	atDraw := map[int64]int64{}
	for _, s := range rec.Sizes {
		atDraw[s.ItemID] = s.Stock
	}
	won := map[int64]int64{}
	for _, pk := range picks {
		if pk.Outcome == draw.Won {
			won[pk.ItemID] += int64(pk.Quantity)
		}
	}
	for _, pk := range picks {
		if pk.Outcome == draw.Alternate && int64(pk.Quantity) <= atDraw[pk.ItemID]-won[pk.ItemID] {
			fail("size %d: alternate %s (rank %d) fits the %d units its winners left", pk.ItemID, pk.EntryID, pk.Rank, atDraw[pk.ItemID]-won[pk.ItemID])
			break
		}
	}
	for _, s := range sizes {
		if won[s.ID] > atDraw[s.ID] {
			fail("%s: winners hold %d units of its %d", s.Name, won[s.ID], atDraw[s.ID])
		}
	}

	// Each order is one pick's; each pick has one order at most.
	var orders []drawOrder
	if err := g.Raw(`SELECT order_no, user_id, status, COALESCE(failure_reason, '') AS failure_reason, idempotency_key, item_id, quantity
		FROM orders WHERE activity_id = ?`, activity).Scan(&orders).Error; err != nil {
		return "", []string{fmt.Sprintf("read the sale's orders: %v", err)}
	}
	byNo, byEntry := map[string]pipelinetest.Pick{}, map[string]pipelinetest.Pick{}
	for _, pk := range picks {
		byEntry[pk.EntryID] = pk
		if pk.OrderNo != "" {
			byNo[pk.OrderNo] = pk
		}
	}
	perKey := map[string]int{}
	live := map[string]int{}
	liveUnits := map[int64]int64{}
	final := map[string]drawOrder{}
	for _, o := range orders {
		final[o.OrderNo] = o
		pk, ok := byNo[o.OrderNo]
		if entry, drawer := order.DrawEntryOf(o.IdempotencyKey); !ok && drawer && o.Status == "FAILED" && byEntry[entry].EntryID != "" {
			// A retired attempt: an alternate's order that found no stock,
			// its number taken back (orderdb.ReturnFailedAlternates).
			continue
		}
		perKey[o.IdempotencyKey]++
		if n := perKey[o.IdempotencyKey]; n == 2 {
			fail("key %s made %d orders", o.IdempotencyKey, n)
		}
		switch {
		case !ok:
			entry, _ := order.DrawEntryOf(o.IdempotencyKey)
			fail("order %s (%s, key %s) is no pick's: entry %s names %q", o.OrderNo, o.Status, o.IdempotencyKey, entry, byEntry[entry].OrderNo)
		case o.IdempotencyKey != order.DrawKey(pk.EntryID) || o.UserID != pk.UserID || o.ItemID != pk.ItemID || o.Quantity != pk.Quantity:
			fail("order %s (key %s, user %s, item %d, %d units) is not pick %s's (user %s, item %d, %d units)",
				o.OrderNo, o.IdempotencyKey, o.UserID, o.ItemID, o.Quantity, pk.EntryID, pk.UserID, pk.ItemID, pk.Quantity)
		}
		if o.Status == "CREATED" || o.Status == "PAID" {
			live[o.UserID]++
			liveUnits[o.ItemID] += int64(o.Quantity)
			if live[o.UserID] == 2 {
				fail("user %s holds two live orders", o.UserID)
			}
		}
	}

	// Every winner and every numbered pick has its order, final.
	numbered, promoted := 0, 0
	waiting := map[int64]int{} // size -> a waiting alternate's rank
	for _, pk := range picks {
		if pk.OrderNo == "" {
			if pk.Outcome == draw.Won {
				fail("winner %s (rank %d) has no order", pk.EntryID, pk.Rank)
			} else if waiting[pk.ItemID] == 0 {
				waiting[pk.ItemID] = pk.Rank
			}
			continue
		}
		numbered++
		o, ok := final[pk.OrderNo]
		switch {
		case !ok:
			fail("pick %s (rank %d, %s) numbered %s: no such order in MySQL", pk.EntryID, pk.Rank, pk.Outcome, pk.OrderNo)
		case !pk.Issued:
			fail("pick %s's order %s (%s) not marked issued", pk.EntryID, pk.OrderNo, o.Status)
		case o.Status == "FAILED" && o.FailureReason == "", o.Status == "PENDING":
			fail("pick %s's order %s is %s %q", pk.EntryID, pk.OrderNo, o.Status, o.FailureReason)
		}
		if pk.Outcome == draw.Alternate {
			promoted++
			if r := waiting[pk.ItemID]; r != 0 {
				fail("size %d: alternate of rank %d has order %s while the one of rank %d waits", pk.ItemID, pk.Rank, pk.OrderNo, r)
			}
		}
	}

	// Stock: no oversell in either store, and they agree.
	items := make([]string, 0, len(sizes))
	for _, s := range sizes {
		items = append(items, strconv.FormatInt(s.ID, 10))
		var stock, re int64
		if err := g.Raw("SELECT stock FROM item_stock WHERE item_id = ?", s.ID).Scan(&stock).Error; err != nil {
			fail("%s: read MySQL stock: %v", s.Name, err)
			continue
		}
		if err := g.Raw("SELECT COALESCE(SUM(quantity), 0) FROM restocks WHERE item_id = ?", s.ID).Scan(&re).Error; err != nil {
			fail("%s: read restocks: %v", s.Name, err)
			continue
		}
		if stock < 0 || liveUnits[s.ID]+stock != s.Stock+re {
			fail("%s: live units %d + MySQL stock %d != stock %d + restocked %d", s.Name, liveUnits[s.ID], stock, s.Stock, re)
		}
		snap, err := p.Store.Stock.Stock(ctx, pipelinetest.Sale{ItemID: sizes[0].ID}.Item(s.ID))
		switch {
		case err != nil:
			fail("%s: read Redis: %v", s.Name, err)
		case snap.Stock < 0 || snap.Stock != stock || snap.Inflight != 0:
			fail("%s: Redis stock %d (in flight %d), MySQL stock %d", s.Name, snap.Stock, snap.Inflight, stock)
		}
	}
	if r := p.Reconcile("--item", strings.Join(items, ","), "--wait", "30s"); r.Code != 0 {
		fail("reconciler exit %d:\n%s", r.Code, tail(strings.TrimSpace(r.Stdout+"\n"+r.Stderr), 1500))
	}
	if r := p.Reconcile("verify-draw", "--url", api.URL, "--activity", strconv.FormatInt(activity, 10)); r.Code != 0 {
		fail("verify-draw exit %d:\n%s", r.Code, tail(strings.TrimSpace(r.Stdout+"\n"+r.Stderr), 1500))
	}
	var wonN int
	for _, pk := range picks {
		if pk.Outcome == draw.Won {
			wonN++
		}
	}
	return fmt.Sprintf("%d entries, %d winners, %d picks numbered (%d alternates), %d orders", len(picks), wonN, numbered, promoted, len(orders)), br
}
