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
	code := m.Run()
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
// each, spread over the given duration, concurrency at a time.
type load struct {
	mu       sync.Mutex
	accepted map[string]int64 // order_no -> user
	byUser   map[int64]int    // user -> last status code
	codes    map[string]int
	neterrs  int
	done     chan struct{}
}

func startLoad(api *pipelinetest.API, activity int64, users []int64, over time.Duration, concurrency int) *load {
	l := &load{accepted: map[string]int64{}, byUser: map[int64]int{}, codes: map[string]int{}, done: make(chan struct{})}
	gap := over / time.Duration(len(users))
	go func() {
		defer close(l.done)
		var wg sync.WaitGroup
		sem := make(chan struct{}, concurrency)
		for _, u := range users {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				p, err := api.PlaceOrder(u, fmt.Sprintf("k%d", u), activity, 1)
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					l.neterrs++
					return
				}
				l.byUser[u] = p.Code
				if p.Code == 202 {
					l.accepted[p.OrderNo] = u
				} else {
					l.codes[fmt.Sprintf("%d %s", p.Code, p.Error)]++
				}
			}()
			time.Sleep(gap)
		}
		wg.Wait()
	}()
	return l
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
		got, err := p.DB.Orders(context.Background(), nos)
		if err == nil {
			final = got
		}
		return err == nil && len(final) == len(nos)
	})
	p.WaitDrained(sale.ItemID, within)
	inv := p.Check(sale)
	// The reconciler agrees: exit 0, no drift.
	if r := p.Reconcile("--item", fmt.Sprint(sale.ItemID)); r.Code != 0 {
		tally.drift.Add(1)
		t.Fatalf("reconciler exit %d after recovery:\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if over := inv.LiveUnits + inv.DBStock - sale.Stock; over > 0 {
		tally.oversold.Add(over)
	}
	tally.duplicates.Add(inv.UsersWithTwoLive)
	if d := inv.RedisStock - inv.DBStock; d != 0 {
		tally.drift.Add(max(d, -d))
	}
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
