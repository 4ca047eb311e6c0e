package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// `reconciler check-events` reads a listener's output and holds it to
// MySQL: the outbox's events, each once, keep every promise (exit 0); the
// same less the payment of an order name it (exit 1, and the report says
// which); a file that is not a listener's, or no sale named, cannot be
// checked (exit 2).
func TestCheckEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := mysqltest.New(t)
	a := db.OpenSale(t, 10, order.Money{})
	gen := order.NewNumberGenerator()
	var reqs []order.FulfilRequest
	for u := 1; u <= 3; u++ {
		reqs = append(reqs, order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: gen.Next(a.ItemID),
			IdempotencyKey: "k", UserID: strconv.Itoa(u), ItemID: a.ItemID, ActivityID: a.ID, Quantity: 1, ReservedAt: time.Now()},
			PayDeadline: time.Now().Add(time.Hour)})
	}
	if _, err := mysqltest.Fulfil(ctx, db.DB, reqs); err != nil {
		t.Fatal(err)
	}
	svc := &lifecycle.Service{Tx: db, Events: db.Outbox, DB: db.Orders, Payments: db.Payments, Log: slog.New(slog.DiscardHandler)}
	paid := reqs[0].Event
	if _, err := svc.Pay(ctx, paid.UserID, paid.OrderNo); err != nil {
		t.Fatal(err)
	}
	evs, _, err := db.Outbox.Since(ctx, 0, 100)
	if err != nil || len(evs) != 4 {
		t.Fatalf("the outbox: %v, %v", evs, err)
	}
	dir := t.TempDir()
	write := func(name string, evs []outbox.Event) string {
		var b bytes.Buffer
		for _, e := range evs {
			line, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(append(line, '\n'))
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	lookup := func(k string) (string, bool) {
		if k == "SECKILL_MYSQL_DSN" {
			return db.DSN, true
		}
		return "", false
	}
	check := func(args ...string) (string, int) {
		var out, errs bytes.Buffer
		err := run(ctx, append([]string{"check-events"}, args...), lookup, &out, &errs)
		return out.String() + errs.String(), exitCode(err)
	}
	sale := strconv.FormatInt(a.ID, 10)

	whole := write("whole.jsonl", evs)
	if out, code := check("--activity", sale, "--file", whole); code != exitAgree || !strings.Contains(out, "3 orders") ||
		!strings.Contains(out, "no broken promise") {
		t.Fatalf("the whole stream: exit %d\n%s", code, out)
	}
	var report struct {
		Orders, Committed int
		Violations        []any
	}
	if out, code := check("--activity", sale, "--file", whole, "--json"); code != exitAgree || json.Unmarshal([]byte(out), &report) != nil ||
		report.Orders != 3 || report.Committed != 4 || len(report.Violations) != 0 {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
	payment := outbox.IDOf(paid.OrderNo, 2)
	short := write("short.jsonl", evs[:3])
	if evs[3].ID != payment {
		t.Fatalf("the last event is %s, want the payment's", evs[3].ID)
	}
	if out, code := check("--activity", sale, "--file", short); code != exitDrift ||
		!strings.Contains(out, "missing "+paid.OrderNo+" "+payment) || !strings.Contains(out, "MySQL has PAID") {
		t.Fatalf("without the payment: exit %d\n%s", code, out)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("listening on http://127.0.0.1:8099\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--activity", sale, "--file", bad}, {"--file", whole}, {"--activity", sale}} {
		if out, code := check(args...); code != exitFailed {
			t.Fatalf("%q: exit %d, want %d\n%s", args, code, exitFailed, out)
		}
	}
}
