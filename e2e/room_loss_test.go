package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
)

// The room survives data loss (issue 41, item 2), driven as buyers' pages
// drive it, on two api instances and a consumer whose heal watch repairs
// stock and the quota and idempotency keys from MySQL. Each loss is made on
// the test's own key prefix only (other tests share the Redis): deleting
// every key under it is the FLUSHALL of a shared Redis, rewinding it is a
// restore from an older copy. The watch's generation marker lives under the
// prefix, so the consumer sees the loss as it would a real one.
//
// The promise, checked after each loss: while the room is repaired a join
// or poll may answer 503 UNAVAILABLE with Retry-After (the buyers retry);
// within 10 s of the loss both instances answer every buyer again, with
// the positions of everyone still in line in the order they joined
// (renumbered or not: the relative order is the promise) and the same on
// both instances (no instance answers from its memory a room Redis no
// longer has), anyone who joined after the loss behind everyone who joined
// before it; at no time is a buyer admitted while one who joined before
// them, holds no order and whose admission did not expire still waits;
// admissions resume, the admitted buyers' orders are CREATED, nothing is
// oversold, nobody holds two orders, and once the units are gone every
// other buyer is told SOLD_OUT, on both instances.

// roomLossUnits is the units of each test's sale: fewer than the buyers
// who join before the loss, so some of them, and everyone after, end
// SOLD_OUT.
const roomLossUnits = 3

// roomLossRecovery is how long after a loss the room may take to answer
// every buyer rightly again.
const roomLossRecovery = 10 * time.Second

// The reproduction: five buyers join before the start of a 3-unit
// sale; 2 s after the start Redis loses everything (every key under the
// test's prefix deleted); a new buyer joins. Before the fix the instances
// kept answering the early joiners' old positions from memory, the new
// buyer got position 1 and was admitted at once, and the early joiners
// were never admitted again.
func TestWaitingRoomSurvivesFlushAfterTheStart(t *testing.T) {
	t.Parallel()
	r := newRoomLossRig(t)
	for u := int64(1); u <= 5; u++ {
		r.join(u)
	}
	r.started()
	r.sweepUntilTime(r.startsAt.Add(2 * time.Second))
	r.lose("every key under the prefix deleted (FLUSHALL)", nil, 0)
	r.join(6)
	r.recovers()
	r.runToTheEnd()
}

// A restore from a copy taken before the start: the copy holds three of
// the five early joiners; the sale starts with all five, then Redis comes
// back from the copy. The two missing early joiners keep their place among
// the early joiners (their rank), ahead of a buyer who joins after the
// restore.
func TestWaitingRoomSurvivesRestoreFromBeforeTheStart(t *testing.T) {
	t.Parallel()
	r := newRoomLossRig(t)
	for u := int64(1); u <= 3; u++ {
		r.join(u)
	}
	copyBefore, gen := r.snapshot()
	for u := int64(4); u <= 5; u++ {
		r.join(u)
	}
	r.started()
	r.sweepUntilTime(r.startsAt.Add(2 * time.Second))
	r.lose("rewound to a copy taken before the start with 3 of the 5 early joiners", copyBefore, gen)
	r.join(6)
	r.recovers()
	r.runToTheEnd()
}

// A restore from a copy taken after the start: the copy holds the first
// admitted buyer's order; after it a second buyer ordered and a buyer
// joined late (position 6). Redis comes back from the copy, and another
// buyer joins. Nobody orders twice (the rewound room may admit a buyer who
// already holds an order: the queue tells them ORDERED), the late joiner
// of before the restore stays behind the early joiners and ahead of the
// one after it, admissions resume, and SOLD_OUT reaches everyone else.
func TestWaitingRoomSurvivesRestoreFromAfterTheStart(t *testing.T) {
	t.Parallel()
	r := newRoomLossRig(t)
	for u := int64(1); u <= 5; u++ {
		r.join(u)
	}
	r.started()
	first, second := r.order[0], r.order[1]
	r.sweepUntil(15*time.Second, fmt.Sprintf("the first in line (buyer %d) to order", first), func() bool { return r.orders[first] != "" })
	copyAfter, gen := r.snapshot()
	r.join(6)
	r.sweepUntil(15*time.Second, fmt.Sprintf("the second in line (buyer %d) to order", second), func() bool { return r.orders[second] != "" })
	r.lose("rewound to a copy taken after the start, holding buyer "+strconv.FormatInt(first, 10)+"'s order only", copyAfter, gen)
	r.join(7)
	r.recovers()
	r.runToTheEnd()
}

