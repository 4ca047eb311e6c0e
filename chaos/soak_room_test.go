//go:build soak

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
)

// The soak's checks of sale G's waiting room and of what sale H's draw
// gives its alternates, beyond what each order must hold.

// roomDone are the states in which a buyer's turn in the room is over, or
// the room has nothing for them: they hold an order, their admission
// expired unused, no unit is left, or the sale ended.
var roomDone = map[string]bool{"ORDERED": true, "EXPIRED": true, "SOLD_OUT": true, "ENDED": true}

// settleRoom follows every buyer who was told a place in sale G's queue
// until the room has served them all, as their waiting page would: it
// polls each, orders for one told ADMITTED (with that admission, the same
// key on every poll while still ADMITTED) and pays that order, so the
// units come to rest. It ends when one round finds every buyer's turn
// over (roomDone), 2 minutes at most, and returns each buyer the room left
// waiting, with their last answer. It runs before the drain, which then
// waits for its orders too.
func (s *soak) settleRoom() (rounds int, last map[string]string, breaches []string) {
	g := s.sales[6]
	s.log.mu.Lock()
	seen := map[string]bool{}
	var joiners []string
	for _, q := range s.log.queue {
		if q.code == 200 && !seen[q.user] {
			seen[q.user] = true
			joiners = append(joiners, q.user)
		}
	}
	s.log.mu.Unlock()
	sort.Strings(joiners)
	r := rand.New(rand.NewPCG(s.seed, 97))
	paid := map[string]bool{}
	last = map[string]string{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rounds++
		s.supervise()
		done := true
		for _, u := range joiners {
			_, a := s.api(r)
			code, q := s.queue(a, u, false)
			if code != 200 {
				last[u] = fmt.Sprintf("answer %d", code)
				done = false
				continue
			}
			last[u] = q.State
			if q.State == "WAITING" {
				last[u] = fmt.Sprintf("WAITING at position %v, %d ahead", deref(q.Position), q.Ahead)
			}
			switch {
			case q.State == "ADMITTED":
				done = false
				s.placeAdmitted("final-queue", r, u, fmt.Sprintf("fq%d-%s", s.seed, u), g.ActivityID, g.pickItem(r), 1, q.Admission)
			case q.State == "ORDERED" && !paid[u] && q.OrderNo != "":
				// Paid, so its unit does not come back to admit someone
				// while the round reads; a 409 while it is still PENDING
				// is tried again next round.
				if _, st := s.act(a, "pay", q.OrderNo, u); st == "PAID" {
					paid[u] = true
				}
			case !roomDone[q.State]:
				done = false
			}
		}
		if done {
			return rounds, last, nil
		}
		if time.Now().After(deadline) {
			for _, u := range joiners {
				if !roomDone[last[u]] {
					breaches = append(breaches, fmt.Sprintf("buyer %s still %s 2 minutes after the faults ended", u, last[u]))
				}
			}
			return rounds, last, breaches
		}
		time.Sleep(time.Second)
	}
}

func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}

// roomOrderBreaches checks that nobody who joined sale G's queue after
// another went ahead of them: when buyer B's first join was sent after A's
// first join was answered, and B was placed by arrival (their first answer
// had a position: the room had started), then once B was told ADMITTED or
// ORDERED, A is never again told WAITING, unless Redis lost data in
// between (a rebuilt room may give the turns of admissions it lost again,
// in order). Early joiners are ordered by the room's draw, not by arrival,
// and are not compared with each other. losses are when Redis lost data.
func roomOrderBreaches(answers []queueAnswer, losses []time.Time) (pairs int, br []string) {
	type first struct {
		sent, got time.Time
		late      bool
	}
	firsts := map[string]first{}
	turn := map[string][]time.Time{} // user -> when they were told ADMITTED or ORDERED
	for _, q := range answers {
		if q.code != 200 {
			continue
		}
		if _, ok := firsts[q.user]; !ok && !q.poll {
			firsts[q.user] = first{sent: q.sent, got: q.got, late: q.position > 0}
		}
		if q.state == "ADMITTED" || q.state == "ORDERED" {
			turn[q.user] = append(turn[q.user], q.got)
		}
	}
	lossIn := func(from, to time.Time) bool {
		i := sort.Search(len(losses), func(i int) bool { return !losses[i].Before(from) })
		return i < len(losses) && losses[i].Before(to)
	}
	told := map[string]bool{} // a buyer already reported
	for _, q := range answers {
		if q.code != 200 || q.state != "WAITING" || told[q.user] {
			continue
		}
		a, ok := firsts[q.user]
		if !ok {
			continue
		}
		for b, fb := range firsts {
			if b == q.user || !fb.late || !fb.sent.After(a.got) {
				continue
			}
			pairs++
			for _, t := range turn[b] {
				// An instance answers from a room state up to a second
				// old (and its read takes a moment): a WAITING sent within
				// 2 s after B's turn may be that, and B's turn told within
				// 2 s after a loss may be from before it.
				if t.Add(2*time.Second).Before(q.sent) && !lossIn(t.Add(-2*time.Second), q.got) {
					br = append(br, fmt.Sprintf("buyer %s (joined %s) was told WAITING at %s, after buyer %s, who joined after them (%s), was told it was their turn at %s",
						q.user, a.got.Format("15:04:05.000"), q.sent.Format("15:04:05.000"), b, fb.sent.Format("15:04:05.000"), t.Format("15:04:05.000")))
					told[q.user] = true
					break
				}
			}
			if told[q.user] {
				break
			}
		}
	}
	sort.Strings(br)
	return pairs, br
}

