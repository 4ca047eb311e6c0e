package reconcile

import (
	"cmp"
	"context"
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// reading is one read of an item: its stock in both stores and its quota
// keys per activity.
type reading struct {
	stock  stockReading
	quotas map[int64]quotaReading // by activity id; only checked activities
}

type stockReading struct {
	// view is what Redis held (also the values a repair compares with).
	view  drift.StockView
	mysql int64
	// committed, releasing and closing: see the package comment
	// (restocking is view.Restocking, moving view.Moving).
	committed, releasing, closing int64
}

// inFlight is the units out of Redis stock that MySQL still counts as its
// own, and the units MySQL has that are on their way to Redis stock.
func (s stockReading) inFlight() int64 {
	return s.view.Inflight - s.committed + s.closing + s.view.Restocking + s.view.Moving
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

// read reads one item: stock first, then the quota of each activity.
func (c *Checker) read(ctx context.Context, t Target) (reading, error) {
	var r reading
	s, err := c.readStock(ctx, t.item())
	if err != nil {
		return r, err
	}
	r.stock = s
	now := c.now()
	r.quotas = map[int64]quotaReading{}
	for _, a := range t.Activities {
		if !c.quotaChecked(a, now) || !t.quotaOwner(a) {
			continue
		}
		q, err := c.readQuota(ctx, t.item(), a)
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
func (c *Checker) readStock(ctx context.Context, item reservation.Item) (stockReading, error) {
	for attempt := 1; ; attempt++ {
		s, moved, err := c.readStockOnce(ctx, item)
		if err != nil || len(moved) == 0 || attempt == readAttempts {
			return s, err
		}
		c.Log.Debug("orders moved during the read; reading again", "item_id", item.ID, "orders", moved, "attempt", attempt)
	}
}

func (c *Checker) readStockOnce(ctx context.Context, item reservation.Item) (stockReading, []string, error) {
	mark, err := c.DB.ReadMark(ctx, item.ID)
	if err != nil {
		return stockReading{}, nil, err
	}
	view, err := c.Stock.View(ctx, item, slices.Sorted(maps.Keys(mark.Closing)), mark.Restocks...)
	if err != nil {
		return stockReading{}, nil, err
	}
	if c.afterView != nil {
		c.afterView(item.ID)
	}
	snap, err := c.DB.StockSnapshot(ctx, item.ID, view.Pending, mark)
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
		if view.States[no] == reservation.StateConfirmed {
			s.closing += o.Quantity
		}
	}
	return s, snap.Moved, nil
}

type quotaReading struct {
	live int
	// missing and stale list the first MaxListed issues of each kind;
	// missingN and staleN count them all, absentN those of missingN whose
	// key is missing (the rest hold another order number).
	missing, stale            []QuotaIssue
	missingN, staleN, absentN int
}

// MaxListed is the most quota issues of each kind a read lists (and a
// report shows); beyond it they are counted. A repair restores every
// missing key whatever the count, by a scan of its own (restoreQuotas).
const MaxListed = 1000

// quotaPage is how many live orders one step of the quota check (and of
// its repair) reads: a page of uk_orders_live and an MGET of their keys.
const quotaPage = 5000

func (q *quotaReading) addMissing(m QuotaIssue) {
	q.missingN++
	if m.Holder == "" {
		q.absentN++
	}
	if len(q.missing) < MaxListed {
		q.missing = append(q.missing, m)
	}
}

func (q *quotaReading) addStale(s QuotaIssue) {
	q.staleN++
	if len(q.stale) < MaxListed {
		q.stale = append(q.stale, s)
	}
}

// readQuota compares the activity's live orders with its quota keys, a
// page at a time, so it holds a few pages whatever the size of the sale:
// first the live orders in user order, each page of them before the keys
// of its users (a key seen after its order was live exists for every
// order that was live then: a key goes only with its order's release);
// then the quota keys by SCAN, each page of them before the live orders of
// its users, for the keys whose user holds no live order.
func (c *Checker) readQuota(ctx context.Context, item reservation.Item, a activity.Activity) (quotaReading, error) {
	activity := a.ID
	q := quotaReading{missing: []QuotaIssue{}, stale: []QuotaIssue{}}
	var closing map[string]drift.OrderState // read once, when needed
	closingOf := func() (map[string]drift.OrderState, error) {
		if closing != nil {
			return closing, nil
		}
		// The sale's closing orders, of each of its items.
		closing = map[string]drift.OrderState{}
		for _, id := range a.ItemIDs() {
			of, err := c.DB.ClosingOrders(ctx, id)
			if err != nil {
				closing = nil
				return nil, err
			}
			maps.Copy(closing, of)
		}
		return closing, nil
	}
	var seen keySet // the keys the live orders' pages found
	for after := ""; ; {
		page, err := c.DB.LiveOrderPage(ctx, activity, after, quotaPage)
		if err != nil {
			return q, err
		}
		if len(page) == 0 {
			break
		}
		after = page[len(page)-1].UserID
		if err := c.checkLivePage(ctx, item, activity, page, &q, &seen, closingOf); err != nil {
			return q, err
		}
		if len(page) < quotaPage {
			break
		}
	}
	// Every key the scan finds that the first pass found too, user and
	// order number alike, belongs to a live order (or was judged there).
	// When the scan finds exactly those keys, there is no other key to
	// ask MySQL about; else (a stale key, a key made or gone since, or a
	// key SCAN returned twice) every step of a second scan is checked.
	var scanned keySet
	err := c.Stock.ScanQuota(ctx, item, activity, func(holders map[string]string) error {
		for user, h := range holders {
			scanned.add(user, h)
		}
		return nil
	})
	if err != nil || scanned == seen {
		sortIssues(q.missing)
		return q, err
	}
	err = c.Stock.ScanQuota(ctx, item, activity, func(holders map[string]string) error {
		users := slices.Collect(maps.Keys(holders))
		live, err := c.DB.LiveOrdersOf(ctx, activity, users)
		if err != nil {
			return err
		}
		suspects := map[string]string{}
		for user, h := range holders {
			if _, ok := live[user]; !ok {
				suspects[user] = h // a live one is the first scan's
			}
		}
		return c.judgeSuspects(ctx, item, activity, suspects, nil, &q, closingOf)
	})
	if err != nil {
		return q, err
	}
	sortIssues(q.missing)
	sortIssues(q.stale)
	return q, nil
}

// keySet sums a set of quota keys (user, and the order number the key
// holds) in constant space: two sets of the same keys have the same sum,
// and two that differ have different sums but for a 64-bit hash collision.
type keySet struct {
	n   int
	sum uint64
}

// keySeed is the hash seed of every keySet of the process.
var keySeed = maphash.MakeSeed()

func (s *keySet) add(user, holder string) {
	var h maphash.Hash
	h.SetSeed(keySeed)
	h.WriteString(user)
	h.WriteByte(0)
	h.WriteString(holder)
	s.n++
	s.sum += h.Sum64()
}

// checkLivePage checks the quota keys of one page of live orders, and
// adds the keys it finds to seen.
func (c *Checker) checkLivePage(ctx context.Context, item reservation.Item, activity int64, page []drift.LiveOrder, q *quotaReading, seen *keySet,
	closingOf func() (map[string]drift.OrderState, error)) error {
	q.live += len(page)
	users := make([]string, len(page))
	live := make(map[string]string, len(page))
	for i, o := range page {
		users[i] = o.UserID
		live[o.UserID] = o.OrderNo
	}
	holders, err := c.Stock.QuotaHoldersOf(ctx, item, activity, users)
	if err != nil {
		return err
	}
	var absent []QuotaIssue
	suspects := map[string]string{}
	for _, o := range page {
		h, ok := holders[o.UserID]
		if ok {
			seen.add(o.UserID, h)
		}
		switch {
		case !ok:
			absent = append(absent, QuotaIssue{UserID: o.UserID, OrderNo: o.OrderNo})
		case h != o.OrderNo:
			suspects[o.UserID] = h
		}
	}
	if err := c.judgeSuspects(ctx, item, activity, suspects, live, q, closingOf); err != nil {
		return err
	}
	if len(absent) == 0 {
		return nil
	}
	// A key goes only after its order left MySQL's live set (close first,
	// release second): an order still live now, after the keys were read,
	// really is without its key.
	nos := make([]string, len(absent))
	for i, m := range absent {
		nos[i] = m.OrderNo
	}
	now, err := c.DB.Orders(ctx, nos)
	if err != nil {
		return err
	}
	for _, m := range absent {
		if o, ok := now[m.OrderNo]; ok && o.Status.Live() {
			q.addMissing(m)
		} else {
			q.live--
		}
	}
	return nil
}

// judgeSuspects sorts out quota keys that hold an order number other than
// their user's live order (live: user -> live order, nil for none): each
// key with its reservation at one instant, then MySQL. An order RESERVED
// or CLAIMED then is on its way, and one that was further along is in
// MySQL by now; one MySQL closed whose release has not run yet keeps its
// key until the release deletes it.
func (c *Checker) judgeSuspects(ctx context.Context, item reservation.Item, activity int64, suspects, live map[string]string, q *quotaReading,
	closingOf func() (map[string]drift.OrderState, error)) error {
	if len(suspects) == 0 {
		return nil
	}
	states, err := c.Stock.QuotaStates(ctx, item, activity, suspects)
	if err != nil {
		return err
	}
	var ask []string
	for user, h := range suspects {
		st := states[user]
		if st.Holder != h || st.State == reservation.StateReserved || st.State == reservation.StateClaimed {
			delete(suspects, user) // changed since the read, or on its way
			continue
		}
		ask = append(ask, h)
	}
	orders, err := c.DB.Orders(ctx, ask)
	if err != nil {
		return err
	}
	var closing map[string]drift.OrderState
	for _, o := range orders {
		if o.Status == order.Closed {
			if closing, err = closingOf(); err != nil {
				return err
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
			q.addMissing(QuotaIssue{UserID: user, OrderNo: no, Holder: h})
		} else {
			q.addStale(QuotaIssue{UserID: user, Holder: h})
		}
	}
	return nil
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
			Moving:     s.view.Moving,
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
			ar.QuotaMissingCount, ar.QuotaStaleCount = q.missingN, q.staleN
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
		"closing", s.closing, "restocking", s.view.Restocking, "moving", s.view.Moving, "pending_orders", len(s.view.Pending), "mysql_stock", s.mysql, "drift", s.drift()}
	missing, stale := 0, 0
	for _, q := range r.quotas {
		missing += q.missingN
		stale += q.staleN
	}
	return append(attrs, "quota_missing", missing, "quota_stale", stale)
}
