//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/order"
)

// tally is what the suite prints at the end.
var tally struct {
	faults, survived  atomic.Int64
	hostile           atomic.Int64
	lostReplies       atomic.Int64
	lost, oversold    atomic.Int64
	duplicates, drift atomic.Int64
}

// scenario is one fault test's line in the tally.
type scenario struct {
	name        string
	done        bool // its cleanup ran
	failed      bool
	lostReplies int64
}

// scenarios are the fault tests that ran, in the order they started.
var scenarios struct {
	sync.Mutex
	list []*scenario
}

func TestMain(m *testing.M) {
	code := pipelinetest.Main(m)
	scenarios.Lock()
	for _, s := range scenarios.list {
		result := "ok"
		if s.failed || !s.done {
			result = "FAILED"
		}
		fmt.Printf("chaos: scenario %s %s (lost replies %d)\n", s.name, result, s.lostReplies)
	}
	scenarios.Unlock()
	fmt.Printf("chaos: faults survived %d/%d, hostile inputs tried %d, lost replies injected %d, orders lost %d, oversold %d, duplicates %d, drift after recovery %d\n",
		tally.survived.Load(), tally.faults.Load(), tally.hostile.Load(), tally.lostReplies.Load(), tally.lost.Load(),
		tally.oversold.Load(), tally.duplicates.Load(), tally.drift.Load())
	os.Exit(code)
}

// fault registers a fault scenario in the tally, under t's name, with its
// result when it ends.
func fault(t *testing.T) {
	tally.faults.Add(1)
	s := &scenario{name: t.Name()}
	scenarios.Lock()
	scenarios.list = append(scenarios.list, s)
	scenarios.Unlock()
	t.Cleanup(func() {
		scenarios.Lock()
		defer scenarios.Unlock()
		s.done, s.failed = true, t.Failed()
		if !s.failed {
			tally.survived.Add(1)
		}
	})
}

// lostReplies adds n to the replies the suite's faults lost on the wire
// (the request ran, its answer never came back).
func lostReplies(n int64) { tally.lostReplies.Add(n) }

// lostRepliesIn is lostReplies that also counts the n replies for t's
// scenario (t or a subtest of a test that called fault).
func lostRepliesIn(t *testing.T, n int64) {
	lostReplies(n)
	name, _, _ := strings.Cut(t.Name(), "/")
	scenarios.Lock()
	defer scenarios.Unlock()
	for i := len(scenarios.list) - 1; i >= 0; i-- {
		if s := scenarios.list[i]; s.name == name {
			s.lostReplies += n
			return
		}
	}
}

// load is a flash sale running in the background: users place one order
// each, spread over the given duration, concurrency at a time. In a sale
// of several items each user buys its own size (sizeOf), and some click on
// a second size at the same moment (doubleClicks).
type load struct {
	mu       sync.Mutex
	accepted map[string]int64 // order_no -> user
	byUser   map[int64]int    // user -> status code (202 if a click got it, else 503 if one did, else the last)
	codes    map[string]int
	attempts int // order requests sent
	neterrs  int
	done     chan struct{}
}

func startLoad(api *pipelinetest.API, sale pipelinetest.Sale, users []int64, over time.Duration, concurrency int) *load {
	l := &load{accepted: map[string]int64{}, byUser: map[int64]int{}, codes: map[string]int{}, done: make(chan struct{})}
	gap := over / time.Duration(len(users))
	go func() {
		defer close(l.done)
		var wg sync.WaitGroup
		sem := make(chan struct{}, concurrency)
		click := func(u int64, key string, item int64) {
			defer wg.Done()
			p, err := api.PlaceOrderItem(u, key, sale.ActivityID, item, 1)
			l.mu.Lock()
			defer l.mu.Unlock()
			l.attempts++
			if err != nil {
				l.neterrs++
				return
			}
			if c, seen := l.byUser[u]; !seen || c != 202 && (c != 503 || p.Code == 202) {
				l.byUser[u] = p.Code
			}
			if p.Code == 202 {
				l.accepted[p.OrderNo] = u
			} else {
				l.codes[fmt.Sprintf("%d %s", p.Code, p.Error)]++
			}
		}
		for _, u := range users {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem }()
				if doubleClicks(sale, u) {
					wg.Add(1)
					go click(u, secondKey(u), otherSize(sale, u))
				}
				click(u, firstKey(u), sizeOf(sale, u))
			}()
			time.Sleep(gap)
		}
		wg.Wait()
	}()
	return l
}

