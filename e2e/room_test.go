package e2e_test

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/domain/room"
)

// queuePlace is the answer of the queue's join and poll.
type queuePlace struct {
	State       string `json:"state"`
	Position    *int64 `json:"position"`
	Ahead       int64  `json:"ahead"`
	PollAfterMS int64  `json:"poll_after_ms"`
	Admission   string `json:"admission"`
}

func queue(t *testing.T, api *pipelinetest.API, method string, s pipelinetest.Sale, user int64) queuePlace {
	t.Helper()
	var p queuePlace
	code, err := api.Do(method, fmt.Sprintf("/api/v1/activities/%d/queue", s.ActivityID), user, "", nil, nil, &p)
	if err != nil || code != 200 {
		t.Fatalf("%s queue as %d: %d %v", method, user, code, err)
	}
	return p
}

// orderAdmitted places an order of s's item as user with the admission.
func orderAdmitted(t *testing.T, api *pipelinetest.API, s pipelinetest.Sale, user int64, item int64, key, admission string) pipelinetest.Placed {
	t.Helper()
	pl, err := api.PlaceOrderAdmitted(strconv.FormatInt(user, 10), key, s.ActivityID, item, 1, admission)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// A sale with a waiting room, end to end: buyers who join before the start
// get the seed's order (published as a commitment, revealed at the start);
// the room admits no more buyers than there are units; only admitted
// buyers' orders are taken; every waiter hears SOLD_OUT once it is; a
// cancelled order admits the next in line.
func TestWaitingRoomEndToEnd(t *testing.T) {
	t.Parallel()
	roomEndToEnd(t, false)
}

// The same on Redis Cluster: the room's keys share the sale's hash tag.
func TestWaitingRoomEndToEndOnRedisCluster(t *testing.T) {
	t.Parallel()
	roomEndToEnd(t, true)
}

func roomEndToEnd(t *testing.T, cluster bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3, RedisCluster: cluster})
	api := p.StartAPI()
	p.StartConsumer()
	ctx := context.Background()
	startsIn := 8 * time.Second
	s := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{3, 2}, StartsIn: startsIn,
		WaitingRoom: map[string]any{"admit_per_second": 50, "admission_ttl_seconds": 60}})
	started := time.Now().Add(startsIn)
	other := api.CreateSaleWith(1, pipelinetest.SaleOptions{WaitingRoom: map[string]any{"admit_per_second": 10}})

	var page struct {
		Name           string `json:"name"`
		WaitingRoom    bool   `json:"waiting_room"`
		SeedCommitment string `json:"seed_commitment"`
		Seed           string `json:"seed"`
	}
	if code, err := api.Do("GET", fmt.Sprintf("/api/v1/activities/%d", s.ActivityID), 0, "", nil, nil, &page); err != nil || code != 200 {
		t.Fatalf("sale page: %d %v", code, err)
	}
	if !page.WaitingRoom || len(page.SeedCommitment) != 64 || page.Seed != "" || page.Name != "test item" {
		t.Fatalf("sale page before the start: %+v, want its name, a room, its commitment and no seed", page)
	}

	// 40 buyers join before the start, all at once, and again.
	const n = 40
	var wg sync.WaitGroup
	for u := int64(1); u <= n; u++ {
		wg.Go(func() {
			for range 2 {
				if pl := queue(t, api, "POST", s, u); pl.State != "WAITING" || pl.Position != nil {
					t.Errorf("buyer %d joining before the start: %+v, want WAITING without a position", u, pl)
				}
			}
		})
	}
	wg.Wait()
	if pl := orderAdmitted(t, api, s, 1, s.Items[0].ID, "early", ""); pl.Code != 409 {
		t.Fatalf("an order before the start: %+v, want 409", pl)
	}
	// The room lives in Redis: an api started afresh knows everyone.
	api.Kill()
	api = p.StartAPI()
	for u := int64(1); u <= n; u++ {
		if pl := queue(t, api, "GET", s, u); pl.State != "WAITING" || pl.Position != nil {
			t.Fatalf("buyer %d polling a new api: %+v, want WAITING", u, pl)
		}
	}
	time.Sleep(time.Until(started.Add(200 * time.Millisecond)))

	// The seed is out: its hash is the commitment, and it orders the
	// early joiners.
	waittest.Until(t, 5*time.Second, "the sale page to show the seed", func() bool {
		_, err := api.Do("GET", fmt.Sprintf("/api/v1/activities/%d", s.ActivityID), 0, "", nil, nil, &page)
		return err == nil && page.Seed != ""
	})
	raw, err := hex.DecodeString(page.Seed)
	if sum := sha256.Sum256(raw); err != nil || hex.EncodeToString(sum[:]) != page.SeedCommitment {
		t.Fatalf("seed %s does not hash to the commitment %s", page.Seed, page.SeedCommitment)
	}
	var seed room.Seed
	copy(seed[:], raw)
	byRank := make([]int64, n)
	for i := range byRank {
		byRank[i] = int64(i + 1)
	}
	slices.SortFunc(byRank, func(a, b int64) int {
		return cmp.Or(cmp.Compare(room.Rank(seed, strconv.FormatInt(a, 10)), room.Rank(seed, strconv.FormatInt(b, 10))),
			cmp.Compare(strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)))
	})

	// Five units: the first five positions are admitted, and no one else.
	places := map[int64]queuePlace{}
	waittest.Until(t, 10*time.Second, "five buyers admitted", func() bool {
		admitted := 0
		for u := int64(1); u <= n; u++ {
			places[u] = queue(t, api, "GET", s, u)
			if places[u].State == "ADMITTED" {
				admitted++
			}
		}
		return admitted == 5
	})
	time.Sleep(1500 * time.Millisecond) // the room advances again: still five
	for u := int64(1); u <= n; u++ {
		pl := queue(t, api, "GET", s, u)
		if pl.Position == nil || byRank[*pl.Position-1] != u {
			t.Fatalf("buyer %d at %+v; the seed puts them at %d", u, pl, slices.Index(byRank, u)+1)
		}
		if admitted := *pl.Position <= 5; admitted != (pl.State == "ADMITTED") || (admitted && pl.Admission == "") {
			t.Fatalf("buyer %d at position %d: %+v", u, *pl.Position, pl)
		}
		places[u] = pl
	}
	first, sixth := byRank[0], byRank[5]

	// Orders without a valid admission are refused, and reserve nothing.
	act, err := p.DB.Activities.Activity(ctx, s.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	expired := room.Sign(act.Room.Key[:], room.Admission{ActivityID: s.ActivityID, UserID: strconv.FormatInt(first, 10), Expires: time.Now().Add(-time.Second)})
	forged := room.Sign([]byte("not the sale's key"), room.Admission{ActivityID: s.ActivityID, UserID: strconv.FormatInt(first, 10), Expires: time.Now().Add(time.Minute)})
	otherPlace := queue(t, api, "POST", other, first)
	waittest.Until(t, 5*time.Second, "the buyer admitted to the other sale", func() bool {
		otherPlace = queue(t, api, "GET", other, first)
		return otherPlace.State == "ADMITTED"
	})
	for name, c := range map[string]struct {
		user      int64
		admission string
	}{
		"none": {first, ""}, "forged": {first, forged}, "expired": {first, expired},
		"another buyer's": {sixth, places[first].Admission}, "another sale's": {first, otherPlace.Admission},
		"a waiter's garbage": {sixth, "a1.1.2.3.4"},
	} {
		if pl := orderAdmitted(t, api, s, c.user, s.Items[0].ID, "refused-"+strconv.Itoa(len(name)), c.admission); pl.Code != 403 || pl.Error != "NOT_ADMITTED" {
			t.Errorf("an order with %s admission: %+v, want 403 NOT_ADMITTED", name, pl)
		}
	}
	for _, it := range s.Items {
		if snap, err := p.Store.Stock.Stock(ctx, s.Item(it.ID)); err != nil || snap.Stock != it.Stock || snap.Inflight != 0 {
			t.Fatalf("after the refusals item %d: %+v %v, want its %d units untouched", it.ID, snap, err, it.Stock)
		}
	}

	// The five admitted buyers order (retrying once with the same key).
	accepted := map[string]int64{}
	for i, u := range byRank[:5] {
		item := s.Items[i%2].ID
		if i >= 4 {
			item = s.Items[0].ID
		}
		key := fmt.Sprintf("buy-%d", u)
		pl := orderAdmitted(t, api, s, u, item, key, places[u].Admission)
		again := orderAdmitted(t, api, s, u, item, key, places[u].Admission)
		if pl.Code != 202 || again.Code != 202 || again.OrderNo != pl.OrderNo {
			t.Fatalf("admitted buyer %d: %+v then %+v, want one order accepted", u, pl, again)
		}
		accepted[pl.OrderNo] = u
	}
	// Sold out: a waiter's poll a second later hears so (each instance
	// reads the room at most a second old).
	soldOut := time.Now()
	time.Sleep(time.Until(soldOut.Add(time.Second + 50*time.Millisecond)))
	for _, u := range byRank[5:] {
		if pl := queue(t, api, "GET", s, u); pl.State != "SOLD_OUT" {
			t.Fatalf("buyer %d a second after the sell-out: %+v, want SOLD_OUT", u, pl)
		}
	}

	// A cancelled order gives its unit to the next in line.
	final := p.WaitFinal(accepted, 30*time.Second)
	var cancelled string
	for no, o := range final {
		if o.Status != "CREATED" {
			t.Fatalf("order %s: %s %s", no, o.Status, o.FailureReason)
		}
		if accepted[no] == first {
			cancelled = no
		}
	}
	if code, err := api.Do("POST", "/api/v1/orders/"+cancelled+"/cancel", first, "", nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("cancel: %d %v", code, err)
	}
	var next queuePlace
	waittest.Until(t, 5*time.Second, "the next in line to be admitted", func() bool {
		next = queue(t, api, "GET", s, sixth)
		return next.State == "ADMITTED"
	})
	// The unit is held for position 6: position 7 waits at the front.
	if pl := queue(t, api, "GET", s, byRank[6]); pl.State != "WAITING" || pl.Ahead != 0 {
		t.Fatalf("position 7 after one unit came back: %+v, want WAITING with nobody ahead", pl)
	}
	pl := orderAdmitted(t, api, s, sixth, s.Items[0].ID, "after-cancel", next.Admission)
	if pl.Code != 202 {
		t.Fatalf("the next in line's order: %+v", pl)
	}
	delete(accepted, cancelled)
	accepted[pl.OrderNo] = sixth
	p.WaitFinal(accepted, 30*time.Second)
	p.WaitSaleDrained(s, 30*time.Second)
	inv := p.Check(s)
	if inv.LiveUnits != 5 || inv.RedisStock != 0 || inv.DBStock != 0 {
		t.Fatalf("at the end: %+v, want the 5 units in 5 live orders and Redis at 0", inv)
	}
}