// alternateBreaches checks what sale H's alternates were given, once its
// draw settled: no order of a pick (a winner's or an alternate's, the
// current one or a retired attempt) failed for stock, and per size the
// units given to alternates are no more than what came back: the units
// the winners left at the draw, the units of the sale's orders closed or
// failed since, and the restocks after the draw (every restock less those
// the draw's record counted). It returns a line per size.
func (s *soak) alternateBreaches(rec draw.Record) (summary []string, br []string) {
	h := s.sales[7]
	g := s.p.DB.Gorm().WithContext(context.Background())
	var orders []drawOrder
	if err := g.Raw(`SELECT order_no, user_id, status, COALESCE(failure_reason, '') AS failure_reason, idempotency_key, item_id, quantity
		FROM orders WHERE activity_id = ?`, h.ActivityID).Scan(&orders).Error; err != nil {
		return nil, []string{fmt.Sprintf("read sale H's orders: %v", err)}
	}
	for _, o := range orders {
		if _, drawer := order.DrawEntryOf(o.IdempotencyKey); drawer && o.Status == "FAILED" && o.FailureReason == "OUT_OF_STOCK" {
			br = append(br, fmt.Sprintf("order %s (key %s, size %d) failed for stock", o.OrderNo, o.IdempotencyKey, o.ItemID))
		}
	}
	picks, err := s.p.Picks(h.ActivityID)
	if err != nil {
		return nil, append(br, fmt.Sprintf("read the ranking: %v", err))
	}
	atDraw, before := map[int64]int64{}, map[int64]int64{}
	for _, sz := range rec.Sizes {
		atDraw[sz.ItemID] = sz.Stock
	}
	for _, re := range rec.Restocks {
		before[re.ItemID] += re.Quantity
	}
	won, promoted, back := map[int64]int64{}, map[int64]int64{}, map[int64]int64{}
	for _, pk := range picks {
		if pk.OrderNo == "" {
			continue
		}
		q := int64(pk.Quantity)
		if pk.Outcome == draw.Won {
			won[pk.ItemID] += q
		} else {
			promoted[pk.ItemID] += q
		}
		if pk.Status == "CLOSED" || pk.Status == "FAILED" {
			back[pk.ItemID] += q
		}
	}
	for _, it := range h.Items {
		var re int64
		if err := g.Raw("SELECT COALESCE(SUM(quantity), 0) FROM restocks WHERE item_id = ?", it.ID).Scan(&re).Error; err != nil {
			br = append(br, fmt.Sprintf("size %s: read restocks: %v", it.Label, err))
			continue
		}
		free := atDraw[it.ID] - won[it.ID]
		after := re - before[it.ID]
		summary = append(summary, fmt.Sprintf("%s: %d units to alternates of %d left at the draw + %d come back + %d restocked after",
			it.Label, promoted[it.ID], free, back[it.ID], after))
		if promoted[it.ID] > free+back[it.ID]+after {
			br = append(br, fmt.Sprintf("size %s: %d units given to alternates, only %d left at the draw, %d came back and %d were restocked after it",
				it.Label, promoted[it.ID], free, back[it.ID], after))
		}
	}
	return summary, br
}
