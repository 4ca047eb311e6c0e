//go:build chaos

package chaos

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/draw"
)

// N9. A draw sale while the drawer's Redis loses the answers of its
// reserves: three while the winners' orders are made, three while the
// units winners leave (cancelled, closed unpaid) go to alternates. The
// reserve ran each time; the next pass finds it by the entry's key and
// publishes the same order. Each size's winners fill its stock, each pick
// has one order and each order one pick, freed units go to the next
// alternates in rank order, nothing is oversold; Redis ends equal to MySQL,
// the reconciler is clean and the published record verifies.
func TestChaosNetRedisDrawRepliesLost(t *testing.T) {
	fault(t)
	drawRepliesLost(t, false)
}

// N9m. The same sale while MySQL and Kafka lose answers: three of the
// api's produces of entries (ADR 7: each of those entries is answered 503,
// and the buyer's retry finds the entry it made and publishes it again),
// the COMMIT of the draw itself (the next pass finds it DRAWN, no second
// ranking), two numberings of picks and two marks that an order was issued
// (the next pass carries on with the number the pick holds), and two of the
// drawer's produces (the event is published again; the consumer takes it
// once); then, for the alternates' orders, one of each of the drawer's.
func TestChaosNetDrawMySQLKafkaRepliesLost(t *testing.T) {
	fault(t)
	drawRepliesLost(t, true)
}

// interpolated is the environment entry of a MySQL DSN (mysqlProxy's) with
// interpolateParams on: the driver sends each statement with its values as
// one COM_QUERY instead of a prepared statement, so the proxy can tell one
// UPDATE from another by its text and lose the answer of the one a
// scenario means (the statement runs either way).
func interpolated(t *testing.T, env string) string {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(strings.TrimPrefix(env, "SECKILL_MYSQL_DSN="))
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	return "SECKILL_MYSQL_DSN=" + cfg.FormatDSN()
}

// drawCommit matches the COMMIT that follows the draw's UPDATE of its
// activity_draws row: the draw's own (the consumer writes nothing else
// while it draws).
func drawCommit() proxytest.Matcher {
	var drawn atomic.Bool
	update, commit := proxytest.MySQLQuery("UPDATE `activity_draws` SET"), proxytest.MySQLQuery("COMMIT")
	return func(r proxytest.Request) bool {
		if update(r) {
			drawn.Store(true)
			return false
		}
		return commit(r) && drawn.Load()
	}
}

// The drawer's statements by their text (GORM's UpdateColumn).
var (
	numberPick = proxytest.MySQLQuery("UPDATE `draw_results` SET `order_no`='")
	markIssued = proxytest.MySQLQuery("UPDATE `draw_results` SET `issued`=")
)

// passFailed fails the test unless pr logged a failed drawer pass, or a
// failed pick (backed off while the pass goes on), whose error names each
// of what.
func passFailed(t *testing.T, pr *pipelinetest.Proc, what ...string) {
	t.Helper()
	var failed []string
	for _, line := range strings.Split(pr.Log(), "\n") {
		// A whole pass's failure, or one pick's, which the pass backs off
		// while it goes on with the others.
		if strings.Contains(line, "drawer pass failed") ||
			strings.Contains(line, "a record failed in a periodic pass") && strings.Contains(line, `"pass":"draw"`) {
			failed = append(failed, line)
		}
	}
	for _, w := range what {
		if !slices.ContainsFunc(failed, func(l string) bool { return strings.Contains(l, w) }) {
			t.Errorf("no failed drawer pass or pick names %q (%d failures)", w, len(failed))
		}
	}
}

