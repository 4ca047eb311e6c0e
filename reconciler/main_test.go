package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// env is one test's stores: a database, a key prefix, and one warmed item
// on sale.
type env struct {
	vars   map[string]string
	store  *stockredis.Store
	rdb    redis.UniversalClient
	db     *mysqltest.DB
	prefix string
	item   int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	db := mysqltest.New(t)
	it, err := db.Activities.CreateItem(ctx, "sneaker", 10)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	store := stockredis.New(rdb, prefix)
	if _, err := store.Stock.Warmup(ctx, reservation.One(it.ID), 2*time.Hour, func(context.Context) (int64, error) { return 10, nil }); err != nil {
		t.Fatal(err)
	}
	return &env{
		vars: map[string]string{
			"SECKILL_REDIS_ADDR":   redistest.Addr(),
			"SECKILL_REDIS_PREFIX": prefix,
			"SECKILL_MYSQL_DSN":    db.DSN,
			"SECKILL_LOG_LEVEL":    "debug",
		},
		store: store, rdb: rdb, db: db, prefix: prefix, item: it.ID,
	}
}

func (e *env) lookup(name string) (string, bool) {
	v, ok := e.vars[name]
	return v, ok
}

type result struct {
	code           int
	err            error
	stdout, stderr string
}

func (e *env) run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, e.lookup, &out, &errOut)
	return result{code: exitCode(err), err: err, stdout: out.String(), stderr: errOut.String()}
}

func TestReconcilerRunReportsDriftAndRepairs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	r := e.run(t)
	if r.code != exitAgree || !strings.Contains(r.stdout, "ITEM") || !strings.Contains(r.stdout, "1 items checked: 1 ok") {
		t.Fatalf("clean run: code %d, err %v\n%s\n%s", r.code, r.err, r.stdout, r.stderr)
	}

	e.rdb.IncrBy(ctx, e.store.Keys(reservation.One(e.item)).Stock(), 4)
	r = e.run(t, "--json", "--recheck", "10ms")
	var rep struct {
		ExitCode int              `json:"exit_code"`
		Items    []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, r.stdout)
	}
	if r.code != exitDrift || rep.ExitCode != 1 || rep.Items[0]["drift"] != 4.0 || rep.Items[0]["verdict"] != "drift" {
		t.Fatalf("drifted run: code %d, report %+v\n%s", r.code, rep, r.stderr)
	}
	if !strings.Contains(r.stderr, `"level":"ERROR+4"`) || !strings.Contains(r.err.Error(), "1 drift") {
		t.Fatalf("no alert line or summary error: %v\n%s", r.err, r.stderr)
	}

	r = e.run(t, "--repair", "--recheck", "10ms", "--item", "999999,"+itoa(e.item))
	if r.code != exitFailed {
		t.Fatalf("unknown item: code %d, want %d\n%s", r.code, exitFailed, r.stderr)
	}
	r = e.run(t, "--repair", "--recheck", "10ms", "--item", itoa(e.item))
	if r.code != exitAgree || !strings.Contains(r.stdout, "repaired") || !strings.Contains(r.stdout, "stock set from 14 to 10") {
		t.Fatalf("repair: code %d %v\n%s\n%s", r.code, r.err, r.stdout, r.stderr)
	}
	if r = e.run(t); r.code != exitAgree {
		t.Fatalf("after repair: code %d\n%s", r.code, r.stdout)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestReconcilerRunCannotRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		name string
		vars map[string]string
		args []string
		want int
	}{
		{"help", nil, []string{"-h"}, exitAgree},
		{"unknown flag", nil, []string{"--nope"}, exitFailed},
		{"stray argument", nil, []string{"now"}, exitFailed},
		{"bad id", nil, []string{"--item", "x"}, exitFailed},
		{"bad schedule", nil, []string{"--schedule", "every day"}, exitFailed},
		{"bad env", map[string]string{"SECKILL_PAYMENT_WINDOW": "soon"}, nil, exitFailed},
		{"Redis down", map[string]string{"SECKILL_REDIS_ADDR": "127.0.0.1:1"}, nil, exitFailed},
		{"MySQL down", map[string]string{"SECKILL_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/x"}, nil, exitFailed},
		{"unknown activity", nil, []string{"--activity", "424242"}, exitFailed},
	}
	for _, c := range cases {
		vars := map[string]string{}
		for k, v := range e.vars {
			vars[k] = v
		}
		for k, v := range c.vars {
			vars[k] = v
		}
		var out, errOut bytes.Buffer
		err := run(context.Background(), c.args, func(k string) (string, bool) { v, ok := vars[k]; return v, ok }, &out, &errOut)
		if got := exitCode(err); got != c.want {
			t.Fatalf("%s: exit %d (%v), want %d\n%s", c.name, got, err, c.want, errOut.String())
		}
	}
}

