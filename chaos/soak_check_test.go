//go:build soak

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/draw"
)

// The checker: after the faults are healed it replays every key a buyer
// was given an order for, waits for the pipeline to drain, then asserts
// every promise from its own reads of MySQL and Redis and from the answers
// the clients got.

// promise is one promise's verdict.
type promise struct {
	name     string
	held     bool
	detail   string   // what was checked
	breaches []string // what broke it (the first few)
}

// soakReport is what the run prints.
type soakReport struct {
	seed     uint64
	duration time.Duration
	topology string
	faults   map[string]int
	ops      map[string]int
	answers  map[string]int
	promises []*promise
	notes    []string
}

func (r *soakReport) ok() bool {
	for _, p := range r.promises {
		if !p.held {
			return false
		}
	}
	return true
}

func (r *soakReport) broken() []string {
	var out []string
	for _, p := range r.promises {
		if !p.held {
			out = append(out, p.name+": "+strings.Join(p.breaches, ", "))
		}
	}
	return out
}

// verdict is the report's notes and its broken promises with their
// breaches: what a failed run is about, in a few lines.
func (r *soakReport) verdict() string {
	var b strings.Builder
	r.writeNotes(&b)
	for _, p := range r.promises {
		if !p.held {
			p.write(&b)
		}
	}
	return b.String()
}

func (r *soakReport) writeNotes(b *strings.Builder) {
	for _, n := range r.notes {
		fmt.Fprintf(b, "soak: note: %s\n", n)
	}
}

// write prints the promise's line and, when broken, its breaches.
func (p *promise) write(b *strings.Builder) {
	verdict := "held"
	if !p.held {
		verdict = "BROKEN"
	}
	fmt.Fprintf(b, "soak: promise %-34s %-6s %s\n", p.name, verdict, p.detail)
	for _, br := range p.breaches {
		fmt.Fprintf(b, "soak:     %s\n", br)
	}
}

func (r *soakReport) String() string {
	var b strings.Builder
	nf, no := 0, 0
	for _, n := range r.faults {
		nf += n
	}
	for _, n := range r.ops {
		no += n
	}
	held := 0
	for _, p := range r.promises {
		if p.held {
			held++
		}
	}
	fmt.Fprintf(&b, "soak: report of seed %d, %v\n", r.seed, r.duration)
	fmt.Fprintf(&b, "soak: faults by kind: %s\n", countsLine(r.faults))
	fmt.Fprintf(&b, "soak: operations by kind: %s\n", countsLine(r.ops))
	fmt.Fprintf(&b, "soak: order answers: %s\n", countsLine(r.answers))
	r.writeNotes(&b)
	for _, p := range r.promises {
		p.write(&b)
	}
	on := ""
	if r.topology == topologyReplicated {
		on = " (replicated)"
	}
	fmt.Fprintf(&b, "soak: seed %d%s, faults %d (%s), ops %d (%s), promises %d/%d held\n",
		r.seed, on, nf, countsLine(r.faults), no, countsLine(r.ops), held, len(r.promises))
	return b.String()
}

// dbOrder is one row of orders as the checker reads it.
type dbOrder struct {
	orderNo, user, status, reason, key string
	activity, item                     int64
	qty                                int
	updated, reserved                  time.Time
	deadline                           *time.Time
}

func (s *soak) readOrders() map[string]dbOrder {
	rows, err := s.p.DB.Gorm().Raw(`SELECT order_no, user_id, activity_id, item_id, quantity, status,
		COALESCE(failure_reason, ''), idempotency_key, updated_at, reserved_at, pay_deadline FROM orders`).Rows()
	if err != nil {
		s.t.Fatalf("read orders: %v", err)
	}
	defer rows.Close()
	out := map[string]dbOrder{}
	for rows.Next() {
		var o dbOrder
		if err := rows.Scan(&o.orderNo, &o.user, &o.activity, &o.item, &o.qty, &o.status, &o.reason, &o.key, &o.updated, &o.reserved, &o.deadline); err != nil {
			s.t.Fatalf("read orders: %v", err)
		}
		out[o.orderNo] = o
	}
	if err := rows.Err(); err != nil {
		s.t.Fatalf("read orders: %v", err)
	}
	return out
}

// finalReplays sends every key that was given an order once more, after
// the faults: it must name the same order (or be refused), never a second.
func (s *soak) finalReplays() {
	s.log.mu.Lock()
	seen := map[string]orderAnswer{}
	for _, o := range s.log.orders {
		if o.code/100 == 2 && o.orderNo != "" {
			seen[fmt.Sprint(o.activity, "|", o.user, "|", o.key)] = o
		}
	}
	s.log.mu.Unlock()
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r := rand.New(rand.NewPCG(s.seed, 99))
	for _, k := range keys {
		o := seen[k]
		s.log.op("final-replay")
		s.placeAdmitted("final-replay", r, o.user, o.key, o.activity, o.item, o.qty, o.admission)
	}
}

