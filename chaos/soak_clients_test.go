//go:build soak

package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/payment"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// The client mix: buyers, the payment provider and an operator, against
// both api instances, each request bounded (the api client's 10 s timeout)
// and the whole mix bounded in time and count. Every answer is written
// down for the checker.

const (
	soakPrice    = 1500
	soakCurrency = "EUR"
	soakUsers    = 1500 // buyers, shared by every sale
)

// soakSale is one sale of the run and what the operator did to it.
type soakSale struct {
	name                 string
	ItemID, ActivityID   int64
	Stock                int64
	Items                []pipelinetest.SaleItem // F: its sizes (ItemID is the first); nil: the one item ItemID
	PerUser              int
	Buckets              int
	Window               time.Duration
	mu                   sync.Mutex
	open                 bool      // buyers are sent to it
	endedAt, cancelledAt time.Time // when the operator's end or cancel was first answered 200
	endsAt               time.Time // E: the end it was created with
	entriesClose         time.Time // H: when its draw's entries close
}

func (sl *soakSale) isOpen() bool { sl.mu.Lock(); defer sl.mu.Unlock(); return sl.open }

func (sl *soakSale) perUser() int { sl.mu.Lock(); defer sl.mu.Unlock(); return sl.PerUser }

// soakItem is one item a sale sells: a sale's one item, or a size of F.
type soakItem struct {
	name  string // "A", "F size 3"
	sale  *soakSale
	ID    int64
	Stock int64 // initial
}

// key is the item's Redis keys' item (under its sale's hash tag).
func (it soakItem) key() reservation.Item { return reservation.In(it.sale.ItemID, it.ID) }

// items are the items of sl: its sizes, or its one item.
func (sl *soakSale) items() []soakItem {
	if len(sl.Items) == 0 {
		return []soakItem{{name: sl.name, sale: sl, ID: sl.ItemID, Stock: sl.Stock}}
	}
	out := make([]soakItem, len(sl.Items))
	for i, it := range sl.Items {
		out[i] = soakItem{name: sl.name + " " + it.Label, sale: sl, ID: it.ID, Stock: it.Stock}
	}
	return out
}

// items are every item of every sale.
func (s *soak) items() []soakItem {
	var out []soakItem
	for _, sl := range s.sales {
		out = append(out, sl.items()...)
	}
	return out
}

// pickItem is the item of sl an order names: 0 (none) for a sale of one
// item, else a random size.
func (sl *soakSale) pickItem(r *rand.Rand) int64 {
	if len(sl.Items) == 0 {
		return 0
	}
	return sl.Items[r.IntN(len(sl.Items))].ID
}

// orderAnswer is one place-order request and its answer.
type orderAnswer struct {
	kind, api    string
	user, key    string
	activity     int64
	item         int64 // 0: the request named none (a sale of one item)
	qty          int
	sent, got    time.Time
	code         int
	orderNo      string
	status, errc string
	neterr       bool
	admission    string // sent in X-Admission (sale G)
}

// actAnswer is a buyer's pay or cancel, or a GET of an order.
type actAnswer struct {
	verb, orderNo, user string
	sent                time.Time
	code                int
	status, errc        string
	neterr              bool
}

// noteAnswer is one provider notification.
type noteAnswer struct {
	tx, orderNo           string
	amount                int64
	sent                  time.Time
	code                  int
	outcome, orderStatus  string
	duplicate, neterr     bool
	errc                  string
	resent, caseVariantOf bool
}

// restockAnswer is one restock request.
type restockAnswer struct {
	item      int64
	key       string
	qty       int64
	code      int
	restockID int64
	neterr    bool
}

// accepted is an order a buyer was given (a 2xx with an order number).
type accepted struct {
	orderNo, user string
	activity      int64
	qty           int
	first         time.Time // when the request that first gave it was sent
}

