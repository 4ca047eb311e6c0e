//go:build soak

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
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
// first join was answered, and B was placed by arrival (the room had
// frozen its early joiners before B's first join was sent: an answer with
// a position had come), then once B was told ADMITTED or ORDERED, A is
// never again told WAITING, unless the room was rebuilt in
// between: a rebuild gives again, in order, the turns of every buyer
// before the first without an order (A's admission may have expired
// unused before B's turn; ADR 5). Early joiners are ordered by the room's
// draw, not by arrival, and are not compared with each other. rebuilds
// are when a rebuild of the room finished (the programs' logs say), losses
// when Redis lost data (a rebuild follows within 10 s). B's first join is
// the first sent, whatever its answer: a join answered 503 or never
// answered may have placed B all the same (its record in MySQL committed
// and the answer was lost), and a retry answers that place.
func roomOrderBreaches(answers []queueAnswer, rebuilds, losses []time.Time) (pairs int, br []string) {
	type first struct {
		sent     time.Time // the first join sent, whatever its answer
		got      time.Time // when the first join answered 200 came back
		answered bool
	}
	firsts := map[string]first{}
	turn := map[string][]time.Time{} // user -> when they were told ADMITTED or ORDERED
	var frozen time.Time             // the first answer with a position came back
	for _, q := range answers {
		if !q.poll {
			f, ok := firsts[q.user]
			if !ok || q.sent.Before(f.sent) {
				f.sent = q.sent
			}
			if q.code == 200 && (!f.answered || q.got.Before(f.got)) {
				f.got, f.answered = q.got, true
			}
			firsts[q.user] = f
		}
		if q.code != 200 {
			continue
		}
		if q.position > 0 && (frozen.IsZero() || q.got.Before(frozen)) {
			frozen = q.got
		}
		if q.state == "ADMITTED" || q.state == "ORDERED" {
			turn[q.user] = append(turn[q.user], q.got)
		}
	}
	late := func(f first) bool { return !frozen.IsZero() && f.sent.After(frozen) }
	in := func(ts []time.Time, from, to time.Time) bool {
		i := sort.Search(len(ts), func(i int) bool { return !ts[i].Before(from) })
		return i < len(ts) && ts[i].Before(to)
	}
	sort.Slice(rebuilds, func(i, j int) bool { return rebuilds[i].Before(rebuilds[j]) })
	told := map[string]bool{} // a buyer already reported
	for _, q := range answers {
		if q.code != 200 || q.state != "WAITING" || told[q.user] {
			continue
		}
		a, ok := firsts[q.user]
		if !ok || !a.answered {
			continue
		}
		for b, fb := range firsts {
			if b == q.user || !late(fb) || !fb.sent.After(a.got) {
				continue
			}
			pairs++
			for _, t := range turn[b] {
				// An instance answers from a room state up to a second
				// old (and its read takes a moment): a WAITING sent within
				// 2 s after B's turn may be that, and B's turn told within
				// 2 s after a rebuild may be from the room before it.
				if t.Add(2*time.Second).Before(q.sent) && !in(rebuilds, t.Add(-2*time.Second), q.got) &&
					!in(losses, t.Add(-12*time.Second), q.got) {
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

// roomRebuilds are when the programs' logs say a rebuild of a waiting room
// finished.
func (s *soak) roomRebuilds() []time.Time {
	var out []time.Time
	all := make([]*program, 0, len(s.programs))
	for _, pr := range s.programs {
		all = append(all, pr)
	}
	logLines(all, `"msg":"waiting room: rebuilt from MySQL"`, func(line string) {
		var l struct {
			Time time.Time `json:"time"`
		}
		if json.Unmarshal([]byte(line), &l) == nil {
			out = append(out, l.Time)
		}
	})
	return out
}

// roomOrderBreaches finds an earlier joiner told WAITING after a later
// one's turn, and excuses it when a rebuild or a Redis loss came between,
// or when the WAITING came within 2 s of the turn.
func TestSoakRoomOrderBreaches(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ans := func(user string, sent float64, state string, pos int64, poll bool) queueAnswer {
		return queueAnswer{user: user, code: 200, state: state, position: pos, poll: poll, sent: at(sent), got: at(sent + 0.01)}
	}
	answers := []queueAnswer{
		ans("a", 0, "WAITING", 1, false),   // a joins first
		ans("b", 1, "WAITING", 2, false),   // b after a answered
		ans("b", 10, "ADMITTED", 2, false), // b's turn
		ans("a", 11, "WAITING", 1, true),   // within 2 s: a state a second old
		ans("a", 20, "WAITING", 1, true),   // a breach
	}
	if _, br := roomOrderBreaches(answers, nil, nil); len(br) != 1 {
		t.Fatalf("breaches %q, want one: a told WAITING 10 s after b's turn", br)
	}
	if _, br := roomOrderBreaches(answers, []time.Time{at(15)}, nil); len(br) != 0 {
		t.Fatalf("a rebuild between: breaches %q, want none", br)
	}
	if _, br := roomOrderBreaches(answers, nil, []time.Time{at(5)}); len(br) != 0 {
		t.Fatalf("a Redis loss 5 s before b's turn: breaches %q, want none", br)
	}
	if _, br := roomOrderBreaches(answers, []time.Time{at(25)}, []time.Time{at(-30)}); len(br) != 1 {
		t.Fatalf("a rebuild after and a loss long before: breaches %q, want one", br)
	}
	early := slices.Clone(answers)
	early[0].position, early[1].position = 0, 0 // both joined before the start: placed by the draw, not compared
	if _, br := roomOrderBreaches(early, nil, nil); len(br) != 0 {
		t.Fatalf("b an early joiner: breaches %q, want none", br)
	}
	// b's first join, sent before a's was answered, came back 503 (or not
	// at all): its record may have committed with the answer lost, so b
	// may have arrived first. Seed 1's 30-minute replicated run, 2026-12-05.
	for _, lost := range []queueAnswer{
		{user: "b", code: 503, poll: false, sent: at(-0.5), got: at(0.2)},
		{user: "b", neterr: true, poll: false, sent: at(-0.5), got: at(2)},
	} {
		tried := append([]queueAnswer{answers[0], lost}, answers[1:]...)
		if _, br := roomOrderBreaches(tried, nil, nil); len(br) != 0 {
			t.Fatalf("b's unanswered first join (%d) came before a's answer: breaches %q, want none", lost.code, br)
		}
	}
	// A 503 after the first join changes nothing: b still joined after a.
	again := append(slices.Clone(answers), queueAnswer{user: "b", code: 503, poll: false, sent: at(30), got: at(30.1)})
	if _, br := roomOrderBreaches(again, nil, nil); len(br) != 1 {
		t.Fatalf("b's later 503: breaches %q, want one", br)
	}
}
