package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/draw"
)

// answer is what one entrant was answered, first and on entering again.
type answer struct {
	first, again pipelinetest.Entry
	sentAt       time.Time
}

// Entries go through Redis and Kafka (ADR 7), and the draw's list is
// exactly what was answered, through three faults of the window: Redis
// loses the sale's entries in the middle of the window, one of the two
// consumers writing them is killed two seconds before the close (the
// other, the drawer, takes its partitions over after the draw is due),
// and the
// entrants race the close on two api instances, answers on both sides of
// it within the same second. Every 201 is in the ranking with the id it
// was answered; nobody answered 409 is; nobody is there twice; a buyer who
// enters again after the loss, for another size, gets the entry they made
// and MySQL keeps its size.
func TestEntriesAreExactlyTheAnsweredThroughFaults(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	apis := []*pipelinetest.API{p.StartAPI(), p.StartAPI()}
	fast := []string{"SECKILL_DRAW_EVERY=200ms"}
	// The first consumer takes the drawer's lock at its start; the second
	// shares the entries' partitions with it.
	p.StartConsumer(fast...)
	time.Sleep(time.Second)
	writer := p.StartConsumer(fast...)
	const closeIn = 12 * time.Second
	s := apis[0].CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{30, 30}, EntriesCloseIn: closeIn, PaymentWindow: time.Minute})
	closes := time.Now().Add(closeIn)

	var (
		mu      sync.Mutex
		answers = map[string]*answer{}
		next    atomic.Int64
		wg      sync.WaitGroup
		lost    = make(chan struct{})
	)
	enterOne := func(api *pipelinetest.API) {
		u := strconv.FormatInt(next.Add(1), 10)
		a := &answer{sentAt: time.Now()}
		_, a.first, _ = api.Enter(u, s.ActivityID, s.Items[0].ID)
		mu.Lock()
		answers[u] = a
		mu.Unlock()
	}
	// Entrants from now until two seconds past the close, 16 at a time,
	// on both instances.
	stopAt := closes.Add(2 * time.Second)
	for w := range 16 {
		wg.Go(func() {
			for time.Now().Before(stopAt) {
				enterOne(apis[w%2])
			}
		})
	}

	// Redis loses the sale's entries mid-window.
	time.Sleep(5 * time.Second)
	keys, err := redistest.Keys(context.Background(), p.Redis, p.Prefix+":*draw:"+strconv.FormatInt(s.ActivityID, 10)+":entries")
	if err != nil || len(keys) != 1 {
		t.Fatalf("the sale's entries in Redis: %v, %v", keys, err)
	}
	if err := p.Redis.Del(context.Background(), keys[0]).Err(); err != nil {
		t.Fatal(err)
	}
	close(lost)

	// Everyone answered before the loss enters again, for the other size.
	<-lost
	mu.Lock()
	before := map[string]*answer{}
	for u, a := range answers {
		if a.first.Code == 201 {
			before[u] = a
		}
	}
	mu.Unlock()
	var again sync.WaitGroup
	sem := make(chan struct{}, 8)
	for u, a := range before {
		again.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; again.Done() }()
			_, a.again, _ = apis[1].Enter(u, s.ActivityID, s.Items[1].ID)
		}()
	}
	again.Wait()

	// The second consumer dies two seconds before the close, while the
	// entries stream: its partitions' entries wait until the group gives
	// them to the first (its session timeout, 6 s), whose drawer is due
	// before that: only the watermark keeps the draw from a partial list.
	time.Sleep(time.Until(closes.Add(-2 * time.Second)))
	writer.Kill()
	wg.Wait()

	waittest.Until(t, 90*time.Second, "the draw run", func() bool {
		return p.Count("SELECT COUNT(*) FROM activity_draws WHERE activity_id = ? AND state = 'DRAWN'", s.ActivityID) == 1
	})
	rows := ranking(t, p, s.ActivityID)
	ranked := map[string]pipelinetest.Pick{}
	for _, r := range rows {
		if _, twice := ranked[r.UserID]; twice {
			t.Errorf("buyer %s ranked twice", r.UserID)
		}
		ranked[r.UserID] = r
	}
	var created, refused, unsure, lateRefused int
	for u, a := range answers {
		r, in := ranked[u]
		switch a.first.Code {
		case 201:
			created++
			if !in || r.EntryID != a.first.EntryID {
				t.Errorf("buyer %s answered 201 (entry %s) is not ranked with it: %+v", u, a.first.EntryID, r)
			}
		case 409:
			refused++
			if in {
				t.Errorf("buyer %s answered 409 is ranked: %+v", u, r)
			}
			if a.sentAt.After(closes.Add(-time.Second)) {
				lateRefused++
			}
		case 503:
			unsure++ // either way: GET .../entries/me says which
		default:
			t.Errorf("buyer %s answered %d: %+v", u, a.first.Code, a.first)
		}
		if a.again.Code != 0 {
			if a.again.Code != 200 && a.again.Code != 201 || a.again.EntryID != a.first.EntryID {
				t.Errorf("buyer %s entering again after the loss: %+v, first %+v", u, a.again, a.first)
			}
			if in && r.ItemID != s.Items[0].ID {
				t.Errorf("buyer %s's entry changed size after the loss: %+v", u, r)
			}
		}
	}
	for u := range ranked {
		if answers[u] == nil {
			t.Errorf("buyer %s is ranked but never entered", u)
		}
	}
	t.Logf("%d entrants: %d answered 201, %d 409 (%d in the last second before the close or after), %d 503; %d ranked; %d entered again after the loss",
		len(answers), created, refused, lateRefused, unsure, len(rows), len(before))
	if created == 0 || lateRefused == 0 || len(before) == 0 {
		t.Fatalf("the race did not straddle the close or the loss: %d created, %d refused near the close, %d before the loss", created, lateRefused, len(before))
	}
	// The last 201 and the first 409 are within a second of each other
	// around the close.
	var last201, first409 time.Time
	for _, a := range answers {
		if a.first.Code == 201 && a.sentAt.After(last201) {
			last201 = a.sentAt
		}
		if a.first.Code == 409 && (first409.IsZero() || a.sentAt.Before(first409)) {
			first409 = a.sentAt
		}
	}
	if gap := first409.Sub(last201); gap > time.Second || gap < -time.Second {
		t.Errorf("the last 201 was sent at %v, the first 409 at %v: not within a second of each other", last201, first409)
	}
	var rec draw.Record
	if code, err := apis[0].Do("GET", fmt.Sprintf("/api/v1/activities/%d/draw", s.ActivityID), 0, "", nil, nil, &rec); err != nil || code != 200 {
		t.Fatalf("draw record: %d %v", code, err)
	}
	if err := draw.Verify(rec); err != nil || len(rec.Entries) != len(rows) {
		t.Errorf("the record (%d entries of %d ranked) does not verify: %v", len(rec.Entries), len(rows), err)
	}
}