// soakLog is every answer the clients got.
type soakLog struct {
	mu       sync.Mutex
	orders   []orderAnswer
	acts     []actAnswer
	notes    []noteAnswer
	restocks []restockAnswer
	admin    []string // the operator's steps and answers, for the report
	ops      map[string]int
	accepted map[string]*accepted
	accList  []*accepted
	txs      []noteAnswer
	queue    []queueAnswer
	entries  []entryAnswer
}

// entryAnswer is a buyer's entry in sale H's draw.
type entryAnswer struct {
	user    string
	code    int
	entryID string
	neterr  bool
}

// queueAnswer is a buyer's join of sale G's queue (or, in the checks, a
// poll of it): when it was sent and its answer came, and the position it
// gave (0: none, before the room's start).
type queueAnswer struct {
	user      string
	code      int
	state     string
	position  int64
	ahead     int64
	neterr    bool
	poll      bool
	sent, got time.Time
}

// queueState is the part of a queue answer the soak reads.
type queueState struct {
	State     string `json:"state"`
	Position  *int64 `json:"position"`
	Ahead     int64  `json:"ahead"`
	Admission string `json:"admission"`
	OrderNo   string `json:"order_no"`
}

// queue sends a join (POST) or a poll (GET) of sale G's queue for user and
// writes its answer down.
func (s *soak) queue(a *pipelinetest.API, user string, join bool) (int, queueState) {
	method := "GET"
	if join {
		method = "POST"
	}
	var q queueState
	sent := time.Now()
	code, err := a.DoAs(method, fmt.Sprintf("/api/v1/activities/%d/queue", s.sales[6].ActivityID), user, "", nil, nil, &q)
	ans := queueAnswer{user: user, code: code, state: q.State, ahead: q.Ahead, neterr: err != nil, poll: !join, sent: sent, got: time.Now()}
	if q.Position != nil {
		ans.position = *q.Position
	}
	s.log.mu.Lock()
	s.log.queue = append(s.log.queue, ans)
	s.log.mu.Unlock()
	return code, q
}

func newSoakLog() *soakLog {
	return &soakLog{ops: map[string]int{}, accepted: map[string]*accepted{}}
}

func (l *soakLog) op(kind string) { l.mu.Lock(); l.ops[kind]++; l.mu.Unlock() }

func (l *soakLog) addOrder(a orderAnswer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.orders = append(l.orders, a)
	if a.code/100 == 2 && a.orderNo != "" {
		if _, ok := l.accepted[a.orderNo]; !ok {
			acc := &accepted{orderNo: a.orderNo, user: a.user, activity: a.activity, qty: a.qty, first: a.sent}
			l.accepted[a.orderNo] = acc
			l.accList = append(l.accList, acc)
		}
	}
}

// randomAccepted picks an order some buyer was given, or nil.
func (l *soakLog) randomAccepted(r *rand.Rand) *accepted {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.accList) == 0 {
		return nil
	}
	// Mostly recent ones: they are still CREATED.
	n := len(l.accList)
	if r.IntN(3) > 0 {
		return l.accList[n-1-r.IntN(min(n, 40))]
	}
	return l.accList[r.IntN(n)]
}

func (l *soakLog) randomOrder(r *rand.Rand) (orderAnswer, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.orders) == 0 {
		return orderAnswer{}, false
	}
	return l.orders[r.IntN(len(l.orders))], true
}

func (l *soakLog) randomTx(r *rand.Rand) (noteAnswer, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.txs) == 0 {
		return noteAnswer{}, false
	}
	return l.txs[r.IntN(len(l.txs))], true
}

