package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// repair applies what the item's last two reads agreed on, quota keys
// first, then stock, and sets the item's verdict to Repaired or Retry. It
// returns an error only when it must stop altogether (a store failed, or
// the lock was lost).
func (c *Checker) repair(ctx context.Context, t Target, it *ItemReport, rs []reading, l Lock) error {
	now := c.now()
	g := drift.Guard{Fence: l.Fence(), ExpireAt: c.horizon(t, now)}
	p := &itemRepair{c: c, t: t, it: it, l: l, g: g, now: now,
		log: c.Log.With("item_id", t.ItemID, "fence", g.Fence), applied: true}

	last := rs[len(rs)-1]
	for _, ar := range it.Activities {
		a, ok := activityOf(t, ar.ActivityID)
		if !ok {
			continue
		}
		if err := p.quotas(ctx, ar, a, last.quotas[a.ID]); err != nil {
			return err
		}
	}

	s, ok, err := p.layout(ctx, last)
	if err != nil {
		return err
	}
	if !ok {
		it.Verdict = Retry
		return nil
	}
	if (reading{stock: s}).stockMismatch(t, now) {
		ok, msg, err := c.repairStock(ctx, t, s, g, l)
		if err != nil {
			return err
		}
		p.note(ok, "%s", msg)
	}
	if p.applied {
		it.Verdict = Repaired
	} else {
		it.Verdict = Retry
	}
	return nil
}

// itemRepair is one item's repair under way: what it writes with, and
// whether every repair so far was applied.
type itemRepair struct {
	c       *Checker
	t       Target
	it      *ItemReport
	l       Lock
	g       drift.Guard
	now     time.Time
	log     *slog.Logger
	applied bool
}

// note records a repair on the item's line and logs it; one not applied
// (ok false) leaves the item to be repaired again.
func (p *itemRepair) note(ok bool, msg string, args ...any) {
	s := fmt.Sprintf(msg, args...)
	p.it.Repairs = append(p.it.Repairs, s)
	if ok {
		p.log.Info("repaired", "what", s)
	} else {
		p.applied = false
		p.log.Warn("repair not applied", "what", s)
	}
}

// quotas repairs the quota keys of activity a (ar is its report line, q
// its last read): the missing keys restored, the stale ones removed.
func (p *itemRepair) quotas(ctx context.Context, ar ActivityReport, a activity.Activity, q quotaReading) error {
	c, t, l := p.c, p.t, p.l
	ttl, err := a.RecordsLifetime(p.now)
	if err != nil {
		return err
	}
	if ar.QuotaMissingCount > 0 {
		n, back, res, err := c.restoreQuotas(ctx, t, a, ttl, p.g, l)
		if err != nil {
			return err
		}
		if n > 0 {
			p.note(true, "%s in activity %d restored (Redis had lost them)", plural(n, "quota key of a live order", "quota keys of live orders"), a.ID)
		}
		if back > 0 {
			p.note(true, "%s restored for orders closed meanwhile removed again", plural(back, "quota key", "quota keys"))
		}
		if res != drift.Written {
			p.note(false, "quota keys in activity %d not restored: %s", a.ID, outcome(res))
		}
	}
	for _, m := range ar.QuotaMissing {
		if m.Holder == "" {
			continue // restoreQuotas gave it back
		}
		if err := c.before(ctx, t.item(), l); err != nil {
			return err
		}
		res, err := c.Stock.RestoreQuota(ctx, t.item(), a.ID, m.UserID, m.OrderNo, m.Holder, ttl, p.g)
		if err != nil {
			return err
		}
		p.note(res == drift.Written, "quota of user %q in activity %d set to %s: %s", m.UserID, a.ID, m.OrderNo, outcome(res))
	}
	for _, s := range ar.QuotaStale {
		if err := c.before(ctx, t.item(), l); err != nil {
			return err
		}
		res, err := c.Stock.RemoveQuota(ctx, t.item(), a.ID, s.UserID, s.Holder, p.g)
		if err != nil {
			return err
		}
		p.note(res == drift.Written, "stale quota of user %q in activity %d (held by %s) removed: %s", s.UserID, a.ID, s.Holder, outcome(res))
	}
	if q.missingN-q.absentN > holders(q.missing) || q.staleN > len(q.stale) {
		p.note(false, "activity %d has more quota keys holding another order than the %d listed; the next run repairs them", a.ID, MaxListed)
	}
	return nil
}

