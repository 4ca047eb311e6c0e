package reconcile

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/order"
	"github.com/seckill/seckill/pkg/orderdb"
	"github.com/seckill/seckill/pkg/stockredis"
)

// reading is one read of an item: its stock in both stores and its quota
// keys per activity.
type reading struct {
	stock  stockReading
	quotas map[int64]quotaReading // by activity id; only checked activities
}

type stockReading struct {
	// view is what Redis held (also the values a repair compares with).
	view  stockredis.StockView
	mysql int64
	// committed, releasing and closing: see the package comment
	// (restocking is view.Restocking).
	committed, releasing, closing int64
}

// inFlight is the units out of Redis stock that MySQL still counts as its
// own, and the units MySQL has that are on their way to Redis stock.
func (s stockReading) inFlight() int64 {
	return s.view.Inflight - s.committed + s.closing + s.view.Restocking
}

// drift is how many units Redis has more than MySQL can stand behind
// (negative: fewer).
func (s stockReading) drift() int64 { return s.view.Stock + s.inFlight() - s.mysql }

type stockKey struct {
	warmed bool
	drift  int64
}

// stockKey is what two reads must agree on for stock drift to count.
func (r reading) stockKey() stockKey {
	return stockKey{warmed: r.stock.view.Warmed, drift: r.stock.drift()}
}

// stockMismatch: the stock key is missing although the sale started, or
// the stores disagree.
func (r reading) stockMismatch(t Target, now time.Time) bool {
	if !r.stock.view.Warmed {
		return started(t, now)
	}
	return r.stock.drift() != 0
}

func (r reading) mismatch(t Target, now time.Time) bool {
	if r.stockMismatch(t, now) {
		return true
	}
	for _, q := range r.quotas {
		if len(q.missing)+len(q.stale) > 0 {
			return true
		}
	}
	return false
}

type quotaReading struct {
	live           int
	missing, stale []QuotaIssue
}

// read reads one item: stock first, then the quota of each activity.
func (c *Checker) read(ctx context.Context, t Target) (reading, error) {
	var r reading
	s, err := c.readStock(ctx, t.ItemID)
	if err != nil {
		return r, err
	}
	r.stock = s
	now := c.now()
	r.quotas = map[int64]quotaReading{}
	for _, a := range t.Activities {
		if !c.quotaChecked(a, now) {
			continue
		}
		q, err := c.readQuota(ctx, t.ItemID, a.ID)
		if err != nil {
			return r, err
		}
		r.quotas[a.ID] = q
	}
	return r, nil
}

// readAttempts bounds the reads readStock makes when orders moved while it
// read.
const readAttempts = 3

// readStock reads the item's stock in both stores, in the order the package
// comment explains, and reads again at once (up to readAttempts times) when
// an order moved between the stores while it read.
func (c *Checker) readStock(ctx context.Context, item int64) (stockReading, error) {
	for attempt := 1; ; attempt++ {
		s, moved, err := c.readStockOnce(ctx, item)
		if err != nil || len(moved) == 0 || attempt == readAttempts {
			return s, err
		}
		c.Log.Debug("orders moved during the read; reading again", "item_id", item, "orders", moved, "attempt", attempt)
	}
}

func (c *Checker) readStockOnce(ctx context.Context, item int64) (stockReading, []string, error) {
	mark, err := c.DB.ReadMark(ctx, item)
	if err != nil {
		return stockReading{}, nil, err
	}
	restocks := make([]stockredis.PendingRestock, len(mark.Restocks))
	for i, r := range mark.Restocks {
		restocks[i] = stockredis.PendingRestock{ID: r.ID, Quantity: r.Quantity}
	}
	view, err := c.Stock.View(ctx, item, slices.Sorted(maps.Keys(mark.Closing)), restocks...)
	if err != nil {
		return stockReading{}, nil, err
	}
	if c.afterView != nil {
		c.afterView(item)
	}
	snap, err := c.DB.StockSnapshot(ctx, item, view.Pending, mark)
	if err != nil {
		return stockReading{}, nil, err
	}
	s := stockReading{view: view, mysql: snap.Stock}
	for _, no := range view.Pending {
		o, ok := snap.Orders[no]
		switch {
		case !ok: // undecided: still on its way to MySQL
		case o.Status.Live():
			s.committed += o.Quantity
		default:
			s.releasing += o.Quantity
		}
	}
	for no, o := range mark.Closing {
		if view.States[no] == stockredis.StateConfirmed {
			s.closing += o.Quantity
		}
	}
	return s, snap.Moved, nil
}