func (l *soakLog) adminf(format string, args ...any) {
	l.mu.Lock()
	l.admin = append(l.admin, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// setupSales makes the run's sales before any fault, through api1:
//   - A: one stock key, a 6 s payment window (the closer is busy);
//   - B: three buckets, 2 units a buyer, a 10 s window;
//   - C: ended by the operator at 45 % of the run;
//   - D: a 20 s window, cancelled at 65 % of the run;
//   - E: created to start in an hour, changed (start now, 2 units a
//     buyer) and warmed up by the operator at 25 %;
//   - F: a sale in six sizes of uneven stock, an 8 s window; buyers also
//     click on two of its sizes at once, with two keys (size-click);
//   - G: a waiting room, from 5 s in;
//   - H: a draw in four sizes (drawStep).
func (s *soak) setupSales() {
	a := s.apis[0].API()
	mk := func(name string, stock int64, o pipelinetest.SaleOptions) *soakSale {
		o.Price, o.Currency = soakPrice, soakCurrency
		sale := a.CreateSaleWith(stock, o)
		return &soakSale{name: name, ItemID: sale.ItemID, ActivityID: sale.ActivityID, Stock: sale.Stock, Items: sale.Items,
			PerUser: max(o.PerUserLimit, 1), Buckets: max(o.Buckets, 1), Window: o.PaymentWindow, open: true}
	}
	s.sales = []*soakSale{
		mk("A", 150, pipelinetest.SaleOptions{PerUserLimit: 1, PaymentWindow: 6 * time.Second}),
		mk("B", 150, pipelinetest.SaleOptions{PerUserLimit: 2, Buckets: 3, PaymentWindow: 10 * time.Second}),
		mk("C", 100, pipelinetest.SaleOptions{PerUserLimit: 1}),
		mk("D", 100, pipelinetest.SaleOptions{PerUserLimit: 1, PaymentWindow: 20 * time.Second}),
	}
	var item, act struct {
		ItemID     int64 `json:"item_id"`
		ActivityID int64 `json:"activity_id"`
	}
	if code, err := a.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil,
		map[string]any{"name": "soak E", "stock": 120, "price": soakPrice, "currency": soakCurrency}, &item); err != nil || code != 201 {
		s.t.Fatalf("create item E: %d %v", code, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if code, err := a.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil, map[string]any{"item_id": item.ItemID,
		"starts_at": now.Add(time.Hour), "ends_at": now.Add(2 * time.Hour), "per_user_limit": 1}, &act); err != nil || code != 201 {
		s.t.Fatalf("create activity E: %d %v", code, err)
	}
	s.sales = append(s.sales, &soakSale{name: "E", ItemID: item.ItemID, ActivityID: act.ActivityID, Stock: 120, PerUser: 1, Buckets: 1,
		endsAt: now.Add(2 * time.Hour)})
	s.sales = append(s.sales, mk("F", 0, pipelinetest.SaleOptions{PerUserLimit: 1, PaymentWindow: 8 * time.Second,
		Sizes: []int64{10, 35, 20, 50, 5, 30}}))
	// G: a drop with a waiting room, from a few seconds in (the first
	// joins come before its start); orders need an admission.
	s.sales = append(s.sales, mk("G", 0, pipelinetest.SaleOptions{PerUserLimit: 1, PaymentWindow: 8 * time.Second,
		Sizes: []int64{30, 30}, StartsIn: 5 * time.Second,
		WaitingRoom: map[string]any{"admit_per_second": 5, "admission_ttl_seconds": 20}}))
	// H: a draw in four sizes, its entries open for the first 30 % of the
	// run (at least 15 s), a 10 s payment window: winners who do not pay
	// or cancel leave their units to alternates.
	closeIn := drawCloseIn(s.sched.Duration)
	h := mk("H", 0, pipelinetest.SaleOptions{PerUserLimit: 1, PaymentWindow: 10 * time.Second,
		Sizes: []int64{10, 15, 10, 5}, EntriesCloseIn: closeIn})
	h.entriesClose = time.Now().Add(closeIn)
	s.sales = append(s.sales, h)
	for _, sl := range s.sales {
		s.t.Logf("sale %s: item %d activity %d stock %d per user %d buckets %d window %v",
			sl.name, sl.ItemID, sl.ActivityID, sl.Stock, sl.PerUser, sl.Buckets, sl.Window)
		for _, it := range sl.Items {
			s.t.Logf("sale %s: %s item %d stock %d", sl.name, it.Label, it.ID, it.Stock)
		}
	}
}

// soakHTTP is the client for what pipelinetest.API does not send (the
// provider's signed notifications).
var soakHTTP = &http.Client{Timeout: 10 * time.Second}

// clients is the running client mix.
type clients struct{ wg sync.WaitGroup }

func (c *clients) wait() { c.wg.Wait() }

// startClients starts the buyers and the operator for d.
func (s *soak) startClients(d time.Duration) *clients {
	c := &clients{}
	begin := s.begin
	stop := begin.Add(d)
	const workers = 4
	for w := range workers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			s.buyer(w, rand.New(rand.NewPCG(s.seed, uint64(w)+1)), stop)
		}()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		s.operator(begin, d)
	}()
	return c
}