// An operator's end closes a draw sale's entries at once on every api
// instance, also on one whose copy of the sale is from before the end
// (copies live up to a second): its next entry is refused, never answered
// 201 and then dropped by MySQL's window.
func TestEndingADrawClosesItsEntriesEverywhere(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	ender, other := p.StartAPI(), p.StartAPI()
	p.StartConsumer()
	s := ender.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{5}, EntriesCloseIn: time.Minute})
	if code, e, err := other.Enter("1", s.ActivityID, s.Items[0].ID); err != nil || code != 201 {
		t.Fatalf("an entry before the end: %d %+v %v", code, e, err)
	}
	// other's copy of the sale is fresh now; the end goes through ender.
	if code, err := ender.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/end", s.ActivityID), 1, auth.RoleAdmin, nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("end: %d %v", code, err)
	}
	code, e, err := other.Enter("2", s.ActivityID, s.Items[0].ID)
	if err != nil || code != 409 || e.Error.Code != "ACTIVITY_NOT_ACTIVE" {
		t.Fatalf("an entry right after the end on the other instance: %d %+v %v, want 409 ACTIVITY_NOT_ACTIVE", code, e, err)
	}
	waittest.Until(t, 30*time.Second, "the first entry in MySQL", func() bool {
		return p.Count("SELECT COUNT(*) FROM draw_entries WHERE activity_id = ?", s.ActivityID) == 1
	})
}
