package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Idempotency records
//
// The reserve script records, beside the quota, which order number the
// user's Idempotency-Key produced on the item; a retry with the same key
// gets that order number back. When Redis comes back from an older state
// the records of orders made since are gone, and a retry would reserve a
// new order number (MySQL then refuses the second live order, but the
// buyer hears another seqno). The repair gives every order MySQL holds
// in a checked activity its record back, written only where the key is
// missing, so nothing the pipeline wrote since is overwritten: CREATED,
// PAID, CLOSED, and FAILED unless for a reason the API answered 503 for
// (order.AnsweredUnavailable: that answer freed the key for a new try).
// This is no check: the repair restores them on every pass, for every item
// it read, whatever the item's verdict.

// idemPage is how many users' orders one step of the restore reads.
const idemPage = 2000

// pickIdem turns one page of an activity's orders (every order of each of
// its users, by id) into the records they should have. Where one key of a
// user produced several orders (a retry after the record was lost before
// this repair existed), the live one wins, else the latest that is not a
// DUPLICATE_REQUEST refusal.
func pickIdem(item int64, orders []drift.IdemOrder, ttl time.Duration) []drift.IdemRecord {
	type pick struct {
		rec  drift.IdemRecord
		live bool
	}
	type userKey struct {
		user string
		key  string
	}
	picked := map[userKey]pick{}
	var seq []userKey
	for _, o := range orders {
		if o.ItemID != item || o.IdempotencyKey == "" || !o.Status.Final() ||
			(o.Status == order.Failed && order.AnsweredUnavailable(o.FailureReason)) {
			continue
		}
		k := userKey{o.UserID, o.IdempotencyKey}
		p, seen := picked[k]
		if seen && (p.live && !o.Status.Live() || o.FailureReason == order.ReasonDuplicateRequest) {
			// ids ascend: a later refused order does not replace the live
			// one, and a retry MySQL refused because the key had made an
			// order (uk_orders_key) never replaces that order.
			continue
		}
		if !seen {
			seq = append(seq, k)
		}
		picked[k] = pick{rec: drift.IdemRecord{UserID: o.UserID, Key: o.IdempotencyKey, OrderNo: o.OrderNo, TTL: ttl},
			live: o.Status.Live()}
	}
	out := make([]drift.IdemRecord, len(seq))
	for i, k := range seq {
		out[i] = picked[k].rec
	}
	return out
}

// restoreIdem writes the item's missing idempotency records, the orders of
// idemPage users at a time per checked activity, and notes it in the
// item's report. It returns false when a later reconciler's fence refused
// a write.
func (c *Checker) restoreIdem(ctx context.Context, t Target, it *ItemReport, l Lock) (bool, error) {
	g := drift.Guard{Fence: l.Fence(), ExpireAt: c.horizon(t, c.now())}
	log := c.Log.With("item_id", t.ItemID, "fence", g.Fence)
	written, orders := 0, 0
	defer func() {
		if written > 0 {
			s := fmt.Sprintf("%s of orders MySQL holds restored (Redis had lost them)", plural(written, "idempotency record", "idempotency records"))
			it.Repairs = append(it.Repairs, s)
			log.Info("repaired", "what", s, "idempotency_restored", written, "orders", orders)
		}
		it.IdemRestored += written
	}()
	now := c.now()
	for _, a := range t.Activities {
		if !c.quotaChecked(a, now) {
			continue
		}
		ttl, err := a.RecordsLifetime(now)
		if err != nil {
			return false, err
		}
		for after := ""; ; {
			page, last, err := c.DB.IdemOrderPage(ctx, a.ID, after, idemPage)
			if err != nil || last == "" {
				if err != nil {
					return false, err
				}
				break
			}
			after = last
			recs := pickIdem(t.ItemID, page, ttl)
			orders += len(recs)
			if len(recs) == 0 {
				continue
			}
			if err := c.before(ctx, t.item(), l); err != nil {
				return false, err
			}
			n, res, err := c.Stock.RestoreIdem(ctx, t.item(), recs, g)
			written += n
			if err != nil {
				return false, err
			}
			if res != drift.Written {
				s := "idempotency records not restored: " + outcome(res)
				it.Repairs = append(it.Repairs, s)
				log.Warn("repair not applied", "what", s)
				return false, nil
			}
		}
	}
	return true, nil
}