// api picks one of the two instances.
func (s *soak) api(r *rand.Rand) (string, *pipelinetest.API) {
	pr := s.apis[r.IntN(len(s.apis))]
	return pr.name, pr.API()
}

// buyer runs one client of the mix until stop (at most 100,000 steps).
func (s *soak) buyer(w int, r *rand.Rand, stop time.Time) {
	type weighted struct {
		op string
		n  int
	}
	mix := []weighted{{"order", 40}, {"double-click", 8}, {"size-click", 4}, {"replay", 10}, {"pay", 7}, {"cancel", 6},
		{"notify", 10}, {"poll", 8}, {"restock", 2}, {"warmup", 1}, {"queue", 6}, {"draw", 8}}
	total := 0
	for _, m := range mix {
		total += m.n
	}
	for i := 0; i < 100_000 && time.Now().Before(stop); i++ {
		n := r.IntN(total)
		op := ""
		for _, m := range mix {
			if n < m.n {
				op = m.op
				break
			}
			n -= m.n
		}
		s.step(w, i, op, r)
		time.Sleep(time.Duration(15+r.IntN(30)) * time.Millisecond) // pacing, not a wait for a condition
	}
}

// openSale picks a sale buyers are sent to; one time in ten any sale
// (an ended or cancelled one refuses).
func (s *soak) openSale(r *rand.Rand) *soakSale {
	if r.IntN(10) == 0 {
		return s.sales[r.IntN(len(s.sales))]
	}
	var open []*soakSale
	for _, sl := range s.sales {
		if sl.isOpen() {
			open = append(open, sl)
		}
	}
	if len(open) == 0 {
		return s.sales[r.IntN(len(s.sales))]
	}
	return open[r.IntN(len(open))]
}

