package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/draw"
)

// The draw holds its operator to the commitment published when the sale
// was made. Two draw sales, A and B: the sale page and every entry's
// answer carry the same commitment; MySQL refuses an operator's UPDATE of
// the seed or the commitment, before the first entry and after it. The
// buyers keep their entries' answers as receipts, and verify-draw with
// them holds for A; a receipt whose commitment was changed, or whose entry
// is not in the record, fails it. For B the operator goes further: they
// drop MySQL's guard and, before the close, swap the seed (verify-draw
// fails: the stored commitment no longer matches), then the commitment to
// match (the record recomputes by itself, as it did in issue 41; the
// buyers' receipts catch it). A restock of A during its entries is in A's
// record with its time.
func TestDrawCommitmentHoldsTheOperator(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer("SECKILL_DRAW_EVERY=200ms", "SECKILL_CLOSER_EVERY=200ms")
	const closeIn = 8 * time.Second
	opts := pipelinetest.SaleOptions{Sizes: []int64{2, 1}, EntriesCloseIn: closeIn, PaymentWindow: time.Minute}
	a, b := api.CreateSaleWith(0, opts), api.CreateSaleWith(0, opts)
	closes := time.Now().Add(closeIn)

	pageCommitment := func(s pipelinetest.Sale) string {
		t.Helper()
		var page struct {
			Draw struct {
				Commitment string `json:"commitment"`
			} `json:"draw"`
		}
		if code, err := api.Do("GET", fmt.Sprintf("/api/v1/activities/%d", s.ActivityID), 0, "", nil, nil, &page); err != nil || code != 200 {
			t.Fatalf("sale page: %d %v", code, err)
		}
		return page.Draw.Commitment
	}
	commitment := map[int64]string{a.ActivityID: pageCommitment(a), b.ActivityID: pageCommitment(b)}
	for id, c := range commitment {
		if len(c) != 64 {
			t.Fatalf("sale %d's page shows commitment %q", id, c)
		}
	}
	// The operator's own UPDATEs, straight to MySQL.
	g := p.DB.Gorm()
	refused := func(s pipelinetest.Sale, when string) {
		t.Helper()
		for what, q := range map[string]string{
			"seed":       "UPDATE activity_draws SET seed = UNHEX(SHA2(RAND(), 256)) WHERE activity_id = ?",
			"commitment": "UPDATE activity_draws SET commitment = SHA2(RAND(), 256) WHERE activity_id = ?",
		} {
			if err := g.Exec(q, s.ActivityID).Error; err == nil {
				t.Fatalf("%s: the operator's UPDATE of sale %d's %s went through", when, s.ActivityID, what)
			}
		}
		if got := pageCommitment(s); got != commitment[s.ActivityID] {
			t.Fatalf("%s: sale %d's page shows commitment %s, first %s", when, s.ActivityID, got, commitment[s.ActivityID])
		}
	}
	refused(a, "before any entry")

	// Three buyers a sale enter; each keeps the answer as received.
	dir := t.TempDir()
	receipts := map[int64][]string{}
	for _, s := range []pipelinetest.Sale{a, b} {
		for u := int64(1); u <= 3; u++ {
			var raw json.RawMessage
			code, err := api.Do("POST", fmt.Sprintf("/api/v1/activities/%d/entries", s.ActivityID), u, "", nil,
				map[string]any{"item_id": s.Items[u%2].ID}, &raw)
			var e pipelinetest.Entry
			if err == nil {
				err = json.Unmarshal(raw, &e)
			}
			if err != nil || code != 201 || e.Commitment != commitment[s.ActivityID] {
				t.Fatalf("sale %d, entrant %d: %d %s %v, want 201 with commitment %s", s.ActivityID, u, code, raw, err, commitment[s.ActivityID])
			}
			path := filepath.Join(dir, fmt.Sprintf("receipt-%d-%d.json", s.ActivityID, u))
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			receipts[s.ActivityID] = append(receipts[s.ActivityID], path)
		}
		if e := myEntry(t, api, s, 2); e.Commitment != commitment[s.ActivityID] {
			t.Fatalf("sale %d: the buyer's entry shows commitment %q, want %s", s.ActivityID, e.Commitment, commitment[s.ActivityID])
		}
	}
	refused(a, "after the first entry")
	refused(b, "after the first entry")
	// A restock of A's first size during its entries moves the stock its
	// draw gives out: its record lists it, with its time.
	restockedAt := time.Now()
	if r := restock(t, api, a.Items[0].ID, "during-entries", 1); r.Code != 200 || r.Replayed {
		t.Fatalf("restock during the entries: %+v", r)
	}

	// B's operator drops the guard and swaps the seed before the close.
	if time.Now().After(closes.Add(-time.Second)) {
		t.Fatal("the entries took past the close: no time left to swap B's seed before the draw")
	}
	if err := g.Exec("DROP TRIGGER activity_draws_fixed").Error; err != nil {
		t.Fatal(err)
	}
	if err := g.Exec("UPDATE activity_draws SET seed = UNHEX(SHA2('the operator''s own', 256)) WHERE activity_id = ?", b.ActivityID).Error; err != nil {
		t.Fatal(err)
	}

	record := func(s pipelinetest.Sale) draw.Record {
		t.Helper()
		var rec draw.Record
		if code, err := api.Do("GET", fmt.Sprintf("/api/v1/activities/%d/draw", s.ActivityID), 0, "", nil, nil, &rec); err != nil || code != 200 {
			t.Fatalf("draw record: %d %v", code, err)
		}
		return rec
	}
	for _, s := range []pipelinetest.Sale{a, b} {
		waittest.Until(t, time.Until(closes)+30*time.Second, "the draw DRAWN", func() bool { return record(s).State == draw.StateDrawn })
	}
	verify := func(s pipelinetest.Sale, paths ...string) pipelinetest.RunResult {
		t.Helper()
		args := []string{"verify-draw", "--url", api.URL, "--activity", strconv.FormatInt(s.ActivityID, 10)}
		for _, f := range paths {
			args = append(args, "--receipt", f)
		}
		return p.StartArgs("reconciler", args).Wait(t, time.Minute)
	}
	expect := func(what string, r pipelinetest.RunResult, code int, line string) {
		t.Helper()
		if r.Code != code || !strings.Contains(r.Stdout, line) {
			t.Errorf("verify-draw %s: exit %d, want %d with %q\n%s%s", what, r.Code, code, line, r.Stdout, r.Stderr)
		}
	}

	// A: the genuine receipts hold, one or many; the restock is shown.
	recA := record(a)
	if len(recA.Restocks) != 1 || recA.Restocks[0].ItemID != a.Items[0].ID || recA.Restocks[0].Quantity != 1 ||
		recA.Restocks[0].At.Before(restockedAt.Add(-time.Second)) || !recA.Restocks[0].At.Before(closes) || recA.Sizes[0].Stock != 3 {
		t.Errorf("A's record: restocks %+v, sizes %+v; want the one restock of item %d during the entries, stock 3", recA.Restocks, recA.Sizes, a.Items[0].ID)
	}
	if rb := record(b); len(rb.Restocks) != 0 {
		t.Errorf("B's record lists restocks it never had: %+v", rb.Restocks)
	}
	expect("of A with its receipts", verify(a, receipts[a.ActivityID]...), 0, "3 receipts name that commitment")
	expect("of A shows its restock", verify(a), 0, fmt.Sprintf("restocked before the draw: item %d +1 at", a.Items[0].ID))
	expect("of A with one receipt", verify(a, receipts[a.ActivityID][0]), 0, "1 receipts name that commitment")
	edited := func(path, name string, edit func(map[string]any)) string {
		t.Helper()
		body, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		body, _ = json.Marshal(m)
		out := filepath.Join(dir, name)
		if err := os.WriteFile(out, body, 0o600); err != nil {
			t.Fatal(err)
		}
		return out
	}
	other := edited(receipts[a.ActivityID][1], "other-commitment.json", func(m map[string]any) { m["commitment"] = draw.NewSeed().Commitment() })
	expect("of A with a receipt of another commitment", verify(a, receipts[a.ActivityID][0], other), 1, "commitment: entry ")
	missing := edited(receipts[a.ActivityID][2], "missing-entry.json", func(m map[string]any) {
		id := m["entry_id"].(string)
		m["entry_id"] = strings.Repeat("0", 8) + id[8:]
	})
	expect("of A with a receipt of an entry not in the record", verify(a, missing), 1, "is missing from the record")
	refusal := filepath.Join(dir, "refusal.json")
	if err := os.WriteFile(refusal, []byte(`{"error":{"code":"ACTIVITY_NOT_ACTIVE"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := verify(a, refusal); r.Code != 2 || !strings.Contains(r.Stderr, "not an entry's receipt") {
		t.Errorf("verify-draw with a refusal for a receipt: exit %d, want 2 saying it is no receipt\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// B: its record's seed no longer matches the commitment it was made
	// with, receipts or not.
	expect("of B with its seed swapped", verify(b), 1, "commitment: SHA-256 of the seed")
	if got := record(b).Commitment; got != commitment[b.ActivityID] {
		t.Errorf("B's record publishes commitment %s, the one it was made with is %s", got, commitment[b.ActivityID])
	}
	// The operator makes the commitment match the new seed: the record
	// recomputes by itself; the buyers' receipts say it is not their draw.
	if err := g.Exec("UPDATE activity_draws SET commitment = SHA2(seed, 256) WHERE activity_id = ?", b.ActivityID).Error; err != nil {
		t.Fatal(err)
	}
	api2 := p.StartAPI() // the first instance keeps the drawn record it published
	args := []string{"verify-draw", "--url", api2.URL, "--activity", strconv.FormatInt(b.ActivityID, 10)}
	expect("of B by its own record", p.StartArgs("reconciler", args).Wait(t, time.Minute), 0, "holds")
	for _, f := range receipts[b.ActivityID] {
		args = append(args, "--receipt", f)
	}
	r := p.StartArgs("reconciler", args).Wait(t, time.Minute)
	expect("of B with its buyers' receipts", r, 1, "was answered with "+commitment[b.ActivityID])
	if n := strings.Count(r.Stdout, "was answered with"); n != 3 {
		t.Errorf("verify-draw of B names %d receipts of the commitment B was made with, want 3:\n%s", n, r.Stdout)
	}
}

// A draw's entries close at least the payment window before the sale
// ends, at its making and after a change of its times: the winners have
// their whole window to pay.
func TestDrawCloseLeavesThePaymentWindow(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	var item struct {
		ItemID int64 `json:"item_id"`
	}
	if code, err := api.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil, map[string]any{"name": "sneaker", "stock": 2}, &item); err != nil || code != 201 {
		t.Fatalf("create item: %d %v", code, err)
	}
	start := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Millisecond)
	sale := func(closes, ends time.Time) map[string]any {
		return map[string]any{"item_id": item.ItemID, "starts_at": start, "ends_at": ends, "payment_window_seconds": 600,
			"mode": "draw", "entries_close_at": closes}
	}
	type answer struct {
		ActivityID int64 `json:"activity_id"`
		Error      struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	closes := start.Add(30 * time.Minute)
	for _, ends := range []time.Time{closes.Add(time.Millisecond), closes.Add(9 * time.Minute)} {
		var got answer
		code, err := api.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil, sale(closes, ends), &got)
		if err != nil || code != 400 || !strings.Contains(got.Error.Message, "payment window (10m0s) before ends_at") {
			t.Errorf("a draw closing %v before its end: %d %+v %v, want 400 naming the payment window", ends.Sub(closes), code, got, err)
		}
	}
	var made answer
	if code, err := api.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil, sale(closes, closes.Add(10*time.Minute)), &made); err != nil || code != 201 {
		t.Fatalf("a draw closing its payment window before its end: %d %+v %v", code, made, err)
	}
	var got answer
	code, err := api.Do("PATCH", fmt.Sprintf("/admin/v1/activities/%d", made.ActivityID), 1, auth.RoleAdmin, nil,
		map[string]any{"ends_at": closes.Add(5 * time.Minute)}, &got)
	if err != nil || code != 400 || !strings.Contains(got.Error.Message, "payment window (10m0s) before ends_at") {
		t.Errorf("a PATCH ending the draw 5 minutes after its close: %d %+v %v, want 400 naming the payment window", code, got, err)
	}
}