// A room with proof_of_work_bits takes a join only with a solved challenge
// of the buyer's own.
func TestWaitingRoomProofOfWork(t *testing.T) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	s := api.CreateSaleWith(3, pipelinetest.SaleOptions{WaitingRoom: map[string]any{"admit_per_second": 10, "proof_of_work_bits": 10}})
	path := fmt.Sprintf("/api/v1/activities/%d/queue", s.ActivityID)
	var ch struct {
		Challenge string `json:"challenge"`
		Bits      int    `json:"bits"`
	}
	if code, err := api.Do("GET", path+"/challenge", 7, "", nil, nil, &ch); err != nil || code != 200 || ch.Bits != 10 {
		t.Fatalf("challenge: %d %v %+v", code, err, ch)
	}
	solution, weak := pipelinetest.Solve(ch.Challenge, ch.Bits), pipelinetest.Unsolved(ch.Challenge, ch.Bits)
	for name, c := range map[string]struct {
		user int64
		body any
	}{
		"no body": {7, nil}, "no solution": {7, map[string]any{"challenge": ch.Challenge}},
		"another buyer's challenge": {8, map[string]any{"challenge": ch.Challenge, "solution": solution}},
		"a weak solution":           {7, map[string]any{"challenge": ch.Challenge, "solution": weak}},
	} {
		if code, err := api.Do("POST", path, c.user, "", nil, c.body, nil); err != nil || code != 400 {
			t.Errorf("join with %s: %d %v, want 400", name, code, err)
		}
	}
	var pl queuePlace
	body := map[string]any{"challenge": ch.Challenge, "solution": solution}
	if code, err := api.Do("POST", path, 7, "", nil, body, &pl); err != nil || code != 200 || pl.Position == nil || *pl.Position != 1 {
		t.Fatalf("join with the solution: %d %v %+v, want position 1", code, err, pl)
	}
}