func (s *soak) step(w, i int, op string, r *rand.Rand) {
	s.log.op(op)
	switch op {
	case "order":
		sl := s.openSale(r)
		user := strconv.Itoa(1000 + r.IntN(soakUsers))
		s.place("order", r, user, fmt.Sprintf("k%d-%d-%d", s.seed, w, i), sl.ActivityID, sl.pickItem(r), 1+r.IntN(sl.perUser()))
	case "double-click":
		// The same key twice at once, on both instances or one.
		sl := s.openSale(r)
		user := strconv.Itoa(1000 + r.IntN(soakUsers))
		key := fmt.Sprintf("d%d-%d-%d", s.seed, w, i)
		qty := 1 + r.IntN(sl.PerUser)
		item := sl.pickItem(r)
		var wg sync.WaitGroup
		for range 2 {
			seed := r.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.place("double-click", rand.New(rand.NewPCG(seed, 1)), user, key, sl.ActivityID, item, qty)
			}()
		}
		wg.Wait()
	case "size-click":
		// Two sizes of F at once, each with its own key (two tabs): at
		// most one live order may come of them.
		sl := s.sales[5]
		user := strconv.Itoa(1000 + r.IntN(soakUsers))
		a := r.IntN(len(sl.Items))
		b := (a + 1 + r.IntN(len(sl.Items)-1)) % len(sl.Items)
		var wg sync.WaitGroup
		for j, size := range []int{a, b} {
			seed := r.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.place("size-click", rand.New(rand.NewPCG(seed, 1)), user, fmt.Sprintf("s%d-%d-%d-%d", s.seed, w, i, j),
					sl.ActivityID, sl.Items[size].ID, 1)
			}()
		}
		wg.Wait()
	case "replay":
		if o, ok := s.log.randomOrder(r); ok {
			s.placeAdmitted("replay", r, o.user, o.key, o.activity, o.item, o.qty, o.admission)
		}
	case "queue":
		// Sale G's queue: join (again: the same place) and, once admitted,
		// order with the admission.
		sl := s.sales[6]
		user := strconv.Itoa(1000 + r.IntN(roomBuyers))
		_, a := s.api(r)
		code, q := s.queue(a, user, true)
		if code == 200 && q.State == "ADMITTED" {
			s.placeAdmitted("queue", r, user, fmt.Sprintf("q%d-%d-%d", s.seed, w, i), sl.ActivityID, sl.pickItem(r), 1, q.Admission)
		}
	case "draw":
		s.drawStep(r)
	case "pay", "cancel", "poll":
		acc := s.log.randomAccepted(r)
		if acc == nil {
			return
		}
		_, a := s.api(r)
		s.act(a, op, acc.orderNo, acc.user)
	case "notify":
		s.notify(w, i, r)
	case "restock":
		s.restock(w, i, r)
	case "warmup":
		sl := s.openSale(r)
		_, a := s.api(r)
		code, err := a.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/warmup", sl.ActivityID), 1, auth.RoleAdmin, nil, nil, nil)
		s.log.adminf("warm-up of sale %s: %d %v", sl.name, code, errText(err))
	}
}

// roomBuyers is the buyers who join sale G's queue: few enough that a
// buyer joins again before their 20 s admission expires.
const roomBuyers = 200

// drawEntrants is the buyers who enter sale H: few enough that most get
// to enter, and many more than its units.
const drawEntrants = 300

// drawStep is a buyer of sale H: before its entries close, an entry (again,
// for some: the same entry back); after, a look at their entry and, when
// it won an order, paying it (most), cancelling it, or leaving it to close
// unpaid.
func (s *soak) drawStep(r *rand.Rand) {
	h := s.sales[7]
	_, a := s.api(r)
	user := strconv.Itoa(1000 + r.IntN(drawEntrants))
	if time.Now().Before(h.entriesClose) {
		code, e, err := a.Enter(user, h.ActivityID, h.pickItem(r))
		s.log.mu.Lock()
		s.log.entries = append(s.log.entries, entryAnswer{user: user, code: code, entryID: e.EntryID, neterr: err != nil})
		s.log.mu.Unlock()
		return
	}
	code, e, err := a.MyEntry(user, h.ActivityID)
	if err != nil || code != 200 || e.State != "WON" || e.OrderNo == "" {
		return
	}
	verb := "pay"
	switch n := r.IntN(20); {
	case n < 3:
		verb = "cancel"
	case n < 7:
		return // leaves it unpaid
	}
	s.act(a, verb, e.OrderNo, user)
}