// finalRestocks sends every restock that was never answered 200 again
// with its key, as an operator told 503 does, until it is (5 tries).
func (s *soak) finalRestocks() {
	s.log.mu.Lock()
	done, todo := map[string]bool{}, map[string]restockAnswer{}
	for _, ra := range s.log.restocks {
		k := fmt.Sprint(ra.item, "|", ra.key)
		if ra.code == 200 {
			done[k] = true
		}
		todo[k] = ra
	}
	s.log.mu.Unlock()
	for k, ra := range todo {
		if done[k] {
			continue
		}
		for try := 0; try < 5; try++ {
			var out struct {
				RestockID int64 `json:"restock_id"`
			}
			s.log.op("final-restock")
			code, err := s.apis[try%2].API().Do("POST", fmt.Sprintf("/admin/v1/items/%d/restock", ra.item), 1, auth.RoleAdmin,
				map[string]string{"Idempotency-Key": ra.key}, map[string]any{"quantity": ra.qty}, &out)
			s.log.mu.Lock()
			s.log.restocks = append(s.log.restocks, restockAnswer{item: ra.item, key: ra.key, qty: ra.qty, code: code, restockID: out.RestockID, neterr: err != nil})
			s.log.mu.Unlock()
			if code == 200 {
				break
			}
		}
	}
}

// drain waits (up to 3 minutes) until every order a buyer was given is in
// MySQL, nothing is in flight in Redis, Redis stock equals MySQL stock,
// and no order of a sale with a short payment window (at most 20 s here;
// the others take the default 30 minutes) waits for its payment: the
// closer has closed every such unpaid order. Waiting only for the windows
// that had ended let the checks below run while the closer was still
// closing the last orders, each read seeing another moment (a seed 1 run
// found live units + MySQL stock 2 short, and Redis 2 below MySQL, while
// MySQL's stock moved by 8 between the two reads).
func (s *soak) drain() (bool, string) {
	ctx := context.Background()
	why := ""
	ok := pollUntil(time.Now().Add(3*time.Minute), 250*time.Millisecond, func() bool {
		s.supervise()
		s.log.mu.Lock()
		nos := make([]string, 0, len(s.log.accepted))
		for no := range s.log.accepted {
			nos = append(nos, no)
		}
		s.log.mu.Unlock()
		got, err := s.p.DB.Orders.Orders(ctx, nos)
		if err != nil || len(got) < len(nos) {
			why = fmt.Sprintf("%d of %d orders given to buyers in MySQL (%v)", len(got), len(nos), err)
			return false
		}
		for _, it := range s.items() {
			snap, err := s.p.Store.Stock.Stock(ctx, it.key())
			if err != nil || snap.Inflight != 0 {
				why = fmt.Sprintf("sale %s: %d in flight (%v)", it.name, snap.Inflight, err)
				return false
			}
			// Redis that lost data is repaired by the consumers' watch
			// once the closer and the buyers leave the stock still.
			var stock int64
			if err := s.p.DB.Gorm().Raw("SELECT stock FROM item_stock WHERE item_id = ?", it.ID).Scan(&stock).Error; err != nil || snap.Stock != stock {
				why = fmt.Sprintf("sale %s: Redis stock %d, MySQL stock %d (%v)", it.name, snap.Stock, stock, err)
				return false
			}
		}
		var unpaid int64
		if err := s.p.DB.Gorm().Raw("SELECT COUNT(*) FROM orders WHERE status = 'CREATED' AND pay_deadline < NOW(3) + INTERVAL 1 MINUTE").
			Scan(&unpaid).Error; err != nil || unpaid > 0 {
			why = fmt.Sprintf("%d CREATED orders of short payment windows not closed yet (%v)", unpaid, err)
			return false
		}
		return true
	})
	return ok, why
}

