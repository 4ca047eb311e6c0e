package e2e_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/lua"
)

// queueAnswer is the queue's answer with what queuePlace leaves out.
type queueAnswer struct {
	State              string    `json:"state"`
	Admission          string    `json:"admission"`
	AdmissionExpiresAt time.Time `json:"admission_expires_at"`
	OrderNo            string    `json:"order_no"`
	PollAfterMS        int64     `json:"poll_after_ms"`
}

func pollQueue(t *testing.T, api *pipelinetest.API, s pipelinetest.Sale, user int64) queueAnswer {
	t.Helper()
	var q queueAnswer
	code, err := api.Do("GET", fmt.Sprintf("/api/v1/activities/%d/queue", s.ActivityID), user, "", nil, nil, &q)
	if err != nil || code != 200 {
		t.Fatalf("poll the queue as %d: %d %v", user, code, err)
	}
	return q
}

// The key first: a buyer of a room sale who ordered and lost the answer
// gets the same order back for the same Idempotency-Key after their
// admission expired, with the old admission or none; the queue tells them
// ORDERED with the order, on any instance, not EXPIRED. A buyer without an
// order is still refused, and one holding an order hears so for another
// key.
func TestWaitingRoomKeyOutlivesTheAdmission(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	s := api.CreateSaleWith(2, pipelinetest.SaleOptions{
		WaitingRoom: map[string]any{"admit_per_second": 10, "admission_ttl_seconds": 10}})
	const buyer, other = 1, 2
	adm := map[int64]queueAnswer{}
	for _, u := range []int64{buyer, other} {
		queue(t, api, "POST", s, u)
		waittest.Until(t, 10*time.Second, fmt.Sprintf("buyer %d admitted", u), func() bool {
			adm[u] = pollQueue(t, api, s, u)
			return adm[u].State == "ADMITTED"
		})
	}

	const key = "lost-answer"
	first := orderAdmitted(t, api, s, buyer, 0, key, adm[buyer].Admission)
	if first.Code != 202 {
		t.Fatalf("the admitted buyer's order: %+v", first)
	}
	// Ordered: the queue says so (the admission is used), on this
	// instance and on one that never saw the buyer.
	second := p.StartAPI()
	for name, a := range map[string]*pipelinetest.API{"the first api": api, "another api": second} {
		if q := pollQueue(t, a, s, buyer); q.State != "ORDERED" || q.OrderNo != first.OrderNo || q.PollAfterMS != 0 {
			t.Errorf("%s's queue for the buyer who ordered: %+v, want ORDERED with %s", name, q, first.OrderNo)
		}
	}
	if again := orderAdmitted(t, api, s, buyer, 0, key, adm[buyer].Admission); again.Code != 202 || again.OrderNo != first.OrderNo {
		t.Fatalf("a retry with the used admission: %+v, want 202 with %s", again, first.OrderNo)
	}

	// The answers were lost; the retries come after the admission expired.
	expired := adm[buyer].AdmissionExpiresAt
	if adm[other].AdmissionExpiresAt.After(expired) {
		expired = adm[other].AdmissionExpiresAt
	}
	time.Sleep(time.Until(expired.Add(500 * time.Millisecond)))
	for name, a := range map[string]*pipelinetest.API{"the first api": api, "another api": second} {
		for _, admission := range []string{adm[buyer].Admission, ""} {
			if pl := orderAdmitted(t, a, s, buyer, 0, key, admission); pl.Code != 202 || pl.OrderNo != first.OrderNo {
				t.Errorf("a late retry on %s with admission %q: %+v, want 202 with %s", name, admission, pl, first.OrderNo)
			}
		}
		if q := pollQueue(t, a, s, buyer); q.State != "ORDERED" || q.OrderNo != first.OrderNo {
			t.Errorf("%s's queue after the admission expired: %+v, want ORDERED with %s", name, q, first.OrderNo)
		}
		// The other buyer let their turn pass: no order, no admission.
		if q := pollQueue(t, a, s, other); q.State != "EXPIRED" || q.OrderNo != "" {
			t.Errorf("%s's queue for the buyer who did not order: %+v, want EXPIRED", name, q)
		}
	}
	for name, c := range map[string]struct {
		user      int64
		key       string
		admission string
		code      int
		error     string
	}{
		"the buyer, another key, no admission":      {buyer, "another-key", "", 409, "ALREADY_PURCHASED"},
		"the buyer, another key, the old admission": {buyer, "another-key", adm[buyer].Admission, 409, "ALREADY_PURCHASED"},
		"the other buyer, the same key string":      {other, key, "", 403, "NOT_ADMITTED"},
		"the other buyer, their expired admission":  {other, "late", adm[other].Admission, 403, "NOT_ADMITTED"},
	} {
		if pl := orderAdmitted(t, api, s, c.user, 0, c.key, c.admission); pl.Code != c.code || pl.Error != c.error {
			t.Errorf("%s: %+v, want %d %s", name, pl, c.code, c.error)
		}
	}

	final := p.WaitFinal(map[string]int64{first.OrderNo: buyer}, 30*time.Second)
	if o := final[first.OrderNo]; o.Status != "CREATED" {
		t.Fatalf("the order ended %s %s", o.Status, o.FailureReason)
	}
	p.WaitSaleDrained(s, 30*time.Second)
	if inv := p.Check(s); inv.LiveUnits != 1 || inv.RedisStock != 1 || inv.DBStock != 1 {
		t.Fatalf("at the end: %+v, want one unit in the one order and one left", inv)
	}
}