// layout is the stock the item's stock repair starts from: the last
// read's or, for a bucketed item whose bucket marker Redis lost with its
// stock, the buckets laid out again; false when they could not be.
func (p *itemRepair) layout(ctx context.Context, last reading) (stockReading, bool, error) {
	s := last.stock
	if n := buckets(p.t, p.now); n > 1 && s.view.Buckets == nil && !s.view.Warmed && last.stockMismatch(p.t, p.now) {
		// The bucket marker went with Redis's data, the stock with it
		// (a live stock key says the layout is one key): lay the item
		// out again as its current sale says, then set the buckets below.
		again, ok, msg, err := p.c.restoreBuckets(ctx, p.t, n, p.g, p.l)
		if err != nil {
			return stockReading{}, false, err
		}
		p.note(ok, "%s", msg)
		if !ok {
			return stockReading{}, false, nil
		}
		return again, true, nil
	}
	return s, true, nil
}

// repairStock sets the item's Redis stock to MySQL stock minus in flight,
// from the values of the last read. If the keys changed since (a
// reservation, release or confirm), it reads the item once more and, when
// that read shows the same drift, tries once more with its values.
func (c *Checker) repairStock(ctx context.Context, t Target, s stockReading, g drift.Guard, l Lock) (bool, string, error) {
	want := stockKey{warmed: s.view.Warmed, drift: s.drift()}
	for attempt := 1; ; attempt++ {
		if err := c.before(ctx, t.item(), l); err != nil {
			return false, "", err
		}
		target := max(s.mysql-s.inFlight(), 0)
		ttl := g.ExpireAt.Sub(c.now())
		res, err := c.Stock.SetStock(ctx, t.item(), s.view, target, ttl, g)
		if err != nil {
			return false, "", err
		}
		from := "missing"
		if s.view.Warmed {
			from = fmt.Sprint(s.view.Stock)
		}
		switch res {
		case drift.Written:
			if err := c.Stock.MarkWarmed(ctx, t.item()); err != nil {
				return false, "", err
			}
			msg := fmt.Sprintf("stock set from %s to %d (MySQL %d - in flight %d)", from, target, s.mysql, s.inFlight())
			if target != s.mysql-s.inFlight() {
				msg += "; MySQL has less than is in flight, so some of those orders will fail"
			}
			return true, msg, nil
		case drift.StaleFence:
			return false, "stock not set: a later reconciler (larger fencing token) already repaired this item", nil
		}
		if attempt == 2 {
			return false, "stock not set: changed concurrently, retry", nil
		}
		c.Log.Info("stock changed during repair; checking once more", "item_id", t.ItemID)
		again, err := c.readStock(ctx, t.item())
		if err != nil {
			return false, "", err
		}
		if (stockKey{warmed: again.view.Warmed, drift: again.drift()}) != want {
			return false, fmt.Sprintf("stock not set: changed concurrently (drift now %+d), retry", again.drift()), nil
		}
		s = again
	}
}

// restoreBuckets lays out a bucketed item whose bucket marker Redis lost:
// the marker with the activity's number of buckets, and the missing
// buckets (an even split of MySQL stock minus in flight; existing ones are
// only ever lowered). It then reads the item again; the caller sets the
// buckets from that read with the usual compare-and-set.
func (c *Checker) restoreBuckets(ctx context.Context, t Target, n int, g drift.Guard, l Lock) (stockReading, bool, string, error) {
	if c.Warmer == nil {
		return stockReading{}, false, fmt.Sprintf("bucket marker missing (the activity has %d buckets): not restored", n), nil
	}
	if err := c.before(ctx, t.item(), l); err != nil {
		return stockReading{}, false, "", err
	}
	sum, err := c.Warmer.WarmupFrom(ctx, t.item(), n, g.ExpireAt.Sub(c.now()), c.DB)
	if err != nil {
		return stockReading{}, false, "", err
	}
	s, err := c.readStock(ctx, t.item())
	if err != nil {
		return stockReading{}, false, "", err
	}
	if s.view.Buckets == nil {
		return s, false, fmt.Sprintf("bucket marker still missing after laying out %d buckets, retry", n), nil
	}
	return s, true, fmt.Sprintf("%d stock buckets laid out from the activity, holding %d", n, sum), nil
}