// check replays, drains and asserts every promise.
func (s *soak) check() *soakReport {
	ctx := context.Background()
	s.finalReplays()
	s.finalRestocks()
	drawSettled, drawWhy := s.settleDraw()
	roomRounds, roomLast, roomBreaches := s.settleRoom()
	drained, why := s.drain()
	drainStart := time.Now()
	eventsDrained, eventsWhy := s.eventsDrain()
	s.t.Logf("soak: the events drained %v after the pipeline", time.Since(drainStart).Round(time.Millisecond))
	rep := &soakReport{seed: s.seed, duration: s.sched.Duration, topology: s.sched.Topology, faults: s.faultsRun, answers: map[string]int{}}
	if len(s.reseeded) > 0 {
		rep.notes = append(rep.notes, fmt.Sprintf("old MariaDB primaries copied anew after a failover (they held transactions the new primary never received): %s",
			strings.Join(s.reseeded, ", ")))
	}
	if !drained {
		rep.notes = append(rep.notes, "the pipeline did not drain within 3 minutes: "+why)
	}
	if !eventsDrained {
		rep.notes = append(rep.notes, "the events did not drain within 2 minutes: "+eventsWhy)
	}
	if !drawSettled {
		rep.notes = append(rep.notes, "sale H's draw did not settle within 2 minutes: "+drawWhy)
	}
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	rep.ops = s.log.ops
	for _, o := range s.log.orders {
		k := fmt.Sprint(o.code)
		if o.neterr {
			k = "no answer"
		} else if o.errc != "" {
			k += " " + o.errc
		}
		rep.answers[k]++
	}
	dbo := s.readOrders()
	add := func(name, detail string, breaches []string) {
		if len(breaches) > 8 {
			breaches = append(breaches[:8], fmt.Sprintf("... and %d more", len(breaches)-8))
		}
		rep.promises = append(rep.promises, &promise{name: name, held: len(breaches) == 0, detail: detail, breaches: breaches})
	}
	g := s.p.DB.Gorm().WithContext(ctx)

	// 1. No oversell in MySQL.
	var br []string
	restocked := map[int64]int64{}
	for _, it := range s.items() {
		var stock, units, re int64
		if err := g.Raw("SELECT stock FROM item_stock WHERE item_id = ?", it.ID).Scan(&stock).Error; err != nil {
			s.t.Fatal(err)
		}
		if err := g.Raw("SELECT COALESCE(SUM(quantity), 0) FROM orders WHERE item_id = ? AND status IN ('CREATED','PAID')", it.ID).Scan(&units).Error; err != nil {
			s.t.Fatal(err)
		}
		if err := g.Raw("SELECT COALESCE(SUM(quantity), 0) FROM restocks WHERE item_id = ?", it.ID).Scan(&re).Error; err != nil {
			s.t.Fatal(err)
		}
		restocked[it.ID] = re
		if stock < 0 || units+stock != it.Stock+re {
			br = append(br, fmt.Sprintf("sale %s: live units %d + MySQL stock %d != stock %d + restocked %d", it.name, units, stock, it.Stock, re))
		}
	}
	add("no-oversell-mysql", "live units + MySQL stock = initial + restocked, stock >= 0, every item (each size of F)", br)

	// 2. No oversell in Redis: never below zero, and a 202 ends FAILED
	// OUT_OF_STOCK only after Redis lost acknowledged writes (README).
	br = nil
	outOfStock := 0
	for no := range s.log.accepted {
		if o, ok := dbo[no]; ok && o.status == "FAILED" && o.reason == "OUT_OF_STOCK" {
			outOfStock++
		}
	}
	for _, it := range s.items() {
		snap, err := s.p.Store.Stock.Stock(ctx, it.key())
		if err != nil {
			br = append(br, fmt.Sprintf("sale %s: read Redis: %v", it.name, err))
		} else if snap.Stock < 0 {
			br = append(br, fmt.Sprintf("sale %s: Redis stock %d", it.name, snap.Stock))
		}
	}
	// A master killed loses what its replica had not received (all of
	// the last second when it lagged): a loss like a restore's.
	losses := s.faultsRun[faultRestore] + s.faultsRun[faultFlush] + s.faultsRun[faultKillMaster]
	if outOfStock > 0 && losses == 0 {
		br = append(br, fmt.Sprintf("%d orders answered 202 ended FAILED OUT_OF_STOCK with no Redis data loss", outOfStock))
	}
	add("no-oversell-redis", fmt.Sprintf("Redis stock >= 0; 202s failed OUT_OF_STOCK: %d (allowed only after Redis lost data: %d restores, flushes and master kills ran)",
		outOfStock, losses), br)

	// 3. At most one live order per user per activity, within its limit.
	br = nil
	type ua struct {
		act  int64
		user string
	}
	live := map[ua][]dbOrder{}
	for _, o := range dbo {
		if o.status == "CREATED" || o.status == "PAID" {
			live[ua{o.activity, o.user}] = append(live[ua{o.activity, o.user}], o)
		}
	}
	for k, os := range live {
		if len(os) > 1 {
			br = append(br, fmt.Sprintf("user %s holds %d live orders in activity %d", k.user, len(os), k.act))
		}
	}
	add("one-live-order-per-user", fmt.Sprintf("%d users with a live order", len(live)), br)

	// 4. Every 202 reaches a final state.
	br = nil
	final := 0
	for no, acc := range s.log.accepted {
		o, ok := dbo[no]
		switch {
		case !ok:
			br = append(br, fmt.Sprintf("order %s (user %s, activity %d) given to a buyer is not in MySQL", no, acc.user, acc.activity))
		case o.status == "FAILED" && o.reason == "":
			br = append(br, fmt.Sprintf("order %s FAILED with no reason", no))
		default:
			final++
		}
	}
	add("every-202-final", fmt.Sprintf("%d/%d orders given to buyers are CREATED, PAID, CLOSED or FAILED with a reason", final, len(s.log.accepted)), br)

	// 5. A replayed key never gives a second order.
	br = nil
	type keyID struct {
		act       int64
		user, key string
	}
	given := map[keyID]map[string]bool{}
	answered := map[keyID][]orderAnswer{}
	for _, o := range s.log.orders {
		k := keyID{o.activity, o.user, o.key}
		answered[k] = append(answered[k], o)
		if o.code/100 == 2 && o.orderNo != "" {
			if given[k] == nil {
				given[k] = map[string]bool{}
			}
			given[k][o.orderNo] = true
		}
	}
	byKey := map[keyID][]dbOrder{}
	for _, o := range dbo {
		if o.status != "FAILED" {
			k := keyID{o.activity, o.user, o.key}
			byKey[k] = append(byKey[k], o)
		}
	}
	replays := 0
	begin := s.begin
	for k, os := range byKey {
		if len(os) > 1 {
			var ds []string
			for _, o := range os {
				ds = append(ds, fmt.Sprintf("%s %s reserved %v", o.orderNo, o.status, o.reserved.Sub(begin).Round(time.Millisecond)))
			}
			var as []string
			for _, a := range answered[k] {
				as = append(as, fmt.Sprintf("%s on %s at %v: %d %s%s", a.kind, a.api, a.sent.Sub(begin).Round(time.Millisecond), a.code, a.orderNo, a.errc))
			}
			br = append(br, fmt.Sprintf("key %s of user %s in activity %d made %d orders that did not fail: %s; its answers: %s",
				k.key, k.user, k.act, len(os), strings.Join(ds, ", "), strings.Join(as, "; ")))
		}
	}
	for k, nos := range given {
		replays += len(answered[k]) - 1
		if len(nos) > 1 {
			var names []string
			for no := range nos {
				names = append(names, no+" "+dbo[no].status)
			}
			sort.Strings(names)
			s.t.Logf("key %s of user %s was given %d order numbers: %s", k.key, k.user, len(nos), strings.Join(names, ", "))
		}
	}
	add("replay-gives-no-second-order", fmt.Sprintf("%d keys given an order, %d further answers to them (double clicks, replays)", len(given), replays), br)

	// 6. A 503 means no order: a key only ever answered 503 holds nothing,
	// but for the two exceptions guarantees.md gives (Limits), each named
	// by the api in its log: Kafka, Redis and MySQL all failed the same
	// request, the reservation stayed and the sweep published it (kept);
	// or Kafka's answer was lost and MySQL could not record the give-up,
	// so only Redis's release said it, and Redis lost that before a
	// consumer read the event (unrecorded).
	br = nil
	only503, kept503, unrecorded503 := 0, 0, 0
	kept := s.apiLogged(keptMsg)
	unrecorded := s.apiLogged(unrecordedMsg)
	for k, as := range answered {
		all := len(as) > 0
		for _, a := range as {
			if a.neterr || a.code != 503 {
				all = false
			}
		}
		if !all {
			continue
		}
		only503++
		for _, o := range byKey[k] {
			if kept[o.orderNo] {
				kept503++
				continue
			}
			if unrecorded[o.orderNo] {
				unrecorded503++
				continue
			}
			br = append(br, fmt.Sprintf("key %s of user %s, only ever answered 503, holds order %s %s", k.key, k.user, o.orderNo, o.status))
		}
	}
	add("503-holds-nothing", fmt.Sprintf("%d keys only ever answered 503; %d orders of them kept after Kafka, Redis and MySQL all failed, %d given up in Redis only and lost there (guarantees.md's exceptions)",
		only503, kept503, unrecorded503), br)

	// 7. After the drain Redis stock equals MySQL stock, nothing in
	// flight, and the reconciler finds no drift.
	br = nil
	var items []string
	for _, it := range s.items() {
		snap, err := s.p.Store.Stock.Stock(ctx, it.key())
		var stock int64
		if err2 := g.Raw("SELECT stock FROM item_stock WHERE item_id = ?", it.ID).Scan(&stock).Error; err2 != nil {
			s.t.Fatal(err2)
		}
		switch {
		case err != nil:
			br = append(br, fmt.Sprintf("sale %s: %v", it.name, err))
		case !snap.Warmed:
			br = append(br, fmt.Sprintf("sale %s: Redis holds no stock for item %d", it.name, it.ID))
		case snap.Stock != stock || snap.Inflight != 0:
			br = append(br, fmt.Sprintf("sale %s: Redis stock %d (in flight %d) != MySQL stock %d", it.name, snap.Stock, snap.Inflight, stock))
		}
		items = append(items, fmt.Sprint(it.ID))
	}
	// The consumers' watch may hold the reconciler's lock for a moment.
	if r := s.p.Reconcile("--item", strings.Join(items, ","), "--wait", "30s"); r.Code != 0 {
		out := strings.TrimSpace(r.Stdout + "\n" + r.Stderr)
		if len(out) > 1500 {
			out = out[:1500] + " ..."
		}
		br = append(br, fmt.Sprintf("reconciler exit %d:\n%s", r.Code, out))
	}
	add("redis-equals-mysql-after-drain", "every item: Redis stock = MySQL stock, in flight 0, reconciler exit 0", br)

	// 8. No PAID order in a cancelled sale (paid after the cancel).
	br = nil
	d := s.sales[3]
	// Both by MySQL's clock, to the millisecond: a payment committed
	// before the cancel's statement has updated_at <= cancelled_at.
	var paidAfter int64
	if err := g.Raw(`SELECT COUNT(*) FROM orders o JOIN activities a ON a.id = o.activity_id
		WHERE a.cancelled_at IS NOT NULL AND o.status = 'PAID' AND o.updated_at > a.cancelled_at`).Scan(&paidAfter).Error; err != nil {
		s.t.Fatal(err)
	}
	if paidAfter > 0 {
		br = append(br, fmt.Sprintf("%d orders of a cancelled sale became PAID after its cancel", paidAfter))
	}
	if !d.cancelledAt.IsZero() {
		// The first request answered PAID for each order of D (a buyer's
		// pay, or a notification that was not a duplicate); any request
		// sent before the cancel, answered or not, may have paid it.
		firstPaid, tried := map[string]string{}, map[string]time.Time{}
		paidAt := map[string]time.Time{}
		mark := func(no, what string, at time.Time, paid bool) {
			if s.log.accepted[no] == nil || s.log.accepted[no].activity != d.ActivityID {
				return
			}
			if t, ok := tried[no]; !ok || at.Before(t) {
				tried[no] = at
			}
			if t, ok := paidAt[no]; paid && (!ok || at.Before(t)) {
				paidAt[no], firstPaid[no] = at, what
			}
		}
		for _, a := range s.log.acts {
			if a.verb == "pay" {
				mark(a.orderNo, "pay", a.sent, a.code == 200 && a.status == "PAID")
			}
		}
		for _, n := range s.log.notes {
			mark(n.orderNo, "notification "+n.tx, n.sent, n.code == 200 && n.outcome == "PAID" && !n.duplicate)
		}
		for no, at := range paidAt {
			if at.After(d.cancelledAt) && tried[no].After(d.cancelledAt) {
				br = append(br, fmt.Sprintf("%s of %s sent %v after the cancel answered PAID", firstPaid[no], no, at.Sub(d.cancelledAt).Round(time.Millisecond)))
			}
		}
	} else {
		rep.notes = append(rep.notes, "sale D was never cancelled (the operator's cancel was not answered 200)")
	}
	add("no-paid-order-in-cancelled-sale", "no order of sale D paid after its cancel (MySQL, and the answers)", br)

	// 9. Each payment applied once: never both, never neither.
	br = nil
	type payRow struct{ tx, orderNo, outcome string }
	var rows []payRow
	prs, err := g.Raw("SELECT transaction_id, order_no, outcome FROM payments").Rows()
	if err != nil {
		s.t.Fatal(err)
	}
	for prs.Next() {
		var p payRow
		if err := prs.Scan(&p.tx, &p.orderNo, &p.outcome); err != nil {
			s.t.Fatal(err)
		}
		rows = append(rows, p)
	}
	prs.Close()
	paidRows := map[string]int{}
	byTx, byFolded := map[string]payRow{}, map[string]payRow{}
	for _, p := range rows {
		byTx[p.tx] = p
		byFolded[strings.ToLower(p.tx)] = p
		if p.outcome == "PAID" {
			paidRows[p.orderNo]++
			if o := dbo[p.orderNo]; o.status != "PAID" {
				br = append(br, fmt.Sprintf("payment %s paid order %s, which is %s", p.tx, p.orderNo, o.status))
			}
		}
	}
	for no, n := range paidRows {
		if n > 1 {
			br = append(br, fmt.Sprintf("order %s paid by %d transactions", no, n))
		}
	}
	took := 0
	for _, n := range s.log.notes {
		switch {
		case n.neterr || n.code >= 500:
		case n.code == 200:
			took++
			p, ok := byTx[n.tx]
			if !ok {
				br = append(br, fmt.Sprintf("notification %s answered 200 %s has no payments row", n.tx, n.outcome))
			} else if p.orderNo != n.orderNo {
				br = append(br, fmt.Sprintf("notification %s for %s answered 200 is recorded for %s", n.tx, n.orderNo, p.orderNo))
			}
		case n.errc == "PAYMENT_REFUSED":
			// A signed notification with the order's amount and currency
			// for an order in MySQL is neither applied nor owed.
			if o, ok := dbo[n.orderNo]; ok {
				if _, other := byTx[n.tx]; !other {
					what := "a transaction id never recorded"
					if p, ok := byFolded[strings.ToLower(n.tx)]; ok && p.orderNo != n.orderNo {
						what = fmt.Sprintf("transaction %s of order %s differs from it only in case", p.tx, p.orderNo)
					} else if n.caseVariantOf {
						what = "its id differs from an earlier one only in case"
					}
					br = append(br, fmt.Sprintf("notification %s for %s order %s refused (%s): neither paid nor owed", n.tx, o.status, n.orderNo, what))
				}
			}
		}
	}
	add("payment-applied-once", fmt.Sprintf("%d notifications sent, %d answered 200, %d payments rows", len(s.log.notes), took, len(rows)), br)

	// 10. An ended or cancelled sale takes no new order a second after the
	// end was answered: a later order is refused or ends FAILED. Later is
	// by the key's first request: a replay after the end is given the
	// order its key's first request reserved before it, when that answer
	// was lost. And whatever the answers, MySQL holds no live order it
	// has reserved at or after the sale's end (activity.Activity.Refusal).
	br = nil
	keyFirst := map[string]time.Time{}
	for _, a := range s.log.orders {
		k := fmt.Sprint(a.activity, "|", a.user, "|", a.key)
		if t, ok := keyFirst[k]; !ok || a.sent.Before(t) {
			keyFirst[k] = a.sent
		}
	}
	for _, sl := range []*soakSale{s.sales[2], s.sales[3]} {
		end := sl.endedAt
		if end.IsZero() {
			end = sl.cancelledAt
		}
		if end.IsZero() {
			continue
		}
		var endsAt time.Time
		if err := g.Raw("SELECT ends_at FROM activities WHERE id = ?", sl.ActivityID).Scan(&endsAt).Error; err != nil {
			s.t.Fatal(err)
		}
		for no, o := range dbo {
			if o.activity == sl.ActivityID && !o.reserved.Before(endsAt) && o.status != "FAILED" {
				br = append(br, fmt.Sprintf("sale %s: order %s reserved %v after its end is %s", sl.name, no, o.reserved.Sub(endsAt).Round(time.Millisecond), o.status))
			}
		}
		late := 0
		for no, acc := range s.log.accepted {
			if acc.activity != sl.ActivityID {
				continue
			}
			first := acc.first
			if o, ok := dbo[no]; ok {
				if t, ok := keyFirst[fmt.Sprint(o.activity, "|", o.user, "|", o.key)]; ok && t.Before(first) {
					first = t
				}
			}
			if !first.After(end.Add(time.Second)) {
				continue
			}
			late++
			if o := dbo[no]; o.status != "FAILED" {
				br = append(br, fmt.Sprintf("sale %s: order %s sent %v after the end became %s", sl.name, no, first.Sub(end).Round(time.Millisecond), o.status))
			}
		}
		if late > 0 {
			s.t.Logf("sale %s: %d orders given after the end + 1 s", sl.name, late)
		}
	}
	add("no-order-after-the-end", "orders of sales C (ended) and D (cancelled) sent 1 s after the end, or reserved after it: refused or FAILED", br)

	// 11. Every restock answered 200 is in MySQL once, with its quantity.
	br = nil
	okKeys := map[string]restockAnswer{}
	for _, ra := range s.log.restocks {
		if ra.code == 200 {
			okKeys[fmt.Sprint(ra.item, "|", ra.key)] = ra
		}
	}
	for _, ra := range okKeys {
		var n, q int64
		if err := g.Raw("SELECT COUNT(*), COALESCE(SUM(quantity), 0) FROM restocks WHERE item_id = ? AND idempotency_key = ?", ra.item, ra.key).
			Row().Scan(&n, &q); err != nil {
			s.t.Fatal(err)
		}
		if n != 1 || q != ra.qty {
			br = append(br, fmt.Sprintf("restock %s of item %d answered 200: %d rows, %d units (want 1, %d)", ra.key, ra.item, n, q, ra.qty))
		}
	}
	var total int64
	for _, v := range restocked {
		total += v
	}
	add("restock-applied-once", fmt.Sprintf("%d restock keys answered 200, %d units restocked in all (their Redis side: redis-equals-mysql)", len(okKeys), total), br)

	// 12. Unpaid orders are closed when their window ends (the closer).
	br = nil
	var overdue int64
	if err := g.Raw("SELECT COUNT(*) FROM orders WHERE status = 'CREATED' AND pay_deadline < NOW(3) - INTERVAL 3 SECOND").Scan(&overdue).Error; err != nil {
		s.t.Fatal(err)
	}
	if overdue > 0 {
		br = append(br, fmt.Sprintf("%d CREATED orders past their payment window", overdue))
	}
	closed := 0
	for _, o := range dbo {
		if o.status == "CLOSED" {
			closed++
		}
	}
	add("unpaid-orders-closed", fmt.Sprintf("%d orders CLOSED (closer, cancels)", closed), br)

	// 13. A refused change wrote nothing: sale E still ends when it was
	// created to.
	br = nil
	e := s.sales[4]
	var ends time.Time
	if err := g.Raw("SELECT ends_at FROM activities WHERE id = ?", e.ActivityID).Scan(&ends).Error; err != nil {
		s.t.Fatal(err)
	}
	if !ends.Equal(e.endsAt) {
		br = append(br, fmt.Sprintf("sale E ends at %v, created to end at %v", ends, e.endsAt))
	}
	add("refused-change-writes-nothing", "sale E's end after a refused PATCH", br)

	// 14. Sale G, with a waiting room: every order of it that did not fail
	// is a buyer's who was told ADMITTED, and every order sent without an
	// admission was refused. (The order's reserved_at is the api's shared
	// clock, which the clock-skew fault moves: no comparison of times.)
	br = nil
	g0 := s.sales[6]
	admitted := map[string]bool{}
	joins, admits := 0, 0
	for _, q := range s.log.queue {
		if q.code == 200 {
			joins++
		}
		if q.state == "ADMITTED" {
			admits++
			admitted[q.user] = true
		}
	}
	gOrders := 0
	for _, o := range dbo {
		if o.activity != g0.ActivityID || o.status == "FAILED" {
			continue
		}
		gOrders++
		if !admitted[o.user] {
			br = append(br, fmt.Sprintf("order %s of user %s in sale G (%s), who was never told ADMITTED", o.orderNo, o.user, o.status))
		}
	}
	for _, o := range s.log.orders {
		if o.activity == g0.ActivityID && o.admission == "" && o.code/100 == 2 {
			br = append(br, fmt.Sprintf("an order of sale G without an admission answered %d %s (%s, key %s)", o.code, o.orderNo, o.kind, o.key))
		}
	}
	add("room-orders-admitted", fmt.Sprintf("sale G: %d joins answered, %d told ADMITTED, %d orders that did not fail", joins, admits, gOrders), br)

	// 15. Sale H, a draw: exact. Its record verifies, each size's winners
	// fill its stock, each order of it is one pick's and each pick has one
	// at most, every winner and numbered pick has its order issued and
	// final, the units winners left went to the next alternates in rank
	// order, nothing oversold, Redis = MySQL, the reconciler and its
	// verify-draw clean (drawBreaches); and every entry answered 201 or 200
	// is the buyer's one entry.
	h := s.sales[7]
	sizes := make([]drawSize, len(h.Items))
	for i, it := range h.Items {
		sizes[i] = drawSize{Name: "H " + it.Label, ID: it.ID, Stock: it.Stock}
	}
	summary, br := drawBreaches(s.p, s.apis[0].API(), h.ActivityID, sizes)
	if !drawSettled {
		br = append(br, "not settled: "+drawWhy)
	}
	type entryRow struct{ UserID, EntryID string }
	var rowsH []entryRow
	if err := g.Raw("SELECT user_id, entry_id FROM draw_entries WHERE activity_id = ?", h.ActivityID).Scan(&rowsH).Error; err != nil {
		s.t.Fatal(err)
	}
	entryOf := map[string]string{}
	for _, e := range rowsH {
		entryOf[e.UserID] = e.EntryID
	}
	entered, enteredAgain := 0, 0
	for _, e := range s.log.entries {
		if e.code != 200 && e.code != 201 {
			continue
		}
		if e.code == 201 {
			entered++
		} else {
			enteredAgain++
		}
		if entryOf[e.user] != e.entryID {
			br = append(br, fmt.Sprintf("user %s was answered %d with entry %s; MySQL holds %q", e.user, e.code, e.entryID, entryOf[e.user]))
		}
	}
	add("draw-exact", fmt.Sprintf("sale H: %s; entries answered 201 %d, 200 %d", summary, entered, enteredAgain), br)

	// 16. Sale G's room served every buyer it gave a place: after the
	// faults, each one's turn came (an order, an admission that expired)
	// or the room told them SOLD_OUT or ENDED (settleRoom).
	lastStates := map[string]int{}
	for _, st := range roomLast {
		lastStates[strings.SplitN(st, " ", 2)[0]]++ // "WAITING at position ..." counts as WAITING
	}
	add("room-serves-every-waiter", fmt.Sprintf("sale G: %d buyers with a place, after %d rounds of polls: %s", len(roomLast), roomRounds, countsLine(lastStates)), roomBreaches)

	// 17. Nobody who joined sale G's queue later was admitted ahead of an
	// earlier joiner (roomOrderBreaches), across the Redis losses.
	rebuilds := s.roomRebuilds()
	pairs, br := roomOrderBreaches(s.log.queue, rebuilds, s.losses)
	add("room-keeps-its-order", fmt.Sprintf("sale G: %d answers, %d (earlier, later joiner) pairs judged, %d Redis losses, %d rebuilds of rooms",
		len(s.log.queue), pairs, len(s.losses), len(rebuilds)), br)

	// 18. Sale H's alternates were given only units that came back, and no
	// order of a pick failed for stock (alternateBreaches).
	var recH draw.Record
	br = nil
	if code, err := s.apis[0].API().Do("GET", fmt.Sprintf("/api/v1/activities/%d/draw", h.ActivityID), 0, "", nil, nil, &recH); err != nil || code != 200 {
		br = append(br, fmt.Sprintf("sale H's record: %d %v", code, err))
	}
	perSize, more := s.alternateBreaches(recH)
	add("alternates-get-units-that-came-back", "sale H: "+strings.Join(perSize, "; "), append(br, more...))

	// 19-22. Every event MySQL committed for the sales reached each
	// endpoint and the events topic, in order, signed (eventPromises).
	s.eventPromises(add)

	for _, pr := range s.programs {
		pr.mu.Lock()
		rep.notes = append(rep.notes, pr.unplanned...)
		pr.mu.Unlock()
	}
	for _, a := range s.log.admin {
		if strings.Contains(a, "sale") && !strings.HasPrefix(a, "warm-up of sale") {
			rep.notes = append(rep.notes, "operator: "+a)
		}
	}
	return rep
}