// roomLossRig is a 3-unit sale with a waiting room (1 admission a second,
// 10 s admissions) on two api instances and a consumer, and the buyers'
// pages: what each was told, and the orders they placed.
type roomLossRig struct {
	t        *testing.T
	p        *pipelinetest.Pipeline
	apis     [2]*pipelinetest.API
	s        pipelinetest.Sale
	startsAt time.Time
	marker   string

	// order is the buyers in the order they joined as the room told them
	// before any loss (the early joiners by the position the seed gave
	// them, then the late joiners by arrival); a buyer who joins after
	// the loss is appended.
	order []int64
	// early are the buyers who joined before the start, as they joined.
	early []int64
	// before are the positions the buyers were told before the loss.
	before map[int64]int64
	// lateAfterLoss are the buyers who joined after the loss.
	lateAfterLoss []int64
	// lostAt is when the loss was made; zero before.
	lostAt time.Time
	// recovered says the room answered rightly after the loss: from then
	// on every sweep checks the positions.
	recovered bool

	// orders is each buyer's accepted order (one key per buyer).
	orders   map[int64]string
	accepted map[string]int64
	// admitted: the buyer was told ADMITTED or EXPIRED at some time.
	admitted map[int64]bool
	// refused: the buyer's order was refused once (reported once).
	refused map[int64]bool
	// reported are the broken promises reported already (once each).
	reported map[string]bool
	// last is what each instance last told each buyer.
	last [2]map[int64]roomAnswer
}

func newRoomLossRig(t *testing.T) *roomLossRig {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	r := &roomLossRig{t: t, p: p, apis: [2]*pipelinetest.API{api, p.StartAPI()},
		marker: p.Prefix + ":heal:generation", before: map[int64]int64{},
		orders: map[int64]string{}, accepted: map[string]int64{}, admitted: map[int64]bool{},
		refused: map[int64]bool{}, reported: map[string]bool{},
		last: [2]map[int64]roomAnswer{{}, {}}}
	// The heal watch ticks every 100ms, as in the other heal tests.
	p.StartConsumer("SECKILL_HEAL_EVERY=100ms")
	startsIn := 5 * time.Second
	r.s = api.CreateSaleWith(roomLossUnits, pipelinetest.SaleOptions{StartsIn: startsIn,
		WaitingRoom: map[string]any{"admit_per_second": 1, "admission_ttl_seconds": 10}})
	r.startsAt = time.Now().Add(startsIn)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the line as last told (%s):%s", r.when(), r.describe())
		}
	})
	return r
}

// roomAnswer is the queue's answer as a buyer's page reads it.
type roomAnswer struct {
	State     string `json:"state"`
	Position  *int64 `json:"position"`
	Ahead     int64  `json:"ahead"`
	Admission string `json:"admission"`
	OrderNo   string `json:"order_no"`
}

func (a roomAnswer) String() string {
	s := a.State
	if a.Position != nil {
		s += "@" + strconv.FormatInt(*a.Position, 10)
	}
	if a.State == "WAITING" && a.Position != nil {
		s += fmt.Sprintf("(ahead %d)", a.Ahead)
	}
	if a.OrderNo != "" {
		s += " " + a.OrderNo
	}
	return s
}

var roomLossClient = &http.Client{Timeout: 10 * time.Second}

