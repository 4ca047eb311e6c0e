//go:build browser

package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
)

// A buyer who ordered (by the API, the answer lost) and opens the waiting
// page after their admission expired sees their order, to be paid, not
// "Your turn expired before you bought".
func TestWaitingPageShowsTheOrderAfterTheAdmission(t *testing.T) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	s := api.CreateSaleWith(1, pipelinetest.SaleOptions{
		WaitingRoom: map[string]any{"admit_per_second": 10, "admission_ttl_seconds": 10}})
	const buyer = 1101
	queue(t, api, "POST", s, buyer)
	var adm queueAnswer
	waittest.Until(t, 10*time.Second, "the buyer admitted", func() bool {
		adm = pollQueue(t, api, s, buyer)
		return adm.State == "ADMITTED"
	})
	pl := orderAdmitted(t, api, s, buyer, 0, "lost", adm.Admission)
	if pl.Code != 202 {
		t.Fatalf("the admitted buyer's order: %+v", pl)
	}
	time.Sleep(time.Until(adm.AdmissionExpiresAt.Add(500 * time.Millisecond)))

	page := tab(t, browser(t), fmt.Sprintf("%s/sale/%d#token=%s", api.URL, s.ActivityID, pipelinetest.Token(buyer, "")))
	waitPhase(t, page, "ordered", 20*time.Second)
	if got := text(t, page, "#order-no"); got != pl.OrderNo {
		t.Fatalf("the page shows the order %q, want %s", got, pl.OrderNo)
	}
	if st := text(t, page, "#queue-state"); strings.Contains(st, "expired") {
		t.Fatalf("the page says %q to a buyer holding an order", st)
	}
	waittest.Until(t, 30*time.Second, "the page to show CREATED", func() bool {
		return text(t, page, "#order-status") == "CREATED"
	})
	screenshot(t, page, "ordered-after-expiry")
}
