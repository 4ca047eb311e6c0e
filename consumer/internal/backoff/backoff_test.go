package backoff_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/consumer/internal/backoff"
	"github.com/seckill/seckill/internal/testkit/logstest"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newRecords(c *clock, buf *logstest.Buffer) *backoff.Records {
	return &backoff.Records{Pass: "sweep", Log: slog.New(slog.NewJSONHandler(buf, nil)), Now: c.now}
}

// A record that keeps failing is skipped for 5 s, then 10, 20, ... up to
// 5 min; each failure is one log line, and a success forgets it.
func TestBackoffDoubles(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	buf := &logstest.Buffer{}
	r := newRecords(c, buf)
	boom := errors.New("boom")
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, d := range want {
		if !r.Due("a") {
			t.Fatalf("failure %d: not due", i)
		}
		r.Failed("a", boom, "order_no", "a")
		c.advance(d - time.Millisecond)
		if r.Due("a") {
			t.Fatalf("failure %d: due before its backoff of %s ended", i, d)
		}
		if !r.Due("b") {
			t.Fatal("another record is not due")
		}
		c.advance(time.Millisecond)
	}
	if n := strings.Count(buf.String(), `"msg":"a record failed`); n != len(want) {
		t.Fatalf("%d failure lines, want %d", n, len(want))
	}
	if !strings.Contains(buf.String(), `"order_no":"a","err":"boom","retry_in":"5m0s"`) {
		t.Fatalf("log lines do not name the record, the error and the backoff:\n%s", buf)
	}
	r.Succeeded("a", "order_no", "a")
	r.Failed("a", boom)
	c.advance(5 * time.Second)
	if !r.Due("a") {
		t.Fatal("after a success the backoff did not start over at 5 s")
	}
}

// At most Limit records are remembered: a new failure beyond it forgets
// the record whose backoff ends first, and Waiting counts only records
// being skipped now, forgetting those long past their backoff.
func TestBackoffBoundedMemory(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	r := newRecords(c, &logstest.Buffer{})
	r.Limit = 3
	for i := range 5 {
		r.Failed(fmt.Sprint(i), errors.New("boom"))
		c.advance(time.Millisecond)
	}
	if n := r.Waiting(); n != 3 {
		t.Fatalf("Waiting = %d, want the limit 3", n)
	}
	for i, due := range []bool{true, true, false, false, false} { // 0 and 1 forgotten: their backoffs ended first
		if got := r.Due(fmt.Sprint(i)); got != due {
			t.Errorf("record %d: due %v, want %v", i, got, due)
		}
	}
	c.advance(6 * time.Minute)
	if n := r.Waiting(); n != 0 {
		t.Fatalf("Waiting = %d after every backoff ended, want 0", n)
	}
}

// A nil Records has every record due and records nothing.
func TestNilBackoff(t *testing.T) {
	var r *backoff.Records
	r.Failed("a", errors.New("boom"))
	r.Succeeded("a")
	r.Report()
	if !r.Due("a") || r.Waiting() != 0 {
		t.Fatal("a nil Records skips records")
	}
}