// readQuota compares the activity's live orders with its quota keys.
func (c *Checker) readQuota(ctx context.Context, item, activity int64) (quotaReading, error) {
	// Live orders first: a key seen after them exists for every order
	// that was live then (a key goes only with its order's release).
	live, err := c.DB.LiveOrders(ctx, activity)
	if err != nil {
		return quotaReading{}, err
	}
	holders, err := c.Stock.QuotaHolders(ctx, item, activity)
	if err != nil {
		return quotaReading{}, err
	}
	q := quotaReading{live: len(live), missing: []QuotaIssue{}, stale: []QuotaIssue{}}
	suspects := map[string]string{}
	for user, no := range live {
		switch h, ok := holders[user]; {
		case !ok:
			q.missing = append(q.missing, QuotaIssue{UserID: user, OrderNo: no})
		case h != no:
			suspects[user] = h
		}
	}
	for user, h := range holders {
		if _, ok := live[user]; !ok {
			suspects[user] = h
		}
	}
	if len(suspects) > 0 {
		// Each key with its reservation at one instant, then MySQL: an
		// order RESERVED or CLAIMED then is on its way, and one that was
		// further along is in MySQL by now.
		states, err := c.Stock.QuotaStates(ctx, item, activity, suspects)
		if err != nil {
			return quotaReading{}, err
		}
		var ask []string
		for user, h := range suspects {
			st := states[user]
			if st.Holder != h || st.State == stockredis.StateReserved || st.State == stockredis.StateClaimed {
				delete(suspects, user) // changed since the scan, or on its way
				continue
			}
			ask = append(ask, h)
		}
		orders, err := c.DB.Orders(ctx, ask)
		if err != nil {
			return quotaReading{}, err
		}
		var closing map[string]orderdb.OrderState
		for _, o := range orders {
			if o.Status == order.Closed {
				// Closed orders whose release has not run: the release
				// deletes the key (the closer finishes it after a crash).
				if closing, err = c.DB.ClosingOrders(ctx, item); err != nil {
					return quotaReading{}, err
				}
				break
			}
		}
		for user, h := range suspects {
			o, ok := orders[h]
			if ok && o.Status.Live() && o.UserID == user && o.ActivityID == activity {
				continue // live: committed after the live orders were read
			}
			if _, ok := closing[h]; ok {
				continue
			}
			if no, ok := live[user]; ok {
				q.missing = append(q.missing, QuotaIssue{UserID: user, OrderNo: no, Holder: h})
			} else {
				q.stale = append(q.stale, QuotaIssue{UserID: user, Holder: h})
			}
		}
	}
	if len(q.missing) > 0 {
		// A key goes only after its order left MySQL's live set (close
		// first, release second): an order still live now, after the keys
		// were read, really is without its key.
		nos := make([]string, len(q.missing))
		for i, m := range q.missing {
			nos[i] = m.OrderNo
		}
		now, err := c.DB.Orders(ctx, nos)
		if err != nil {
			return quotaReading{}, err
		}
		q.missing = slices.DeleteFunc(q.missing, func(m QuotaIssue) bool {
			o, ok := now[m.OrderNo]
			if !ok || !o.Status.Live() {
				q.live--
				return true
			}
			return false
		})
	}
	sortIssues(q.missing)
	sortIssues(q.stale)
	return q, nil
}

func sortIssues(s []QuotaIssue) {
	slices.SortFunc(s, func(a, b QuotaIssue) int { return compareUsers(a.UserID, b.UserID) })
}

// compareUsers orders numeric ids by value, before every other id, and
// those by their bytes.
func compareUsers(a, b string) int {
	na, aNum := order.NumericUserID(a)
	nb, bNum := order.NumericUserID(b)
	switch {
	case aNum && bNum:
		return cmp.Compare(na, nb)
	case aNum:
		return -1
	case bNum:
		return 1
	}
	return strings.Compare(a, b)
}

// report is the item's report line from this reading (verdict not set).
func (r reading) report(t Target) ItemReport {
	s := r.stock
	it := ItemReport{
		ItemID:     t.ItemID,
		MySQLStock: s.mysql,
		InFlight:   s.inFlight(),
		Detail: InFlightDetail{
			Inflight:   s.view.Inflight,
			Undecided:  s.view.Inflight - s.committed - s.releasing,
			Committed:  s.committed,
			Releasing:  s.releasing,
			Closing:    s.closing,
			Restocking: s.view.Restocking,
			Pending:    len(s.view.Pending),
		},
		Drift:      s.drift(),
		Activities: []ActivityReport{},
	}
	if s.view.Warmed {
		v := s.view.Stock
		it.RedisStock = &v
	}
	for _, a := range t.Activities {
		ar := ActivityReport{ActivityID: a.ID}
		if q, ok := r.quotas[a.ID]; ok {
			ar.QuotaChecked = true
			ar.LiveOrders = q.live
			ar.QuotaMissing, ar.QuotaStale = q.missing, q.stale
		}
		it.Activities = append(it.Activities, ar)
	}
	return it
}

// logAttrs describe one read for the log.
func (r reading) logAttrs(item int64, read int) []any {
	s := r.stock
	attrs := []any{"item_id", item, "read", read, "redis_warmed", s.view.Warmed, "redis_stock", s.view.Stock,
		"inflight_counter", s.view.Inflight, "committed", s.committed, "releasing", s.releasing,
		"closing", s.closing, "restocking", s.view.Restocking, "pending_orders", len(s.view.Pending), "mysql_stock", s.mysql, "drift", s.drift()}
	missing, stale := 0, 0
	for _, q := range r.quotas {
		missing += len(q.missing)
		stale += len(q.stale)
	}
	return append(attrs, "quota_missing", missing, "quota_stale", stale)
}
