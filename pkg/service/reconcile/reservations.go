package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Reservation hashes
//
// A CREATED order gives its units back when it is closed (cancel, unpaid
// timeout, sale cancel): MySQL in the close's transaction, Redis by the
// release from its CONFIRMED reservation. When Redis comes back from an
// older state the hashes of orders made since are gone, and that release
// finds none and credits nothing: Redis would stay below MySQL for good.
// So every repair pass, before it reads an item, gives each CREATED order
// of the item's checked activities whose hash is missing a CONFIRMED hash
// again (and, for a bucketed item, its take marker in its home bucket),
// written only where the hash is missing; then it takes back, for the
// orders MySQL has closed meanwhile with their release not recorded, the
// restored hashes still CONFIRMED. ADR 0001 ("Redis lost reservations")
// walks through why a close before, during or after the pass then credits
// Redis exactly once, or never and the read counts the units in MySQL.

// reservationBatch bounds the orders read from MySQL per query and the
// reservations one script call writes.
const reservationBatch = 500

// restoreReservations runs the restore and the take-back for one item. It
// returns how many hashes it restored and took back, and false when a
// later reconciler's fence refused a write.
func (c *Checker) restoreReservations(ctx context.Context, t Target, l Lock) (restored, takenBack int, ok bool, err error) {
	now := c.now()
	g := drift.Guard{Fence: l.Fence(), ExpireAt: c.horizon(t, now)}
	k, err := c.layout(ctx, t, now)
	if err != nil || k < 0 {
		return 0, 0, err == nil, err // two layouts: the operator's call first
	}
	for _, a := range t.Activities {
		if !c.quotaChecked(a, now) {
			continue
		}
		ttl, err := a.KeysLifetime(now, c.paymentWindow())
		if err != nil {
			return restored, takenBack, false, err
		}
		if ttl <= 0 {
			continue
		}
		for after := ""; ; {
			page, err := c.DB.LiveOrderPage(ctx, a.ID, after, quotaPage)
			if err != nil {
				return restored, takenBack, false, err
			}
			if len(page) == 0 {
				break
			}
			after = page[len(page)-1].UserID
			var recs []drift.LostReservation
			for _, o := range page {
				if o.Status != order.Created || o.ItemID != t.ItemID {
					continue // a PAID order never gives units back
				}
				recs = append(recs, drift.LostReservation{OrderNo: o.OrderNo, UserID: o.UserID, ActivityID: a.ID,
					Quantity: o.Quantity, IdempotencyKey: o.IdempotencyKey, ReservedAt: o.CreatedAt, TTL: ttl})
			}
			if len(recs) == 0 {
				continue
			}
			if err := c.before(ctx, t.item(), l); err != nil {
				return restored, takenBack, false, err
			}
			written, res, err := c.Stock.RestoreReservations(ctx, t.item(), k, recs, g)
			restored += len(written)
			if err != nil || res != drift.Written {
				return restored, takenBack, false, err
			}
		}
	}
	// Closed since the orders were read (the close's compare-and-set in
	// MySQL comes before its release): take back what was restored.
	closing, err := c.DB.ClosingOrders(ctx, t.ItemID)
	if err != nil || len(closing) == 0 {
		return restored, takenBack, err == nil, err
	}
	nos := make([]string, 0, len(closing))
	for no := range closing {
		nos = append(nos, no)
	}
	slices.Sort(nos)
	for chunk := range slices.Chunk(nos, reservationBatch) {
		if err := c.before(ctx, t.item(), l); err != nil {
			return restored, takenBack, false, err
		}
		n, res, err := c.Stock.UnrestoreReservations(ctx, t.item(), chunk, g)
		takenBack += n
		if err != nil || res != drift.Written {
			return restored, takenBack, false, err
		}
	}
	return restored, takenBack, true, nil
}

// layout is the number of stock keys the item's restored reservations
// name a bucket of: the bucket marker's count, else 1 when the one stock
// key lives, else the layout the repair lays the item out in (buckets).
// -1: the item holds both layouts, which the operator sorts out first.
func (c *Checker) layout(ctx context.Context, t Target, now time.Time) (int, error) {
	l, err := c.Stock.Layout(ctx, t.item())
	switch {
	case errors.Is(err, activity.ErrSettingLocked):
		return -1, nil
	case err != nil:
		return 0, err
	case l == 0:
		return buckets(t, now), nil
	}
	return int(l), nil
}

// noteReservations records what restoreReservations did in the item's
// report.
func (c *Checker) noteReservations(it *ItemReport, restored, takenBack int, ok bool) {
	log := c.Log.With("item_id", it.ItemID)
	it.ReservationsRestored += restored
	if restored > 0 {
		s := fmt.Sprintf("%s of CREATED orders MySQL holds restored, CONFIRMED (Redis had lost them)",
			plural(restored, "reservation", "reservations"))
		it.Repairs = append(it.Repairs, s)
		log.Info("repaired", "what", s, "reservations_restored", restored)
	}
	if takenBack > 0 {
		s := fmt.Sprintf("%s restored for orders closed meanwhile taken back", plural(takenBack, "reservation", "reservations"))
		it.Repairs = append(it.Repairs, s)
		log.Info("repaired", "what", s, "reservations_taken_back", takenBack)
	}
	if !ok {
		s := "reservations not restored: " + outcome(drift.StaleFence)
		it.Repairs = append(it.Repairs, s)
		log.Warn("repair not applied", "what", s)
	}
}
