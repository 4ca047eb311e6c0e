//go:build browser

package e2e_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
)

// A code_priority sale of one unit: ten buyers join its room by the api
// before the start, then a buyer opens the waiting page with a presale code
// in its address (#token=...&code=...). The page joins with the code, says
// it waits in the priority lane, and is admitted from the start while every
// buyer of the line still waits (the one unit is the holder's); it buys,
// and the line hears SOLD_OUT.
func TestWaitingPagePriorityLane(t *testing.T) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	startsIn := 6 * time.Second
	s := api.CreateSaleWith(1, pipelinetest.SaleOptions{StartsIn: startsIn, Access: "code_priority",
		WaitingRoom: map[string]any{"admit_per_second": 50}})
	start := time.Now().Add(startsIn)
	var gen struct {
		Codes []string `json:"codes"`
	}
	if code, err := api.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/codes", s.ActivityID), 1, auth.RoleAdmin,
		nil, map[string]any{"count": 1, "uses": 1}, &gen); err != nil || code != 201 || len(gen.Codes) != 1 {
		t.Fatalf("generate: %d %v %v", code, gen.Codes, err)
	}
	line := make([]int64, 10)
	for i := range line {
		line[i] = int64(2001 + i)
		queue(t, api, "POST", s, line[i])
	}
	b := browser(t)
	holder := tab(t, b, fmt.Sprintf("%s/sale/%d#token=%s&code=%s", api.URL, s.ActivityID, pipelinetest.Token(2100, ""),
		url.QueryEscape(gen.Codes[0])))
	waitPhase(t, holder, "waiting", 20*time.Second)
	if got := text(t, holder, "#queue-title"); got != "You are in the priority lane" {
		t.Fatalf("the holder's page says %q", got)
	}
	screenshot(t, holder, "priority-lane")
	if time.Now().Before(start) {
		time.Sleep(time.Until(start))
	}
	waitPhase(t, holder, "admitted", 20*time.Second)
	for _, u := range line {
		if q := queue(t, api, "GET", s, u); q.State != "WAITING" {
			t.Fatalf("buyer %d of the line: %s while the holder holds the one unit's admission", u, q.State)
		}
	}
	if err := chromedp.Do(holder, chromedp.Click(chromedp.CSS(`#sizes button:not([disabled])`))); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, holder, "ordered", 10*time.Second)
	waittest.Until(t, 30*time.Second, "the page to show CREATED", func() bool {
		return text(t, holder, "#order-status") == "CREATED"
	})
	waittest.Until(t, 10*time.Second, "the line to hear SOLD_OUT", func() bool {
		return queue(t, api, "GET", s, line[0]).State == "SOLD_OUT"
	})
}
