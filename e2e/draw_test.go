package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/draw"
)

func enter(t *testing.T, api *pipelinetest.API, s pipelinetest.Sale, user, item int64) pipelinetest.Entry {
	t.Helper()
	_, e, err := api.Enter(strconv.FormatInt(user, 10), s.ActivityID, item)
	if err != nil {
		t.Errorf("enter as %d: %v", user, err)
	}
	return e
}

func myEntry(t *testing.T, api *pipelinetest.API, s pipelinetest.Sale, user int64) pipelinetest.Entry {
	t.Helper()
	code, e, err := api.MyEntry(strconv.FormatInt(user, 10), s.ActivityID)
	if err != nil || code != 200 {
		t.Fatalf("entry of %d: %d %v", user, code, err)
	}
	return e
}

// ranking reads the sale's ranking with each pick's order.
func ranking(t *testing.T, p *pipelinetest.Pipeline, activity int64) []pipelinetest.Pick {
	t.Helper()
	rows, err := p.Picks(activity)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// bySize splits rows by size and outcome, in rank order.
func bySize(rows []pipelinetest.Pick, outcome string) map[int64][]pipelinetest.Pick {
	out := map[int64][]pipelinetest.Pick{}
	for _, r := range rows {
		if r.Outcome == outcome {
			out[r.ItemID] = append(out[r.ItemID], r)
		}
	}
	return out
}

// A draw sale end to end: 5,000 entrants for 100 units over 5 sizes. The
// consumer that starts the draw is killed inside its transaction, the next
// one after the first winner's reserve; the third finishes. Exactly each
// size's stock wins, each winner gets one order; the alternates get units
// only when a winner does not pay (or cancels, or a restock adds some), in
// rank order; the published record verifies and fails once changed; the
// reconciler finds no drift.
func TestDrawEndToEnd(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI()
	fast := []string{"SECKILL_DRAW_EVERY=200ms", "SECKILL_CLOSER_EVERY=200ms"}
	first := p.StartConsumer(append(fast, "SECKILL_FAILPOINTS=draw-before-commit")...)
	// The window outlasts the consumer group's rebalance after two of its
	// members died (the last orders come up to ~20 s after the first).
	const entrants, window = 5000, 40 * time.Second
	closeIn := 40 * time.Second // 5,000 entries under -race on a loaded machine: below 400/s
	s := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{20, 20, 20, 20, 20}, EntriesCloseIn: closeIn, PaymentWindow: window})
	closes := time.Now().Add(closeIn)

	var page struct {
		Mode string `json:"mode"`
		Draw struct {
			State      string `json:"state"`
			Entries    int64  `json:"entries"`
			Commitment string `json:"commitment"`
		} `json:"draw"`
	}
	salePage := func() {
		t.Helper()
		if code, err := api.Do("GET", fmt.Sprintf("/api/v1/activities/%d", s.ActivityID), 0, "", nil, nil, &page); err != nil || code != 200 {
			t.Fatalf("sale page: %d %v", code, err)
		}
	}
	salePage()
	if page.Mode != "draw" || page.Draw.State != draw.StateOpen || len(page.Draw.Commitment) != 64 {
		t.Fatalf("sale page before entries: %+v", page)
	}
	commitment := page.Draw.Commitment

	// An order placed directly is refused.
	if pl, err := api.PlaceOrderItem(1, "direct", s.ActivityID, s.Items[0].ID, 1); err != nil || pl.Code != 409 || pl.Error != "DRAW_SALE" {
		t.Fatalf("direct order on a draw sale: %+v %v", pl, err)
	}

	// Entrants want the sizes unevenly; one in ten sends the request twice.
	weights := []int{35, 25, 20, 12, 8}
	sizeOf := func(u int64) int64 {
		n := int(u % 100)
		for i, w := range weights {
			if n < w {
				return s.Items[i].ID
			}
			n -= w
		}
		return s.Items[0].ID
	}
	var (
		mu      sync.Mutex
		ids     = map[int64]string{}
		wg      sync.WaitGroup
		sem     = make(chan struct{}, 48)
		started = time.Now()
	)
	for u := int64(1); u <= entrants; u++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			e := enter(t, api, s, u, sizeOf(u))
			if e.Code != 201 || !draw.ValidEntryID(e.EntryID) || e.State != "ENTERED" {
				t.Errorf("entrant %d: %+v", u, e)
				return
			}
			if u%10 == 0 {
				again := enter(t, api, s, u, s.Items[4].ID)
				if again.Code != 200 || again.EntryID != e.EntryID || again.ItemID != e.ItemID {
					t.Errorf("entrant %d entering again: %+v, first %+v", u, again, e)
				}
			}
			mu.Lock()
			ids[u] = e.EntryID
			mu.Unlock()
		}()
	}
	wg.Wait()
	took := time.Since(started)
	t.Logf("%d entries in %v (%.0f/s)", entrants, took.Round(time.Millisecond), float64(entrants)/took.Seconds())
	if time.Now().After(closes.Add(-time.Second)) {
		t.Fatalf("the entries took %v: past the close", took)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The first consumer dies inside the draw's transaction: nothing of it
	// stays.
	select {
	case <-first.Done():
	case <-time.After(time.Until(closes) + 20*time.Second):
		t.Fatal("the consumer with the draw failpoint did not die at the draw")
	}
	if got := enter(t, api, s, entrants+1, s.Items[0].ID); got.Code != 409 || got.Error.Code != "ACTIVITY_NOT_ACTIVE" {
		t.Fatalf("a new entry after the close: %+v", got)
	}
	if got := enter(t, api, s, 7, s.Items[0].ID); got.Code != 200 || got.EntryID != ids[7] {
		t.Fatalf("entering again after the close: %+v, want entry %s", got, ids[7])
	}
	if n := p.Count("SELECT COUNT(*) FROM draw_results WHERE activity_id = ?", s.ActivityID); n != 0 {
		t.Fatalf("%d ranking rows after a draw killed before its commit", n)
	}
	salePage()
	if page.Draw.State != draw.StateClosed || page.Draw.Entries != entrants {
		t.Fatalf("sale page after the close: %+v", page.Draw)
	}

	// The second draws, then dies after reserving its first winner's order
	// and before publishing it.
	second := p.StartConsumer(append(fast, "SECKILL_FAILPOINTS=draw-after-reserve")...)
	select {
	case <-second.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the consumer with the reserve failpoint did not die")
	}
	// The drawer places 16 winners at once: up to 16 numbered, none of
	// them published.
	numbered := p.Count("SELECT COUNT(*) FROM draw_results WHERE activity_id = ? AND order_no IS NOT NULL", s.ActivityID)
	issued := p.Count("SELECT COUNT(*) FROM draw_results WHERE activity_id = ? AND issued = 1", s.ActivityID)
	if numbered < 1 || numbered > 16 || issued != 0 {
		t.Fatalf("%d picks numbered and %d issued when the first reserve died, want 1-16 and none", numbered, issued)
	}
	p.StartConsumer(fast...)

	waittest.Until(t, 60*time.Second, "every winner's order CREATED", func() bool {
		return p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'CREATED'", s.ActivityID) == 100
	})
	var spread struct{ First, Last time.Time }
	p.DB.Gorm().Raw("SELECT MIN(created_at) AS first, MAX(created_at) AS last FROM orders WHERE activity_id = ?", s.ActivityID).Scan(&spread)
	t.Logf("winners' orders created over %v", spread.Last.Sub(spread.First))
	rows := ranking(t, p, s.ActivityID)
	if len(rows) != entrants {
		t.Fatalf("ranking of %d entries, want %d", len(rows), entrants)
	}
	winners, alternates := bySize(rows, draw.Won), bySize(rows, draw.Alternate)
	for _, it := range s.Items {
		if len(winners[it.ID]) != 20 {
			t.Errorf("size %d: %d winners, want its stock 20", it.ID, len(winners[it.ID]))
		}
		for _, w := range winners[it.ID] {
			if w.OrderNo == "" || w.Status != "CREATED" {
				t.Errorf("winner %s: order %q %s", w.EntryID, w.OrderNo, w.Status)
			}
		}
		for _, a := range alternates[it.ID] {
			if a.OrderNo != "" {
				t.Errorf("alternate %s of size %d has order %s while every winner holds theirs", a.EntryID, it.ID, a.OrderNo)
			}
		}
	}
	if n := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ?", s.ActivityID); n != 100 {
		t.Errorf("%d orders in the sale, want 100: one a winner", n)
	}

	// The published record verifies, and fails once changed.
	var rec draw.Record
	if code, err := api.Do("GET", fmt.Sprintf("/api/v1/activities/%d/draw", s.ActivityID), 0, "", nil, nil, &rec); err != nil || code != 200 {
		t.Fatalf("draw record: %d %v", code, err)
	}
	if rec.State != draw.StateDrawn || rec.Commitment != commitment || len(rec.Entries) != entrants {
		t.Fatalf("draw record: state %s, commitment %s (page said %s), %d entries", rec.State, rec.Commitment, commitment, len(rec.Entries))
	}
	for i, e := range rec.Entries {
		if e.ID != rows[i].EntryID || e.Outcome != rows[i].Outcome {
			t.Fatalf("record rank %d is %+v, MySQL's %+v", i+1, e, rows[i])
		}
	}
	verify := p.StartArgs("reconciler", []string{"verify-draw", "--url", api.URL, "--activity", strconv.FormatInt(s.ActivityID, 10)}).Wait(t, time.Minute)
	if verify.Code != 0 || !strings.Contains(verify.Stdout, "holds") {
		t.Fatalf("verify-draw on the published record: exit %d\n%s%s", verify.Code, verify.Stdout, verify.Stderr)
	}
	dir := t.TempDir()
	for name, change := range map[string]func(*draw.Record){
		"seed":  func(r *draw.Record) { r.Seed = draw.NewSeed().String() },
		"entry": func(r *draw.Record) { r.Entries[2500].ItemID += 100 },
		"order": func(r *draw.Record) { r.Entries[0], r.Entries[1] = r.Entries[1], r.Entries[0] },
		"none":  func(*draw.Record) {},
	} {
		c := rec
		c.Entries = slices.Clone(rec.Entries)
		change(&c)
		b, _ := json.Marshal(c)
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		res := p.StartArgs("reconciler", []string{"verify-draw", "--file", path}).Wait(t, time.Minute)
		if want := map[bool]int{true: 0, false: 1}[name == "none"]; res.Code != want {
			t.Errorf("verify-draw of the record with its %s changed: exit %d, want %d\n%s", name, res.Code, want, res.Stdout)
		}
	}

	// Winners of sizes 2-5 pay; size 1's do not, so its first 20 alternates
	// get its units when the closer closes their orders, and no others.
	pay := func(r pipelinetest.Pick) {
		t.Helper()
		u, _ := strconv.ParseInt(r.UserID, 10, 64)
		if code, err := api.Do("POST", "/api/v1/orders/"+r.OrderNo+"/pay", u, "", nil, nil, nil); err != nil || code != 200 {
			t.Errorf("pay %s as %s: %d %v", r.OrderNo, r.UserID, code, err)
		}
	}
	for _, it := range s.Items[1:] {
		for _, w := range winners[it.ID] {
			pay(w)
		}
	}
	size1 := s.Items[0].ID
	promoted := func(item int64) []pipelinetest.Pick {
		var out []pipelinetest.Pick
		for _, r := range ranking(t, p, s.ActivityID) {
			if r.Outcome == draw.Alternate && r.ItemID == item && r.OrderNo != "" {
				out = append(out, r)
			}
		}
		return out
	}
	waittest.Until(t, window+30*time.Second, "size 1's first 20 alternates given orders", func() bool {
		got := promoted(size1)
		return len(got) == 20 && !slices.ContainsFunc(got, func(r pipelinetest.Pick) bool { return r.Status != "CREATED" })
	})
	got := promoted(size1)
	for i, r := range got {
		if r.EntryID != alternates[size1][i].EntryID {
			t.Fatalf("size 1's promoted alternate %d is %s (rank %d), want %s (rank %d): not in rank order",
				i+1, r.EntryID, r.Rank, alternates[size1][i].EntryID, alternates[size1][i].Rank)
		}
	}
	// One of them cancels: the 21st gets the unit; the others pay.
	cancelled := got[0]
	u, _ := strconv.ParseInt(cancelled.UserID, 10, 64)
	if code, err := api.Do("POST", "/api/v1/orders/"+cancelled.OrderNo+"/cancel", u, "", nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("cancel %s: %d %v", cancelled.OrderNo, code, err)
	}
	for _, r := range got[1:] {
		pay(r)
	}
	waittest.Until(t, 30*time.Second, "the cancelled unit given to size 1's 21st alternate", func() bool {
		got := promoted(size1)
		return len(got) == 21 && got[20].EntryID == alternates[size1][20].EntryID && got[20].Status == "CREATED"
	})
	pay(promoted(size1)[20])

	// A restock of size 2 goes to its first three alternates.
	size2 := s.Items[1].ID
	if r := restock(t, api, size2, "draw-restock", 3); r.Code != 200 && r.Code != 201 {
		t.Fatalf("restock: %+v", r)
	}
	s.Items[1].Stock += 3
	waittest.Until(t, 30*time.Second, "the restocked units given to size 2's first 3 alternates", func() bool {
		got := promoted(size2)
		return len(got) == 3 && !slices.ContainsFunc(got, func(r pipelinetest.Pick) bool { return r.Status != "CREATED" })
	})
	for i, r := range promoted(size2) {
		if r.EntryID != alternates[size2][i].EntryID {
			t.Fatalf("size 2's promoted alternate %d is rank %d, want rank %d", i+1, r.Rank, alternates[size2][i].Rank)
		}
		pay(r)
	}
	for _, it := range s.Items[2:] {
		if got := promoted(it.ID); len(got) != 0 {
			t.Errorf("size %d: %d alternates promoted, though all its winners paid", it.ID, len(got))
		}
	}

	// What the buyers see.
	userOf := func(r pipelinetest.Pick) int64 { u, _ := strconv.ParseInt(r.UserID, 10, 64); return u }
	w := winners[s.Items[2].ID][0]
	if e := myEntry(t, api, s, userOf(w)); e.State != "WON" || e.OrderNo != w.OrderNo || e.EntryID != w.EntryID {
		t.Errorf("a winner's entry: %+v, want WON with %s", e, w.OrderNo)
	}
	if e := myEntry(t, api, s, userOf(alternates[size1][5])); e.State != "WON" || e.OrderNo == "" {
		t.Errorf("a promoted alternate's entry: %+v", e)
	}
	for i, a := range alternates[s.Items[3].ID][:3] {
		if e := myEntry(t, api, s, userOf(a)); e.State != "ALTERNATE" || e.AlternateRank != int64(i+1) {
			t.Errorf("size 4's alternate %d: %+v", i+1, e)
		}
	}
	if e := myEntry(t, api, s, userOf(alternates[size2][3])); e.State != "ALTERNATE" || e.AlternateRank != 1 {
		t.Errorf("size 2's next alternate after 3 promotions: %+v, want rank 1", e)
	}

	// The pipeline agrees with itself.
	p.WaitSaleDrained(s, 30*time.Second)
	if n := p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'PAID'", s.ActivityID); n != 103 {
		t.Errorf("%d paid orders, want 103 (100 units and 3 restocked)", n)
	}
	p.Check(s)
	act := strconv.FormatInt(s.ActivityID, 10)
	if r := p.Reconcile("--activity", act); r.Code != 0 || !strings.Contains(r.Stdout, "activity "+act+": holds (5000 entries, 100 won, 24 alternates") {
		t.Errorf("reconciler after the draw and its roll-downs: exit %d\n%s", r.Code, r.Stdout)
	}

	// After the end, an alternate still waiting was not selected.
	if code, err := api.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/end", s.ActivityID), 1, auth.RoleAdmin, nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("end: %d %v", code, err)
	}
	waittest.Until(t, 5*time.Second, "an alternate NOT_SELECTED after the end", func() bool {
		return myEntry(t, api, s, userOf(alternates[s.Items[4].ID][0])).State == "NOT_SELECTED"
	})
	// A ranking changed in MySQL after the draw no longer recomputes: the
	// reconciler says so.
	last := alternates[s.Items[4].ID][len(alternates[s.Items[4].ID])-1]
	if err := p.DB.Gorm().Exec("UPDATE draw_results SET outcome = 'WON' WHERE entry_id = ?", last.EntryID).Error; err != nil {
		t.Fatal(err)
	}
	if r := p.Reconcile("--activity", act); r.Code != 1 || !strings.Contains(r.Stdout, "the record does not recompute") {
		t.Errorf("reconciler after a pick was changed: exit %d\n%s", r.Code, r.Stdout)
	}
}
