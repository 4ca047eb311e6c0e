//go:build browser || console

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
)

// browser is a headless Debian Chromium (scripts/services tool chromium)
// for the test; each tab is a context made from it.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := os.Getenv("SECKILL_CHROMIUM")
	if bin == "" {
		bin = "/usr/bin/chromium"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no Chromium at %s (scripts/services tool chromium installs it): %v", bin, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox, chromedp.DisableGPU,
		// The machine's network is loopback only: nothing of Chromium's own.
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-sync", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// tab opens url in a new tab of the browser.
func tab(t *testing.T, b context.Context, url string) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return ctx
}

// waitPhase waits until the page's body says phase (data-phase).
func waitPhase(t *testing.T, ctx context.Context, phase string, within time.Duration) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if err := chromedp.Do(c, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`body[data-phase=%q]`, phase)))); err != nil {
		now, _ := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("body"), "data-phase"))
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#message")))
		t.Fatalf("the page never reached %q (it is at %q, saying %q): %v", phase, now.Value, msg, err)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// screenshot keeps the tab's picture in $SECKILL_SCREENSHOTS, when set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("SECKILL_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Error(err)
	}
}

// The waiting page in a real browser: a buyer joins before the start,
// waits, is admitted, buys and sees CREATED; a second tab of the same buyer
// shows the same place; a buyer who comes after the sell-out sees SOLD_OUT.
func TestWaitingPageInABrowser(t *testing.T) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	startsIn := 6 * time.Second
	s := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{1, 1}, StartsIn: startsIn,
		WaitingRoom: map[string]any{"admit_per_second": 50, "proof_of_work_bits": 8}})
	start := time.Now().Add(startsIn)
	page := func(user int64) string {
		return fmt.Sprintf("%s/sale/%d#token=%s", api.URL, s.ActivityID, pipelinetest.Token(user, ""))
	}
	b := browser(t)

	ann := tab(t, b, page(1001))
	waitPhase(t, ann, "waiting", 20*time.Second)
	if got := text(t, ann, "#position"); got != "drawn at the start" {
		t.Fatalf("before the start the page shows the place %q", got)
	}
	if got := text(t, ann, "#title"); got != "test item" {
		t.Fatalf("the page's title is %q, want the sale's name", got)
	}
	screenshot(t, ann, "waiting")
	again := tab(t, b, page(1001)) // the same buyer, a second tab
	waitPhase(t, again, "waiting", 20*time.Second)
	// The sale's other unit goes to a buyer who joined by the API.
	if code, err := api.Do("POST", fmt.Sprintf("/api/v1/activities/%d/queue", s.ActivityID), 1002, "", nil, nil, nil); err != nil || code != 400 {
		t.Fatalf("a join without proof of work: %d %v, want 400", code, err)
	}
	solveJoin(t, api, s, 1002)

	// From the start: admitted, a size, CREATED.
	if time.Now().Before(start) {
		time.Sleep(time.Until(start))
	}
	waitPhase(t, ann, "admitted", 20*time.Second)
	waitPhase(t, again, "admitted", 20*time.Second)
	if a, b := text(t, ann, "#position"), text(t, again, "#position"); a != b || !strings.HasPrefix(a, "#") {
		t.Fatalf("the buyer's two tabs show the places %q and %q", a, b)
	}
	screenshot(t, ann, "admitted")
	if err := chromedp.Do(ann, chromedp.Click(chromedp.CSS(`#sizes button:not([disabled])`))); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ann, "ordered", 10*time.Second)
	waittest.Until(t, 30*time.Second, "the page to show CREATED", func() bool {
		return text(t, ann, "#order-status") == "CREATED"
	})
	screenshot(t, ann, "created")

	// The other buyer takes the last unit; a buyer who comes now hears
	// SOLD_OUT.
	var q queuePlace
	waittest.Until(t, 10*time.Second, "buyer 1002 admitted", func() bool {
		q = queue(t, api, "GET", s, 1002)
		return q.State == "ADMITTED"
	})
	var left int64
	for _, it := range s.Items {
		snap, err := p.Store.Stock.Stock(context.Background(), s.Item(it.ID))
		if err != nil {
			t.Fatal(err)
		}
		if snap.Stock > 0 {
			if pl := orderAdmitted(t, api, s, 1002, it.ID, "last", q.Admission); pl.Code != 202 {
				t.Fatalf("the last unit: %+v", pl)
			}
		}
		left += snap.Stock
	}
	if left != 1 {
		t.Fatalf("%d units left after the page's order, want 1", left)
	}
	late := tab(t, b, page(1003))
	waitPhase(t, late, "sold_out", 20*time.Second)
	screenshot(t, late, "sold-out")
	if st := text(t, late, "#queue-state"); !strings.Contains(st, "Sold out") {
		t.Fatalf("the late buyer's page says %q", st)
	}
}

// solveJoin joins user to s's room with a solved proof of work.
func solveJoin(t *testing.T, api *pipelinetest.API, s pipelinetest.Sale, user int64) {
	t.Helper()
	path := fmt.Sprintf("/api/v1/activities/%d/queue", s.ActivityID)
	var ch struct {
		Challenge string `json:"challenge"`
		Bits      int    `json:"bits"`
	}
	if code, err := api.Do("GET", path+"/challenge", user, "", nil, nil, &ch); err != nil || code != 200 {
		t.Fatalf("challenge: %d %v", code, err)
	}
	solution := pipelinetest.Solve(ch.Challenge, ch.Bits)
	if code, err := api.Do("POST", path, user, "", nil, map[string]any{"challenge": ch.Challenge, "solution": solution}, nil); err != nil || code != 200 {
		t.Fatalf("join with the solution: %d %v", code, err)
	}
}
