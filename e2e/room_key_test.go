package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
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