// strangerRig starts two api instances of one pipeline, the second
// (counted) reaching Redis through a proxy that counts every run of the
// room's place script (a matcher that counts and never matches: nothing
// is lost): the looks strangers' polls cost.
func strangerRig(t *testing.T) (api, counted *pipelinetest.API, looks *atomic.Int64) {
	t.Helper()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api = p.StartAPI()
	link := proxytest.Start(t, redistest.Addr(), proxytest.RESP)
	counted = p.StartAPI("SECKILL_REDIS_ADDR=" + link.Addr())
	looks = new(atomic.Int64)
	isLook := proxytest.RedisScript(lua.Source("room_join"))
	link.LoseRequest(func(r proxytest.Request) bool {
		if isLook(r) {
			looks.Add(1)
		}
		return false
	}, 1)
	return api, counted, looks
}

// queuePoller returns a poll of s's queue that answers its status code.
func queuePoller(t *testing.T, s pipelinetest.Sale) func(a *pipelinetest.API, user int64) int {
	path := fmt.Sprintf("/api/v1/activities/%d/queue", s.ActivityID)
	return func(a *pipelinetest.API, user int64) int {
		t.Helper()
		code, err := a.Do("GET", path, user, "", nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
}

// A poll by a buyer who has not joined costs the sale's hot slot no Redis
// call once the instance knows them absent: a look found them not in the
// room and a state read after it counts as many buyers (nobody joined
// since, on any instance). A buyer who then joins, on this instance or
// another, is told their place.
func TestWaitingRoomStrangersPollFromMemory(t *testing.T) {
	t.Parallel()
	api, counted, looks := strangerRig(t)
	s := api.CreateSaleWith(5, pipelinetest.SaleOptions{WaitingRoom: map[string]any{"admit_per_second": 10}})
	queue(t, api, "POST", s, 1)

	const stranger, other = 99, 98
	poll := queuePoller(t, s)
	waittest.Until(t, 5*time.Second, "a stranger's poll answered without a look", func() bool {
		before := looks.Load()
		if code := poll(counted, stranger); code != 404 {
			t.Fatalf("a stranger's poll: %d, want 404", code)
		}
		return looks.Load() == before
	})
	if looks.Load() == 0 {
		t.Fatal("no look counted: the first poll of a stranger must have read Redis")
	}
	// Polls spread over more than a second: the room's state is read
	// again in between (nobody joined), and no poll looks.
	before := looks.Load()
	for range 30 {
		if code := poll(counted, stranger); code != 404 {
			t.Fatalf("a stranger's poll: %d, want 404", code)
		}
		time.Sleep(50 * time.Millisecond) // pacing, not a wait for anything
	}
	if n := looks.Load() - before; n != 0 {
		t.Fatalf("30 polls by a buyer who has not joined ran the room's place script %d times, want 0", n)
	}

	// The stranger joins on the other instance: this one tells them their
	// place once its state has counted the join (within about a second).
	if pl := queue(t, api, "POST", s, stranger); pl.Position == nil || *pl.Position != 2 {
		t.Fatalf("the stranger's join: %+v, want position 2", pl)
	}
	waittest.Until(t, 5*time.Second, "the joined stranger's place on the instance that knew them absent", func() bool {
		return poll(counted, stranger) == 200
	})
	if pl := queue(t, counted, "GET", s, stranger); pl.Position == nil || *pl.Position != 2 {
		t.Fatalf("the stranger's place: %+v, want position 2", pl)
	}
	// One known absent who joins on this instance is told at once.
	if code := poll(counted, other); code != 404 {
		t.Fatalf("another stranger's poll: %d, want 404", code)
	}
	queue(t, counted, "POST", s, other)
	if pl := queue(t, counted, "GET", s, other); pl.Position == nil || *pl.Position != 3 {
		t.Fatalf("a buyer who joined here, polling: %+v, want position 3", pl)
	}
}

// In a busy room, where a buyer joins every few milliseconds on another
// instance, a stranger's polls still cost no Redis call after the first
// look, before the start (early joiners) and after it (late ones): once a
// look found someone absent, the instance reads who joined since with
// each state read, and knows everyone that state counts. A buyer who
// joined on the other instance is told their place here within about a
// second.
func TestWaitingRoomStrangersPollFromMemoryInABusyRoom(t *testing.T) {
	t.Parallel()
	api, counted, looks := strangerRig(t)
	const startsIn = 8 * time.Second
	s := api.CreateSaleWith(5, pipelinetest.SaleOptions{StartsIn: startsIn, WaitingRoom: map[string]any{"admit_per_second": 10}})
	starts := time.Now().Add(startsIn)

	// The crowd: a join every 10 ms on the other instance until the end.
	var joined atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for u := int64(1000); ; u++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			queue(t, api, "POST", s, u)
			joined.Store(u)
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })

	const stranger = 99
	poll := queuePoller(t, s)
	// polls sends 40 polls of the stranger over 2 s (pacing) and returns
	// the looks they ran.
	polls := func(phase string) int64 {
		before := looks.Load()
		for range 40 {
			if code := poll(counted, stranger); code != 404 {
				t.Fatalf("%s: a stranger's poll: %d, want 404", phase, code)
			}
			time.Sleep(50 * time.Millisecond) // pacing, not a wait for anything
		}
		return looks.Load() - before
	}
	waittest.Until(t, 4*time.Second, "a stranger's poll answered without a look before the start", func() bool {
		before := looks.Load()
		if code := poll(counted, stranger); code != 404 {
			t.Fatalf("a stranger's poll: %d, want 404", code)
		}
		return looks.Load() == before
	})
	if n := polls("before the start"); n != 0 {
		t.Fatalf("before the start, %d buyers joined by now: 40 polls by a stranger ran the room's place script %d times, want 0", joined.Load()-999, n)
	}
	if time.Now().After(starts) {
		t.Fatal("the polls before the start ended after it: start the sale later")
	}
	time.Sleep(time.Until(starts.Add(1500 * time.Millisecond))) // the start, not a condition
	if n := polls("after the start"); n != 0 {
		t.Fatalf("after the start, %d buyers joined by now: 40 polls by a stranger ran the room's place script %d times, want 0", joined.Load()-999, n)
	}
	// Someone who has just joined on the other instance is told their
	// place here within about a second, without joining again.
	last := joined.Load()
	waittest.Until(t, 3*time.Second, "a buyer who joined on the other instance known here", func() bool {
		return poll(counted, last) == 200
	})
}