func TestReconcilerSecondInstanceIsTurnedAway(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	other := lock.New(e.rdb, lock.Options{Prefix: e.prefix, InstanceID: "other-reconciler"})
	l, err := other.TryLock(ctx, lockName)
	if err != nil {
		t.Fatal(err)
	}
	r := e.run(t)
	if r.code != exitBusy || !strings.Contains(r.err.Error(), "another reconciler is running") || r.stdout != "" {
		t.Fatalf("while held: code %d, err %v, stdout %q", r.code, r.err, r.stdout)
	}
	start := time.Now()
	if r = e.run(t, "--wait", "300ms"); r.code != exitBusy || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("--wait while held: code %d after %v", r.code, time.Since(start))
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		l.Release(ctx)
	}()
	if r = e.run(t, "--wait", "10s"); r.code != exitAgree {
		t.Fatalf("--wait until released: code %d %v\n%s", r.code, r.err, r.stderr)
	}
}

func TestReconcilerSchedule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut logstest.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--schedule", "@every 1s"}, e.lookup, &out, &errOut) }()
	// A bound, not a speed: on a loaded machine one run over a shared
	// database's items has taken seconds.
	waittest.Until(t, 45*time.Second, "two scheduled runs", func() bool {
		return strings.Count(out.String(), "items checked") >= 2
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("scheduled reconciler stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("scheduled reconciler did not stop")
	}
	if !strings.Contains(errOut.String(), "reconciler scheduled") || !strings.Contains(errOut.String(), "reconciler stopped") {
		t.Fatalf("log:\n%s", errOut.String())
	}
}

func TestReconcilerProgress(t *testing.T) {
	t.Parallel()
	var logBuf bytes.Buffer
	lp := &lineProgress{log: slog.New(slog.NewJSONHandler(&logBuf, nil))}
	lp.Start("checking", 5) // few items: silent
	for range 5 {
		lp.Step()
	}
	if logBuf.Len() != 0 {
		t.Fatalf("progress for 5 items: %s", logBuf.String())
	}
	lp.Start("checking", 100)
	for range 100 {
		lp.Step()
	}
	if n := strings.Count(logBuf.String(), "reconcile progress"); n != 10 {
		t.Fatalf("%d progress lines for 100 items, want 10:\n%s", n, logBuf.String())
	}

	var bar bytes.Buffer
	bp := &barProgress{w: &bar}
	bp.Start("checking", 50)
	for range 50 {
		bp.Step()
	}
	bp.Done()
	if !strings.Contains(bar.String(), "checking") {
		t.Fatalf("bar output %q", bar.String())
	}
	// Not a terminal: lines.
	if _, ok := newProgress(&bar, slog.Default()).(*lineProgress); !ok {
		t.Fatal("a buffer got a progress bar")
	}
}

func TestReconcilerMaskDSN(t *testing.T) {
	t.Parallel()
	got := maskDSN("seckill:secret@tcp(127.0.0.1:3306)/seckill?parseTime=true")
	if strings.Contains(got, "secret") || !strings.Contains(got, "127.0.0.1:3306") {
		t.Fatalf("masked %q", got)
	}
}