func drawRepliesLost(t *testing.T, mysqlKafka bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	admin := p.StartAPI()
	redisPx, redisEnv := redisProxy(t, false)
	mysqlPx, dsn := mysqlProxy(t, p)
	kafkaPx, brokers := kafkaProxy(t)
	// The entries' api publishes through the Kafka proxy: until the
	// close, its produces are the only ones (the drawer's come after).
	entries := p.StartAPI(brokers)
	// The proxies count the answers they drop on the drawer's and the
	// orders' traffic: the outbox relay, which talks to MySQL and Kafka
	// through them too, waits (its own faults are the relay's tests').
	consumer := p.StartConsumer(redisEnv, interpolated(t, dsn), brokers, "SECKILL_DRAW_EVERY=200ms", "SECKILL_CLOSER_EVERY=200ms",
		"SECKILL_OUTBOX_RELAY_EVERY=1h")
	logOnFailure(t, consumer, "draw")

	const entrants = 160
	window := 8 * time.Second
	closeIn := 10 * time.Second
	sale := admin.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{6, 10, 8, 12}, EntriesCloseIn: closeIn, PaymentWindow: window})
	closes := time.Now().Add(closeIn)
	sizes := make([]drawSize, len(sale.Items))
	for i, it := range sale.Items {
		sizes[i] = drawSize{Name: it.Label, ID: it.ID, Stock: it.Stock}
	}
	// retry sends until the api answers something other than a 5xx, a 429
	// or no answer, for at most 30 s.
	retry := func(f func() (int, error)) (int, int) {
		deadline := time.Now().Add(30 * time.Second)
		for failed := 0; ; failed++ {
			code, err := f()
			if (err == nil && code < 500 && code != http.StatusTooManyRequests) || time.Now().After(deadline) {
				return code, failed
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The entries, three of the api's produce answers lost.
	if mysqlKafka {
		kafkaPx.LoseReply(proxytest.KafkaRequest(proxytest.KafkaProduce), 3)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ids     = map[int64]string{}
		retried atomic.Int64
	)
	sem := make(chan struct{}, 20)
	for u := int64(1); u <= entrants; u++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			user := strconv.FormatInt(u, 10)
			var e pipelinetest.Entry
			code, failed := retry(func() (int, error) {
				var err error
				var c int
				c, e, err = entries.Enter(user, sale.ActivityID, sizeOf(sale, u))
				return c, err
			})
			if failed > 0 {
				retried.Add(1)
			}
			// A retry after a lost produce answer finds the entry it made.
			if (code != 201 && (code != 200 || failed == 0)) || !draw.ValidEntryID(e.EntryID) || e.State != "ENTERED" {
				t.Errorf("entrant %d: %d %+v (%d tries without an answer)", u, code, e, failed)
				return
			}
			if u%10 == 0 {
				c, again, err := admin.Enter(user, sale.ActivityID, nextSize(sale, sizeOf(sale, u)))
				if err != nil || c != 200 || again.EntryID != e.EntryID || again.ItemID != e.ItemID {
					t.Errorf("entrant %d entering again: %d %+v %v, first %+v", u, c, again, err, e)
				}
			}
			mu.Lock()
			ids[u] = e.EntryID
			mu.Unlock()
		}()
	}
	wg.Wait()
	var entryLost int64 // the entries' produces whose answers were lost
	if mysqlKafka {
		kafkaPx.WaitLost(t, 3, 10*time.Second)
		entryLost = kafkaPx.Lost()
		if retried.Load() == 0 {
			t.Errorf("no entrant was answered without its entry's produce answer")
		}
	}
	if time.Now().After(closes.Add(-time.Second)) {
		t.Fatalf("the entries took past the close: give them more time")
	}
	if t.Failed() {
		t.FailNow()
	}
	// The consumer writes them within its lag, each once however often it
	// was published.
	waittest.Until(t, 30*time.Second, "every entry counted once", func() bool {
		return p.Count("SELECT entries FROM activity_draws WHERE activity_id = ?", sale.ActivityID) == entrants
	})
	if n := p.Count("SELECT COUNT(*) FROM draw_entries WHERE activity_id = ?", sale.ActivityID); n != entrants {
		t.Fatalf("%d entries in MySQL, want %d", n, entrants)
	}

	// The draw and the winners' orders.
	if mysqlKafka {
		mysqlPx.LoseReply(drawCommit(), 1)
		mysqlPx.LoseReply(numberPick, 2)
		mysqlPx.LoseReply(markIssued, 2)
		kafkaPx.LoseReply(proxytest.KafkaRequest(proxytest.KafkaProduce), 2)
	} else {
		redisPx.LoseReply(luaScript("reserve"), 3)
	}
	picksOf := func() []pipelinetest.Pick {
		t.Helper()
		picks, err := p.Picks(sale.ActivityID)
		if err != nil {
			t.Fatal(err)
		}
		return picks
	}
	waittest.Until(t, time.Until(closes)+60*time.Second, "every winner's order CREATED and issued", func() bool {
		n := 0
		for _, pk := range picksOf() {
			if pk.Outcome == draw.Won && pk.Issued && pk.Status == "CREATED" {
				n++
			}
		}
		return n == int(sale.Stock)
	})
	if mysqlKafka {
		mysqlPx.WaitLost(t, 5, 10*time.Second)
		kafkaPx.WaitLost(t, entryLost+2, 10*time.Second)
	} else {
		redisPx.WaitLost(t, 3, 10*time.Second)
	}
	picks := picksOf()
	if len(picks) != entrants {
		t.Fatalf("%d ranked, want the %d entries", len(picks), entrants)
	}
	for _, pk := range picks {
		if pk.Outcome == draw.Alternate && pk.OrderNo != "" {
			t.Fatalf("alternate %s (rank %d) has order %s while every winner holds theirs", pk.EntryID, pk.Rank, pk.OrderNo)
		}
	}

	// Roll-downs, with the drawer's answers lost again: size 1's winners
	// pay; size 2's first four cancel; size 3's never pay (closed after the
	// window); size 4's first three cancel and the next three never pay.
	// Every alternate given a unit pays.
	if mysqlKafka {
		mysqlPx.LoseReply(numberPick, 1)
		mysqlPx.LoseReply(markIssued, 1)
		kafkaPx.LoseReply(proxytest.KafkaRequest(proxytest.KafkaProduce), 1)
	} else {
		redisPx.LoseReply(luaScript("reserve"), 3)
	}
	act := func(pk pipelinetest.Pick, verb string) {
		t.Helper()
		u, _ := strconv.ParseInt(pk.UserID, 10, 64)
		code, _ := retry(func() (int, error) {
			return admin.Do("POST", "/api/v1/orders/"+pk.OrderNo+"/"+verb, u, "", nil, nil, nil)
		})
		if code != 200 {
			t.Errorf("%s %s as %s: %d", verb, pk.OrderNo, pk.UserID, code)
		}
	}
	left := map[int64]int{} // size -> winners that leave their unit
	seen := map[int64]int{}
	for _, pk := range picks {
		if pk.Outcome != draw.Won {
			continue
		}
		i := seen[pk.ItemID]
		seen[pk.ItemID]++
		switch pk.ItemID {
		case sale.Items[0].ID:
			act(pk, "pay")
		case sale.Items[1].ID:
			if i < 4 {
				act(pk, "cancel")
				left[pk.ItemID]++
			} else {
				act(pk, "pay")
			}
		case sale.Items[2].ID:
			left[pk.ItemID]++
		case sale.Items[3].ID:
			switch {
			case i < 3:
				act(pk, "cancel")
				left[pk.ItemID]++
			case i < 6:
				left[pk.ItemID]++
			default:
				act(pk, "pay")
			}
		}
	}
	paid := map[string]bool{}
	waittest.UntilEvery(t, window+60*time.Second, 200*time.Millisecond, "every size's stock PAID, the units left given to alternates", func() bool {
		done := map[int64]int64{}
		for _, pk := range picksOf() {
			switch {
			case pk.Status == "PAID":
				done[pk.ItemID]++
			case pk.Outcome == draw.Alternate && pk.Status == "CREATED" && !paid[pk.OrderNo]:
				act(pk, "pay")
				paid[pk.OrderNo] = true
			}
		}
		for _, it := range sale.Items {
			if done[it.ID] != it.Stock {
				return false
			}
		}
		return true
	})
	if mysqlKafka {
		mysqlPx.WaitLost(t, 7, 10*time.Second)
		kafkaPx.WaitLost(t, entryLost+3, 10*time.Second)
	} else {
		redisPx.WaitLost(t, 6, 10*time.Second)
	}

	// The drawer heard of each loss as an error of its pass or of the pick
	// (backed off alone), and carried on from what MySQL and Redis held: the draw ran once. (A produce
	// whose answer was lost the Kafka client sends again itself: the event
	// is in the topic twice, and the consumer takes it once.)
	want := []string{"reserve the order of entry"}
	if mysqlKafka {
		want = []string{fmt.Sprintf("draw activity %d", sale.ActivityID), "number pick", "mark pick issued"}
	}
	passFailed(t, consumer, want...)
	if strings.Contains(consumer.Log(), `"msg":"draw run"`) == mysqlKafka {
		t.Errorf("the consumer logged the draw run %v, want %v (its COMMIT's answer lost: %v)",
			!mysqlKafka, mysqlKafka, mysqlKafka)
	}

	// Final values.
	accepted := map[string]int64{}
	promoted := map[int64]int{}
	for _, pk := range picksOf() {
		if pk.OrderNo == "" {
			continue
		}
		u, _ := strconv.ParseInt(pk.UserID, 10, 64)
		accepted[pk.OrderNo] = u
		if pk.Outcome == draw.Alternate {
			promoted[pk.ItemID]++
		}
	}
	inv := settle(t, p, sale, accepted, 60*time.Second)
	if events := topicSize(t, p.Topic); events < int64(len(accepted))+kafkaPx.Lost()-entryLost {
		t.Errorf("%d events in the topic for %d orders and %d produce answers lost", events, len(accepted), kafkaPx.Lost()-entryLost)
	}
	summary, breaches := drawBreaches(p, admin, sale.ActivityID, sizes)
	for _, b := range breaches {
		t.Error(b)
	}
	for _, it := range sale.Items {
		if promoted[it.ID] != left[it.ID] {
			t.Errorf("%s: %d alternates given orders, want the %d units its winners left", it.Label, promoted[it.ID], left[it.ID])
		}
	}
	if inv.LiveUnits != sale.Stock {
		t.Errorf("%d live units, want the %d units sold once each", inv.LiveUnits, sale.Stock)
	}
	t.Logf("%s; %d entrants retried after no answer; answers lost: api Kafka %d, drawer Redis %d, MySQL %d, Kafka %d",
		summary, retried.Load(), entryLost, redisPx.Lost(), mysqlPx.Lost(), kafkaPx.Lost()-entryLost)
}