// sizeShares are the relative stocks of the sizes of the suite's sale in
// sizes: eight, uneven, two of them scarce.
var sizeShares = []int64{1, 3, 2, 5, 1, 4, 2, 6}

// newSale creates a scenario's sale of stock units: one item, or (sized)
// a sale of eight sizes sharing the units unevenly (sizeShares).
func newSale(api *pipelinetest.API, stock int64, sized bool) pipelinetest.Sale {
	if !sized {
		return api.CreateSale(stock, 1)
	}
	var sum int64
	for _, w := range sizeShares {
		sum += w
	}
	sizes := make([]int64, len(sizeShares))
	left := stock
	for i, w := range sizeShares[:len(sizeShares)-1] {
		sizes[i] = stock * w / sum
		left -= sizes[i]
	}
	sizes[len(sizes)-1] = left
	return api.CreateSizedSale(sizes, 1)
}

// sizeOf is the item user u buys in sale: 0 (the request names none) in a
// sale of one item; else the size that holds u's slot, slots being the
// sale's units in a row and u's slot u*7919 mod the sale's stock, so that
// any run of as many users as the sale has units wants each size as often
// as it has units.
func sizeOf(sale pipelinetest.Sale, u int64) int64 {
	if !sale.Sized() {
		return 0
	}
	slot := (u * 7919) % sale.Stock
	for _, it := range sale.Items {
		if slot < it.Stock {
			return it.ID
		}
		slot -= it.Stock
	}
	return sale.Items[len(sale.Items)-1].ID
}

// otherSize is the size of u's second click: the one after sizeOf's.
func otherSize(sale pipelinetest.Sale, u int64) int64 { return nextSize(sale, sizeOf(sale, u)) }

// nextSize is the size after item in sale (the first after the last).
func nextSize(sale pipelinetest.Sale, item int64) int64 {
	for i, it := range sale.Items {
		if it.ID == item {
			return sale.Items[(i+1)%len(sale.Items)].ID
		}
	}
	return item
}

// doubleClicks says whether u also clicks on a second size, with another
// Idempotency-Key, at the same moment: every fourth buyer of a sale in
// sizes. At most one of the two may hold an order.
func doubleClicks(sale pipelinetest.Sale, u int64) bool { return sale.Sized() && u%4 == 0 }

func firstKey(u int64) string  { return fmt.Sprintf("k%d", u) }
func secondKey(u int64) string { return fmt.Sprintf("k%d-2", u) }

// buy places u's order of its size in sale with key.
func buy(api *pipelinetest.API, sale pipelinetest.Sale, u int64, key string) (pipelinetest.Placed, error) {
	return api.PlaceOrderItem(u, key, sale.ActivityID, sizeOf(sale, u), 1)
}

// buyAgain places order o again: its buyer, item and key.
func buyAgain(api *pipelinetest.API, sale pipelinetest.Sale, o order.Order) (pipelinetest.Placed, error) {
	item := o.ItemID
	if !sale.Sized() {
		item = 0
	}
	return api.PlaceOrderOf(o.UserID, o.IdempotencyKey, sale.ActivityID, item, o.Quantity)
}

// itemIDs is the reconciler's --item argument for every item of sale.
func itemIDs(sale pipelinetest.Sale) string {
	ids := make([]string, 0, len(sale.All()))
	for _, it := range sale.All() {
		ids = append(ids, fmt.Sprint(it.ID))
	}
	return strings.Join(ids, ",")
}

func (l *load) wait() *load { <-l.done; return l }

// answered counts the users answered code so far, while the load runs.
func (l *load) answered(code int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.byUser {
		if c == code {
			n++
		}
	}
	return n
}