// before runs before each write: it stops when the lock is lost or ctx
// ended.
func (c *Checker) before(ctx context.Context, item reservation.Item, l Lock) error {
	if c.beforeWrite != nil {
		c.beforeWrite(item.ID)
	}
	select {
	case <-l.Lost():
		return ErrLockLost
	default:
	}
	return ctx.Err()
}

func outcome(res drift.CAS) string {
	switch res {
	case drift.Written:
		return "done"
	case drift.Changed:
		return "changed concurrently, retry"
	}
	return "refused: a later reconciler (larger fencing token) already wrote this item"
}

func activityOf(t Target, id int64) (activity.Activity, bool) {
	for _, a := range t.Activities {
		if a.ID == id {
			return a, true
		}
	}
	return activity.Activity{}, false
}

// holders counts the issues whose key holds another order number.
func holders(issues []QuotaIssue) int {
	n := 0
	for _, m := range issues {
		if m.Holder != "" {
			n++
		}
	}
	return n
}

// restoreQuotas gives every live order of the activity whose quota key is
// missing its key back, a page of live orders at a time (written only
// where the key is still missing), then takes back the keys it wrote for
// orders MySQL closed meanwhile: a close's release may have run between
// the page's read and the write, and the key would keep the buyer from
// buying again. It returns how many keys it wrote and took back.
func (c *Checker) restoreQuotas(ctx context.Context, t Target, a activity.Activity, ttl time.Duration, g drift.Guard, l Lock) (
	restored, takenBack int, res drift.CAS, err error) {
	for after := ""; ; {
		page, err := c.DB.LiveOrderPage(ctx, a.ID, after, quotaPage)
		if err != nil || len(page) == 0 {
			return restored, takenBack, drift.Written, err
		}
		after = page[len(page)-1].UserID
		users := make([]string, len(page))
		for i, o := range page {
			users[i] = o.UserID
		}
		held, err := c.Stock.QuotaHoldersOf(ctx, t.item(), a.ID, users)
		if err != nil {
			return restored, takenBack, 0, err
		}
		var recs []drift.QuotaRecord
		orderOf := map[string]string{}
		for _, o := range page {
			if _, ok := held[o.UserID]; !ok {
				recs = append(recs, drift.QuotaRecord{UserID: o.UserID, OrderNo: o.OrderNo, TTL: ttl})
				orderOf[o.UserID] = o.OrderNo
			}
		}
		if len(recs) == 0 {
			continue
		}
		if err := c.before(ctx, t.item(), l); err != nil {
			return restored, takenBack, 0, err
		}
		written, res, err := c.Stock.RestoreQuotas(ctx, t.item(), a.ID, recs, g)
		restored += len(written)
		if err != nil || res != drift.Written {
			return restored, takenBack, res, err
		}
		nos := make([]string, len(written))
		for i, u := range written {
			nos[i] = orderOf[u]
		}
		now, err := c.DB.Orders(ctx, nos)
		if err != nil {
			return restored, takenBack, 0, err
		}
		for _, u := range written {
			if o, ok := now[orderOf[u]]; ok && o.Status.Live() {
				continue
			}
			if err := c.before(ctx, t.item(), l); err != nil {
				return restored, takenBack, 0, err
			}
			res, err := c.Stock.RemoveQuota(ctx, t.item(), a.ID, u, orderOf[u], g)
			if err != nil {
				return restored, takenBack, 0, err
			}
			if res == drift.Written {
				takenBack++
			}
		}
	}
}