// settleDraw waits (up to 2 minutes) until sale H's draw has run and its
// orders stand still, paying each of its CREATED orders as its buyer
// would: every winner and numbered pick issued with its order in MySQL, no
// CREATED order left, and no size with units free in Redis while an
// alternate of it waits. Else each order closed unpaid gives its unit to
// the next alternate, whose order closes in its turn, while the checks
// read.
func (s *soak) settleDraw() (bool, string) {
	ctx := context.Background()
	h := s.sales[7]
	g := s.p.DB.Gorm().WithContext(ctx)
	why := ""
	r := rand.New(rand.NewPCG(s.seed, 98))
	ok := pollUntil(time.Now().Add(2*time.Minute), 500*time.Millisecond, func() bool {
		s.supervise()
		var state string
		if err := g.Raw("SELECT state FROM activity_draws WHERE activity_id = ?", h.ActivityID).Scan(&state).Error; err != nil || state != "DRAWN" {
			why = fmt.Sprintf("the draw is %q (%v)", state, err)
			return false
		}
		picks, err := s.p.Picks(h.ActivityID)
		if err != nil {
			why = err.Error()
			return false
		}
		waiting := map[int64]bool{}
		still := true
		for _, pk := range picks {
			switch {
			case pk.OrderNo == "" && pk.Outcome == "WON":
				why, still = fmt.Sprintf("winner %s has no order", pk.EntryID), false
			case pk.OrderNo == "":
				waiting[pk.ItemID] = true
			case !pk.Issued || pk.Status == "" || pk.Status == "PENDING":
				why, still = fmt.Sprintf("pick %s's order %s not issued or not in MySQL (%q)", pk.EntryID, pk.OrderNo, pk.Status), false
			case pk.Status == "CREATED":
				why, still = fmt.Sprintf("pick %s's order %s CREATED", pk.EntryID, pk.OrderNo), false
				s.log.op("final-draw-pay")
				_, a := s.api(r)
				_, _ = a.DoAs("POST", "/api/v1/orders/"+pk.OrderNo+"/pay", pk.UserID, "", nil, nil, nil)
			}
		}
		if !still {
			return false
		}
		for _, it := range h.items() {
			snap, err := s.p.Store.Stock.Stock(ctx, it.key())
			if err != nil || snap.Inflight != 0 || snap.Stock > 0 && waiting[it.ID] {
				why = fmt.Sprintf("%s: Redis stock %d, in flight %d, alternates waiting %v (%v)", it.name, snap.Stock, snap.Inflight, waiting[it.ID], err)
				return false
			}
		}
		return true
	})
	return ok, why
}

// The api's log lines naming an order a 503 may yet become (see
// placing.giveUp).
const (
	keptMsg       = `"msg":"order not confirmed and neither Redis nor MySQL could record it`
	unrecordedMsg = `"msg":"order not confirmed; reservation released, but MySQL could not record it FAILED"`
)

// apiLogged lists the orders the apis named in a log line with msg.
func (s *soak) apiLogged(msg string) map[string]bool {
	out := map[string]bool{}
	logLines(s.apis, msg, func(line string) {
		var l struct {
			OrderNo string `json:"order_no"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.OrderNo != "" {
			out[l.OrderNo] = true
		}
	})
	return out
}

// logLines calls each with every line of the programs' logs (every process
// each ran) that contains msg.
func logLines(programs []*program, msg string, each func(line string)) {
	for _, pr := range programs {
		pr.mu.Lock()
		for _, proc := range pr.procs {
			for _, line := range strings.Split(proc.Log(), "\n") {
				if strings.Contains(line, msg) {
					each(line)
				}
			}
		}
		pr.mu.Unlock()
	}
}