// tryQueue joins (POST) or polls (GET) the queue once as user and returns
// the answer with its status: 200, 404 (not in the room), or 503
// UNAVAILABLE with its Retry-After (the room being repaired: the page
// retries); any other answer fails the test.
func tryQueue(t *testing.T, api *pipelinetest.API, method string, s pipelinetest.Sale, user int64) (roomAnswer, int, time.Duration) {
	t.Helper()
	req, err := http.NewRequest(method, fmt.Sprintf("%s/api/v1/activities/%d/queue", api.URL, s.ActivityID), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+pipelinetest.Token(user, ""))
	resp, err := roomLossClient.Do(req)
	if err != nil {
		t.Fatalf("%s queue as %d: %v", method, user, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s queue as %d: %v", method, user, err)
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	switch resp.StatusCode {
	case http.StatusOK:
		var a roomAnswer
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("%s queue as %d: %q: %v", method, user, b, err)
		}
		return a, http.StatusOK, 0
	case http.StatusNotFound:
		if json.Unmarshal(b, &e) != nil || e.Error.Code != "NOT_FOUND" {
			t.Fatalf("%s queue as %d: 404 %q", method, user, b)
		}
		return roomAnswer{}, http.StatusNotFound, 0
	case http.StatusServiceUnavailable:
		after, aerr := strconv.Atoi(resp.Header.Get("Retry-After"))
		if json.Unmarshal(b, &e) != nil || e.Error.Code != "UNAVAILABLE" || aerr != nil || after < 0 {
			t.Fatalf("%s queue as %d: 503 %q Retry-After %q, want UNAVAILABLE with a Retry-After in seconds",
				method, user, b, resp.Header.Get("Retry-After"))
		}
		return roomAnswer{}, http.StatusServiceUnavailable, time.Duration(after) * time.Second
	default:
		t.Fatalf("%s queue as %d: %d %s", method, user, resp.StatusCode, b)
		return roomAnswer{}, 0, 0
	}
}

// retryQueue is tryQueue retrying 503s, after their Retry-After (at most a
// second), for up to 15 s, as a buyer's page does; anything but a 200 in
// the end fails the test.
func retryQueue(t *testing.T, api *pipelinetest.API, method string, s pipelinetest.Sale, user int64) roomAnswer {
	t.Helper()
	var a roomAnswer
	waittest.Until(t, 15*time.Second, fmt.Sprintf("%s queue as %d answered (503s retried)", method, user), func() bool {
		var code int
		var after time.Duration
		a, code, after = tryQueue(t, api, method, s, user)
		switch code {
		case http.StatusOK:
			return true
		case http.StatusServiceUnavailable:
			time.Sleep(min(after, time.Second) - waittest.Every) // the page's pacing: Retry-After
			return false
		}
		t.Fatalf("%s queue as %d: %d, want 200", method, user, code)
		return false
	})
	return a
}

// join puts user in the room, on one instance or the other.
func (r *roomLossRig) join(user int64) {
	r.t.Helper()
	a := retryQueue(r.t, r.apis[user%2], "POST", r.s, user)
	switch {
	case !r.lostAt.IsZero():
		if a.State != "WAITING" && a.State != "SOLD_OUT" {
			r.report(fmt.Sprintf("late-%d", user), fmt.Sprintf("buyer %d joining after the loss, behind everyone: %v, want WAITING", user, a))
		}
		r.lateAfterLoss = append(r.lateAfterLoss, user)
		r.order = append(r.order, user)
		r.t.Logf("%v after the loss: buyer %d joined: %v", time.Since(r.lostAt).Round(time.Millisecond), user, a)
	case a.State != "WAITING":
		r.t.Fatalf("buyer %d joining: %v, want WAITING", user, a)
	case !time.Now().Before(r.startsAt):
		if a.Position == nil {
			r.t.Fatalf("buyer %d joining after the start: %v, want a position", user, a)
		}
		r.before[user] = *a.Position
		r.order = append(r.order, user)
		r.t.Logf("buyer %d joined after the start: %v", user, a)
	default:
		r.early = append(r.early, user)
	}
}

// started waits for the start and until both instances tell every early
// joiner their position, and puts the buyers in line by it.
func (r *roomLossRig) started() {
	r.t.Helper()
	time.Sleep(time.Until(r.startsAt))
	waittest.Until(r.t, 10*time.Second, "both instances to tell every early joiner their position", func() bool {
		for _, u := range r.early {
			for i, api := range r.apis {
				a, code, _ := tryQueue(r.t, api, "GET", r.s, u)
				if code != http.StatusOK || a.Position == nil {
					return false
				}
				r.last[i][u] = a
			}
		}
		return true
	})
	for _, u := range r.early {
		if p0, p1 := *r.last[0][u].Position, *r.last[1][u].Position; p0 != p1 {
			r.t.Fatalf("before any loss, buyer %d at %d on one instance and %d on the other", u, p0, p1)
		}
		r.before[u] = *r.last[0][u].Position
	}
	line := slices.Clone(r.early)
	slices.SortFunc(line, func(a, b int64) int { return int(r.before[a] - r.before[b]) })
	r.order = append(line, r.order...)
	r.t.Logf("at the start, the buyers in line: %s", r.describe())
}

// snapshot copies every key under the test's prefix, once the heal
// watch's marker is in it, and returns the copy with a generation the
// copy's marker is at most (read after it).
func (r *roomLossRig) snapshot() (snapshot, int64) {
	r.t.Helper()
	ctx := context.Background()
	// The copy is taken key by key: it is one instant's copy, as a real
	// backup is, only while no order moves the keys it spans.
	r.p.WaitSaleDrained(r.s, 15*time.Second)
	var (
		c   snapshot
		gen int64
	)
	waittest.Until(r.t, 10*time.Second, "a copy holding the watch's generation marker "+r.marker, func() bool {
		c = snapshotPrefix(r.t, r.p.Redis, r.p.Prefix)
		var err error
		gen, err = r.p.Redis.Get(ctx, r.marker).Int64()
		_, copied := c[r.marker]
		return err == nil && copied
	})
	return c, gen
}

// lose deletes every key under the test's prefix and restores to (nil:
// nothing, a FLUSHALL), once the heal watch has recorded in MySQL a
// generation past gen, the copy's (a rewind it would not see otherwise,
// as in the heal tests).
func (r *roomLossRig) lose(what string, to snapshot, gen int64) {
	r.t.Helper()
	if to != nil {
		waittest.Until(r.t, 10*time.Second, "the watch's record in MySQL past the copy's generation "+strconv.FormatInt(gen, 10), func() bool {
			return r.p.Count("SELECT COALESCE(MAX(generation), 0) FROM redis_watches WHERE marker = ?", r.marker) > gen
		})
	}
	r.t.Logf("before the loss: %s", r.describe())
	rewindPrefix(r.t, r.p.Redis, r.p.Prefix, to)
	r.lostAt = time.Now()
	r.t.Logf("%v after the start: Redis lost the room: %s", r.lostAt.Sub(r.startsAt).Round(time.Millisecond), what)
}

// when is the time of a report: before the loss, or how long after it.
func (r *roomLossRig) when() string {
	if r.lostAt.IsZero() {
		return "before the loss"
	}
	return time.Since(r.lostAt).Round(time.Millisecond).String() + " after the loss"
}

// report fails the test once for each broken promise named key.
func (r *roomLossRig) report(key, msg string) {
	r.t.Helper()
	if !r.reported[key] {
		r.reported[key] = true
		r.t.Errorf("%s: %s", r.when(), msg)
	}
}

// sweep is one round of every buyer's page on each instance, polled from
// the back of the line to its front: poll, and order when told ADMITTED.
// A buyer told ADMITTED while one before them in line, who holds no
// order, is then told WAITING by the same instance breaks the room's
// order (the state an instance answers only moves forward, so the one
// before was not admitted yet when the one behind was).
func (r *roomLossRig) sweep() {
	r.t.Helper()
	for i, api := range r.apis {
		var behind int64 // a buyer further back told ADMITTED in this round
		for j := len(r.order) - 1; j >= 0; j-- {
			u := r.order[j]
			a, code, _ := tryQueue(r.t, api, "GET", r.s, u)
			if code != http.StatusOK {
				if code == http.StatusNotFound {
					r.report(fmt.Sprintf("absent-%d", u), fmt.Sprintf("instance %d tells buyer %d, who joined, that they are not in the room (404)", i+1, u))
				}
				delete(r.last[i], u)
				continue
			}
			r.last[i][u] = a
			switch a.State {
			case "ADMITTED", "EXPIRED":
				r.admitted[u] = true
			case "ORDERED":
				// Before the room recovered, a Redis brought back from an
				// older copy may hold the number its retry was answered
				// (0008: that order ends FAILED DUPLICATE_REQUEST, the first
				// stays); after, only their order.
				if a.OrderNo != r.orders[u] && (r.recovered || r.accepted[a.OrderNo] != u) {
					r.report(fmt.Sprintf("ordered-%d", u), fmt.Sprintf("instance %d tells buyer %d ORDERED with %q; their order is %q", i+1, u, a.OrderNo, r.orders[u]))
				}
			}
			if a.State == "WAITING" && r.orders[u] == "" && behind != 0 {
				r.report(fmt.Sprintf("skipped-%d-%d", u, behind), fmt.Sprintf("instance %d admitted buyer %d (%v) while buyer %d, ahead of them in line and holding no order, waits (%v)",
					i+1, behind, r.last[i][behind], u, a))
			}
			if a.State == "ADMITTED" {
				if behind == 0 {
					behind = u
				}
				r.buy(api, u, a)
			}
		}
	}
	if r.recovered {
		if problem := r.positionsProblem(); problem != "" {
			r.report("positions", "after the room had recovered: "+problem)
		}
	}
}

// buy places the admitted buyer's order, always with the buyer's one key
// (as the sale page does: one per tab and sale): a buyer who holds an order
// and is told ADMITTED again (a rewound room) sends it again, and must not
// end up holding a second order.
func (r *roomLossRig) buy(api *pipelinetest.API, u int64, a roomAnswer) {
	r.t.Helper()
	if r.refused[u] {
		return
	}
	pl := orderAdmitted(r.t, api, r.s, u, 0, fmt.Sprintf("room-loss-%d", u), a.Admission)
	switch {
	case pl.Code == http.StatusAccepted || pl.Code == http.StatusOK:
		if had := r.orders[u]; had == "" {
			r.t.Logf("%s: buyer %d, told %v, ordered: %s", r.when(), u, a, pl.OrderNo)
			r.orders[u] = pl.OrderNo
		} else if _, seen := r.accepted[pl.OrderNo]; !seen && pl.OrderNo != had {
			// Checked at the end: it must not be a second live order.
			r.t.Logf("%s: buyer %d, holding %s and told %v, ordered again with their key: %s", r.when(), u, had, a, pl.OrderNo)
		}
		r.accepted[pl.OrderNo] = u
	case pl.Code == http.StatusServiceUnavailable || pl.Error == "NOT_WARMED" || pl.Code == http.StatusTooManyRequests:
		// The stock being repaired, or the buyer's own retries too fast
		// for the rate limit: the page retries at the next round.
	default:
		r.refused[u] = true
		r.report(fmt.Sprintf("refused-%d", u), fmt.Sprintf("buyer %d, told %v, ordering with the admission: %d %s, want 202", u, a, pl.Code, pl.Error))
	}
}

// positionsProblem says what is wrong with the positions both instances
// last told the buyers ("" when nothing): every buyer still in line (not
// ORDERED) has one, the same on both instances, and they rise along the
// line (the buyers who joined before the loss in their order of before,
// then those who joined after it).
func (r *roomLossRig) positionsProblem() string {
	for i := range r.apis {
		var prev, prevU int64
		for _, u := range r.order {
			a, ok := r.last[i][u]
			switch {
			case !ok:
				return fmt.Sprintf("instance %d did not answer buyer %d", i+1, u)
			case a.State == "ORDERED":
				continue
			case a.Position == nil:
				return fmt.Sprintf("instance %d tells buyer %d %v, without a position", i+1, u, a)
			case *a.Position <= prev:
				return fmt.Sprintf("instance %d tells buyer %d %v, not behind buyer %d, ahead of them in line, at %d", i+1, u, a, prevU, prev)
			}
			if b, ok := r.last[1-i][u]; ok && b.State != "ORDERED" && b.Position != nil && *b.Position != *a.Position {
				return fmt.Sprintf("buyer %d is told %v by instance %d and %v by instance %d", u, a, i+1, b, 2-i)
			}
			prev, prevU = *a.Position, u
		}
	}
	return ""
}

// describe is the line as both instances last told it.
func (r *roomLossRig) describe() string {
	var b strings.Builder
	for _, u := range r.order {
		fmt.Fprintf(&b, "\n  buyer %d", u)
		if p, ok := r.before[u]; ok {
			fmt.Fprintf(&b, " (at %d before the loss)", p)
		} else if slices.Contains(r.lateAfterLoss, u) {
			b.WriteString(" (joined after the loss)")
		}
		for i := range r.apis {
			a, ok := r.last[i][u]
			fmt.Fprintf(&b, " | instance %d: ", i+1)
			if ok {
				b.WriteString(a.String())
			} else {
				b.WriteString("no answer")
			}
		}
		if no := r.orders[u]; no != "" {
			fmt.Fprintf(&b, " | holds %s", no)
		}
	}
	return b.String()
}

// sweepUntil runs rounds of the buyers' pages until cond holds, for up to d.
func (r *roomLossRig) sweepUntil(d time.Duration, what string, cond func() bool) {
	r.t.Helper()
	waittest.Until(r.t, d, what, func() bool {
		r.sweep()
		return cond()
	})
}

// sweepUntilTime runs rounds of the buyers' pages until at.
func (r *roomLossRig) sweepUntilTime(at time.Time) {
	r.t.Helper()
	for time.Now().Before(at) {
		r.sweep()
		time.Sleep(waittest.Every) // the pages' pacing until the loss, not a wait for anything
	}
}

// recovers waits, for up to roomLossRecovery from the loss, until both
// instances answer every buyer with positions in the line's order, and
// from then on checks them at every round.
func (r *roomLossRig) recovers() {
	r.t.Helper()
	last := ""
	r.sweepUntil(max(roomLossRecovery-time.Since(r.lostAt), 0), "both instances to answer every buyer with their place in the line's order", func() bool {
		problem := r.positionsProblem()
		if problem != last && problem != "" {
			r.t.Logf("%s: not yet: %s", r.when(), problem)
		}
		last = problem
		return problem == ""
	})
	r.recovered = true
	r.t.Logf("the room answered rightly %s: %s", r.when(), r.describe())
}

// runToTheEnd runs the buyers' pages until the units are all ordered and
// every other buyer is told SOLD_OUT on both instances, and checks the
// orders in MySQL.
func (r *roomLossRig) runToTheEnd() {
	r.t.Helper()
	r.sweepUntil(45*time.Second, "the units all ordered, each buyer who ordered told ORDERED and every other SOLD_OUT, on both instances", func() bool {
		if len(r.orders) < roomLossUnits {
			return false
		}
		for i := range r.apis {
			for _, u := range r.order {
				a, ok := r.last[i][u]
				if !ok || (r.orders[u] != "" && (a.State != "ORDERED" || a.OrderNo != r.orders[u])) ||
					(r.orders[u] == "" && a.State != "SOLD_OUT") {
					return false
				}
			}
		}
		return true
	})
	r.t.Logf("at the end, %s: %s", r.when(), r.describe())
	for i, u := range r.order {
		if r.orders[u] == "" {
			continue
		}
		for _, v := range r.order[:i] {
			if r.orders[v] == "" && !r.admitted[v] {
				r.t.Errorf("buyer %d holds a unit while buyer %d, ahead of them in line, was never admitted", u, v)
			}
		}
		if slices.Contains(r.lateAfterLoss, u) {
			r.t.Errorf("buyer %d, who joined after the loss, holds a unit ahead of the buyers who joined before it", u)
		}
	}
	for no, o := range r.p.WaitFinal(r.accepted, 30*time.Second) {
		u := r.accepted[no]
		switch {
		case no == r.orders[u] && o.Status != "CREATED":
			r.t.Errorf("buyer %d's order %s ended %s %s, want CREATED", u, no, o.Status, o.FailureReason)
		case no != r.orders[u] && (o.Status == "CREATED" || o.Status == "PAID"):
			r.t.Errorf("buyer %d ordered twice: %s and %s, both %s", u, r.orders[u], no, o.Status)
		}
	}
	if n := int64(len(r.orders)); n != roomLossUnits {
		r.t.Errorf("%d buyers ordered, want the %d units each in one order", n, roomLossUnits)
	}
	r.p.WaitSaleDrained(r.s, 30*time.Second)
	if n := r.p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'CREATED'", r.s.ActivityID); n != roomLossUnits {
		r.t.Errorf("%d CREATED orders in MySQL, want %d (the units)", n, roomLossUnits)
	}
	if inv := r.p.Check(r.s); inv.LiveUnits != roomLossUnits || inv.DBStock != 0 || inv.RedisStock != 0 {
		r.t.Errorf("at the end: %+v, want the %d units in %d live orders and none left", inv, roomLossUnits, roomLossUnits)
	}
}