func users(from, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

// refusedHoldNothing fails the test if a user the load saw answered 503
// holds a live order: 503 promises that nothing stays reserved. It returns
// how many users were answered 503.
func refusedHoldNothing(t *testing.T, p *pipelinetest.Pipeline, sale pipelinetest.Sale, l *load) int {
	t.Helper()
	refused := 0
	for u, code := range l.byUser {
		if code != 503 {
			continue
		}
		refused++
		var n int64
		if err := p.DB.Gorm().Raw("SELECT COUNT(*) FROM orders WHERE user_id = ? AND activity_id = ? AND status IN ('CREATED','PAID')",
			u, sale.ActivityID).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("user %d was told 503 but holds a live order", u)
		}
	}
	return refused
}

// settle waits until every accepted order is final in MySQL and nothing is
// in flight, then checks the invariants and adds what it found to the
// tally.
func settle(t *testing.T, p *pipelinetest.Pipeline, sale pipelinetest.Sale, accepted map[string]int64, within time.Duration) pipelinetest.Invariants {
	t.Helper()
	nos := make([]string, 0, len(accepted))
	for no := range accepted {
		nos = append(nos, no)
	}
	var final map[string]order.Order
	defer func() {
		if len(final) < len(nos) {
			tally.lost.Add(int64(len(nos) - len(final)))
			t.Logf("%d of %d accepted orders not final %v after recovery", len(nos)-len(final), len(nos), within)
		}
	}()
	waittest.UntilEvery(t, within, 100*time.Millisecond, "every accepted order final after recovery", func() bool {
		got, err := p.DB.Orders.Orders(context.Background(), nos)
		if err == nil {
			final = got
		}
		return err == nil && len(final) == len(nos)
	})
	p.WaitSaleDrained(sale, within)
	// Drained includes the consumers' repair after a Redis loss, whose
	// last pass runs 35 s after it (units listed as moving at the loss
	// are put back then: docs/reconciler.md): Redis is given until then
	// to equal MySQL, by the pipeline's own passes; CheckItems says what
	// differs if it does not.
	equal := func() bool {
		for _, it := range sale.All() {
			var db int64
			if err := p.DB.Gorm().Raw("SELECT stock FROM item_stock WHERE item_id = ?", it.ID).Scan(&db).Error; err != nil {
				return false
			}
			snap, err := p.Store.Stock.Stock(context.Background(), sale.Item(it.ID))
			if err != nil || snap.Stock != db || snap.Inflight != 0 {
				return false
			}
		}
		return true
	}
	for end := time.Now().Add(within); !equal() && time.Now().Before(end); {
		time.Sleep(250 * time.Millisecond)
	}
	// Per item (each size of a sale in sizes): nothing oversold, Redis
	// stock = MySQL stock; nobody with two live orders across them.
	items := p.CheckItems(sale)
	// The reconciler agrees on every item: exit 0, no drift.
	if r := p.Reconcile("--item", itemIDs(sale)); r.Code != 0 {
		tally.drift.Add(1)
		t.Fatalf("reconciler exit %d after recovery:\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for i, it := range sale.All() {
		inv := items[i]
		if over := inv.LiveUnits + inv.DBStock - it.Stock; over > 0 {
			tally.oversold.Add(over)
		}
		if d := inv.RedisStock - inv.DBStock; d != 0 {
			tally.drift.Add(max(d, -d))
		}
	}
	inv := pipelinetest.Total(items)
	tally.duplicates.Add(inv.UsersWithTwoLive)
	return inv
}

// offsets sums topic's end offsets and group's committed offsets.
func offsets(t *testing.T, topic, group string) (end, committed int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, c, err := kafkatest.Offsets(ctx, topic, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := range e {
		end, committed = end+e[p], committed+c[p]
	}
	return end, committed
}

// topicSize counts the messages of topic (nothing is deleted in a test's
// lifetime).
func topicSize(t *testing.T, topic string) int64 {
	t.Helper()
	end, _ := offsets(t, topic, "")
	return end
}

// committedOffsets sums the offsets group has committed on topic.
func committedOffsets(t *testing.T, topic, group string) int64 {
	t.Helper()
	_, committed := offsets(t, topic, group)
	return committed
}
