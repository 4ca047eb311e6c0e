package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
)

// jsonLogLine is one JSON log line.
type jsonLogLine map[string]any

func (l jsonLogLine) str(k string) string { s, _ := l[k].(string); return s }

// logLines parses a process's JSON log; lines that are not JSON are skipped.
func logLines(log string) []jsonLogLine {
	var out []jsonLogLine
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l jsonLogLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// findLine polls proc's log until a line with msg and every attribute in
// attrs appears, and returns it.
func findLine(t *testing.T, proc *pipelinetest.Proc, msg string, attrs map[string]string) jsonLogLine {
	t.Helper()
	var found jsonLogLine
	waittest.Until(t, 30*time.Second, fmt.Sprintf("%s to log %q with %v", proc.Name, msg, attrs), func() bool {
	lines:
		for _, l := range logLines(proc.Log()) {
			if l.str("msg") != msg {
				continue
			}
			for k, v := range attrs {
				if l.str(k) != v {
					continue lines
				}
			}
			found = l
			return true
		}
		return false
	})
	return found
}

// The API echoes a valid incoming X-Request-ID, replaces an invalid one,
// and the id follows the order: the api's "order reserved", the
// consumer's "order created" and the pay request's "order paid" lines,
// each at INFO, as JSON, with order_no, request_id, user_id and item_id.
func TestRequestIDFollowsTheOrder(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	consumer := p.StartConsumer()
	sale := api.CreateSale(5, 1)

	generated := regexp.MustCompile(`^[0-9a-f]{16}$`)
	for _, c := range []struct{ sent, want string }{
		{"", ""},
		{"bad id with spaces", ""},
		{strings.Repeat("x", 65), ""},
		{"trace-0042.a_b", "trace-0042.a_b"},
	} {
		req, _ := http.NewRequest("GET", api.URL+"/healthz", nil)
		if c.sent != "" {
			req.Header.Set("X-Request-ID", c.sent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("X-Request-ID")
		if (c.want != "" && got != c.want) || (c.want == "" && !generated.MatchString(got)) {
			t.Errorf("sent X-Request-ID %q, got back %q", c.sent, got)
		}
	}

	const user, rid = 7, "checkout-7-abc"
	var placed struct {
		OrderNo string `json:"order_no"`
	}
	code, err := api.Do("POST", "/api/v1/orders", user, "", map[string]string{"Idempotency-Key": "k7", "X-Request-ID": rid},
		map[string]any{"activity_id": sale.ActivityID}, &placed)
	if err != nil || code != 202 {
		t.Fatalf("place: %d %v", code, err)
	}
	p.WaitFinal(map[string]int64{placed.OrderNo: user}, 30*time.Second)

	want := map[string]string{"order_no": placed.OrderNo, "request_id": rid, "level": "INFO"}
	for _, c := range []struct {
		proc   *pipelinetest.Proc
		msg    string
		status string
	}{
		{api.Proc, "order reserved", "PENDING"},
		{consumer, "order created", "CREATED"},
	} {
		l := findLine(t, c.proc, c.msg, want)
		if l.str("status") != c.status || l.str("user_id") != strconv.Itoa(user) || l["item_id"] != float64(sale.ItemID) {
			t.Errorf("%s %q line: %v", c.proc.Name, c.msg, l)
		}
	}

	const payID = "pay-7-xyz"
	code, err = api.Do("POST", "/api/v1/orders/"+placed.OrderNo+"/pay", user, "", map[string]string{"X-Request-ID": payID}, nil, nil)
	if err != nil || code != 200 {
		t.Fatalf("pay: %d %v", code, err)
	}
	l := findLine(t, api.Proc, "order paid", map[string]string{"order_no": placed.OrderNo, "request_id": payID, "level": "INFO"})
	if l.str("status") != "PAID" || l.str("user_id") != strconv.Itoa(user) || l["item_id"] != float64(sale.ItemID) {
		t.Errorf("order paid line: %v", l)
	}

	// CLOSED: another buyer's order, cancelled.
	const other, cancelID = 8, "cancel-8-xyz"
	code, err = api.Do("POST", "/api/v1/orders", other, "", map[string]string{"Idempotency-Key": "k8"},
		map[string]any{"activity_id": sale.ActivityID}, &placed)
	if err != nil || code != 202 {
		t.Fatalf("place: %d %v", code, err)
	}
	p.WaitFinal(map[string]int64{placed.OrderNo: other}, 30*time.Second)
	code, err = api.Do("POST", "/api/v1/orders/"+placed.OrderNo+"/cancel", other, "", map[string]string{"X-Request-ID": cancelID}, nil, nil)
	if err != nil || code != 200 {
		t.Fatalf("cancel: %d %v", code, err)
	}
	l = findLine(t, api.Proc, "order closed", map[string]string{"order_no": placed.OrderNo, "request_id": cancelID, "level": "INFO"})
	if l.str("status") != "CLOSED" || l.str("reason") != "CANCELLED" || l.str("user_id") != strconv.Itoa(other) {
		t.Errorf("order closed line: %v", l)
	}
}