// act sends a buyer's pay, cancel or poll ("pay", "cancel", "poll") of an
// order and writes its answer down.
func (s *soak) act(a *pipelinetest.API, verb, orderNo, user string) (int, string) {
	var b struct {
		Status string `json:"status"`
		Error  struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	sent := time.Now()
	var code int
	var err error
	if verb == "poll" {
		code, err = a.DoAs("GET", "/api/v1/orders/"+orderNo, user, "", nil, nil, &b)
	} else {
		code, err = a.DoAs("POST", "/api/v1/orders/"+orderNo+"/"+verb, user, "", nil, nil, &b)
	}
	s.log.mu.Lock()
	s.log.acts = append(s.log.acts, actAnswer{verb: verb, orderNo: orderNo, user: user, sent: sent, code: code,
		status: b.Status, errc: b.Error.Code, neterr: err != nil})
	s.log.mu.Unlock()
	return code, b.Status
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return "(" + err.Error() + ")"
}

// place sends one order and writes its answer down.
func (s *soak) place(kind string, r *rand.Rand, user, key string, activity, item int64, qty int) {
	s.placeAdmitted(kind, r, user, key, activity, item, qty, "")
}

// placeAdmitted is place with an admission to sale G ("" for none).
func (s *soak) placeAdmitted(kind string, r *rand.Rand, user, key string, activity, item int64, qty int, admission string) {
	name, a := s.api(r)
	sent := time.Now()
	p, err := a.PlaceOrderAdmitted(user, key, activity, item, qty, admission)
	s.log.addOrder(orderAnswer{kind: kind, api: name, user: user, key: key, activity: activity, item: item, qty: qty, sent: sent, got: time.Now(),
		code: p.Code, orderNo: p.OrderNo, status: p.Status, errc: p.Error, neterr: err != nil, admission: admission})
}

// notify sends the provider's notification for an order some buyer was
// given: a new transaction, the same one again (a duplicate; maybe late),
// or one whose id differs from an earlier one only in case (another
// transaction, byte for byte).
func (s *soak) notify(w, i int, r *rand.Rand) {
	var n noteAnswer
	switch k := r.IntN(10); {
	case k < 3:
		old, ok := s.log.randomTx(r)
		if !ok {
			return
		}
		n = noteAnswer{tx: old.tx, orderNo: old.orderNo, amount: old.amount, resent: true, caseVariantOf: old.caseVariantOf}
	default:
		acc := s.log.randomAccepted(r)
		if acc == nil {
			return
		}
		n = noteAnswer{tx: fmt.Sprintf("tx%d-%d-%d", s.seed, w, i), orderNo: acc.orderNo, amount: int64(acc.qty) * soakPrice}
		if k == 9 {
			if old, ok := s.log.randomTx(r); ok && old.orderNo != acc.orderNo && strings.ToUpper(old.tx) != old.tx {
				n.tx, n.caseVariantOf = strings.ToUpper(old.tx), true
			}
		}
	}
	amount := n.amount
	body, err := json.Marshal(payment.Notification{TransactionID: n.tx, OrderNo: n.orderNo, Amount: &amount, Currency: soakCurrency})
	if err != nil {
		panic(err)
	}
	_, a := s.api(r)
	req, err := http.NewRequest("POST", a.URL+"/payments/v1/notifications", bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set(payment.Header, payment.Sign([]byte(pipelinetest.PaymentSecret), body, time.Now()))
	n.sent = time.Now()
	resp, err := soakHTTP.Do(req)
	if err != nil {
		n.neterr = true
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		n.code = resp.StatusCode
		var out struct {
			Outcome     string `json:"outcome"`
			OrderStatus string `json:"order_status"`
			Duplicate   bool   `json:"duplicate"`
			Error       struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &out)
		n.outcome, n.orderStatus, n.duplicate, n.errc = out.Outcome, out.OrderStatus, out.Duplicate, out.Error.Code
	}
	s.log.mu.Lock()
	s.log.notes = append(s.log.notes, n)
	if !n.resent {
		s.log.txs = append(s.log.txs, n)
	}
	s.log.mu.Unlock()
}

// restock adds units to a sale's item with a new key, or sends an earlier
// restock again with its key (an operator's retry).
func (s *soak) restock(w, i int, r *rand.Rand) {
	var ra restockAnswer
	s.log.mu.Lock()
	if len(s.log.restocks) > 0 && r.IntN(3) == 0 {
		old := s.log.restocks[r.IntN(len(s.log.restocks))]
		ra = restockAnswer{item: old.item, key: old.key, qty: old.qty}
	}
	s.log.mu.Unlock()
	if ra.key == "" {
		sl := s.openSale(r)
		its := sl.items()
		ra = restockAnswer{item: its[r.IntN(len(its))].ID, key: fmt.Sprintf("r%d-%d-%d", s.seed, w, i), qty: int64(5 + r.IntN(16))}
		if sl == s.sales[7] && time.Now().Before(sl.entriesClose) {
			// One unit: sale H's draw keeps fewer units than entrants
			// however long the run, so it has alternates.
			ra.qty = 1
		}
	}
	_, a := s.api(r)
	var out struct {
		RestockID int64 `json:"restock_id"`
	}
	code, err := a.Do("POST", fmt.Sprintf("/admin/v1/items/%d/restock", ra.item), 1, auth.RoleAdmin,
		map[string]string{"Idempotency-Key": ra.key}, map[string]any{"quantity": ra.qty}, &out)
	ra.code, ra.restockID, ra.neterr = code, out.RestockID, err != nil
	s.log.mu.Lock()
	s.log.restocks = append(s.log.restocks, ra)
	s.log.mu.Unlock()
}

// operator changes and opens sale E at 25 % of the run, ends C at 45 %
// and cancels D at 65 %, each retried (a fault may be on) for up to 20 s.
func (s *soak) operator(begin time.Time, d time.Duration) {
	at := func(frac float64) { time.Sleep(time.Until(begin.Add(time.Duration(frac * float64(d))))) } // the plan's times
	retry := func(what string, try func() (int, string, error), done func(int, string) bool) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, errc, err := try()
			s.log.adminf("%s: %d %s %s", what, code, errc, errText(err))
			if err == nil && done(code, errc) {
				return
			}
			if time.Now().After(deadline) {
				s.log.adminf("%s: gave up after 20 s", what)
				return
			}
			time.Sleep(500 * time.Millisecond) // an operator's retry, paced
		}
	}
	var errBody struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	do := func(method, path string, body any) (int, string, error) {
		errBody.Error.Code = ""
		code, err := s.apis[0].API().Do(method, path, 1, auth.RoleAdmin, nil, body, &errBody)
		if err != nil {
			code, err = s.apis[1].API().Do(method, path, 1, auth.RoleAdmin, nil, body, &errBody)
		}
		return code, errBody.Error.Code, err
	}

	at(0.25)
	e := s.sales[4]
	now := time.Now().UTC().Truncate(time.Second)
	// A refused change writes nothing: an end before the start.
	retry("patch of sale E (ends before it starts, refused)", func() (int, string, error) {
		return do("PATCH", fmt.Sprintf("/admin/v1/activities/%d", e.ActivityID), map[string]any{"ends_at": now.Add(30 * time.Minute)})
	}, func(code int, _ string) bool { return code/100 == 4 })
	retry("patch of sale E (start now, 2 a buyer)", func() (int, string, error) {
		return do("PATCH", fmt.Sprintf("/admin/v1/activities/%d", e.ActivityID),
			map[string]any{"starts_at": now.Add(-time.Minute), "per_user_limit": 2})
	}, func(code int, errc string) bool { return code == 200 || errc == "ACTIVITY_STARTED" })
	retry("warm-up of sale E", func() (int, string, error) {
		return do("POST", fmt.Sprintf("/admin/v1/activities/%d/warmup", e.ActivityID), nil)
	}, func(code int, _ string) bool { return code == 200 })
	e.mu.Lock()
	e.PerUser, e.open = 2, true
	e.mu.Unlock()

	for _, step := range []struct {
		frac float64
		sale *soakSale
		verb string
	}{{0.45, s.sales[2], "end"}, {0.65, s.sales[3], "cancel"}} {
		at(step.frac)
		sl := step.sale
		retry(step.verb+" of sale "+sl.name, func() (int, string, error) {
			return do("POST", fmt.Sprintf("/admin/v1/activities/%d/%s", sl.ActivityID, step.verb), nil)
		}, func(code int, errc string) bool {
			if code != 200 {
				return errc == "ACTIVITY_NOT_ACTIVE"
			}
			sl.mu.Lock()
			defer sl.mu.Unlock()
			if step.verb == "end" {
				sl.endedAt = time.Now()
			} else {
				sl.cancelledAt = time.Now()
			}
			sl.open = false
			return true
		})
	}
}