// An order left unpaid until its payment window closes it gives its unit
// to the next in line, who is admitted and buys it.
func TestWaitingRoomUnpaidOrderAdmitsTheNext(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer("SECKILL_CLOSER_EVERY=200ms")
	startsIn := 4 * time.Second
	s := api.CreateSaleWith(1, pipelinetest.SaleOptions{StartsIn: startsIn, PaymentWindow: 2 * time.Second,
		WaitingRoom: map[string]any{"admit_per_second": 10}})
	started := time.Now().Add(startsIn)
	for u := int64(1); u <= 2; u++ {
		queue(t, api, "POST", s, u)
	}
	time.Sleep(time.Until(started))
	var first, second int64
	var adm queuePlace
	waittest.Until(t, 10*time.Second, "one of the two admitted", func() bool {
		for u := int64(1); u <= 2; u++ {
			if pl := queue(t, api, "GET", s, u); pl.State == "ADMITTED" {
				first, second, adm = u, 3-u, pl
				return true
			}
		}
		return false
	})
	if pl := queue(t, api, "GET", s, second); pl.State != "WAITING" {
		t.Fatalf("the other buyer with the one unit held: %+v, want WAITING", pl)
	}
	pl := orderAdmitted(t, api, s, first, s.ItemID, "unpaid", adm.Admission)
	if pl.Code != 202 {
		t.Fatalf("the admitted buyer's order: %+v", pl)
	}
	// Not paid: the closer closes it, and the unit admits the other buyer.
	waittest.Until(t, 30*time.Second, "the unpaid order closed and the next buyer admitted", func() bool {
		adm = queue(t, api, "GET", s, second)
		return adm.State == "ADMITTED"
	})
	if st, _, err := api.OrderStatus(first, pl.OrderNo); err != nil || st != "CLOSED" {
		t.Fatalf("the unpaid order: %s %v, want CLOSED", st, err)
	}
	next := orderAdmitted(t, api, s, second, s.ItemID, "next", adm.Admission)
	if next.Code != 202 {
		t.Fatalf("the next buyer's order: %+v", next)
	}
	final := p.WaitFinal(map[string]int64{next.OrderNo: second}, 30*time.Second)
	if o := final[next.OrderNo]; o.Status != "CREATED" {
		t.Fatalf("the next buyer's order ended %s %s", o.Status, o.FailureReason)
	}
}
