package pass_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/consumer/internal/backoff"
	"github.com/seckill/seckill/consumer/internal/pass"
	"github.com/seckill/seckill/internal/testkit/logstest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/foundation/metrics"
)

// fixture is a pass on the real Redis lock, with its log, its records'
// metrics, a second process's locker, and counts of what the runner did.
type fixture struct {
	rdb    redis.UniversalClient
	prefix string
	logs   *logstest.Buffer
	reg    *prometheus.Registry
	other  *lock.Locker // another process of the group
	p      pass.Pass[int]

	mu     sync.Mutex
	works  int
	failed int
	done   []bool // each pass's clean
}

func newFixture(t *testing.T, work func(ctx context.Context, b *backoff.Records) (int, error)) *fixture {
	t.Helper()
	f := &fixture{logs: &logstest.Buffer{}, reg: prometheus.NewRegistry()}
	f.rdb, f.prefix = redistest.New(t)
	f.other = lock.New(f.rdb, lock.Options{Prefix: f.prefix, InstanceID: "other"})
	log := slog.New(slog.NewJSONHandler(f.logs, nil))
	f.p = pass.Pass[int]{
		Name: "test", Lock: "test-lock", TTL: 30 * time.Second, Default: 5 * time.Millisecond,
		Locker:  lock.New(f.rdb, lock.Options{Prefix: f.prefix, InstanceID: "runner"}),
		Log:     log,
		Records: backoff.New("test", log, metrics.NewPasses(f.reg)),
		Work: func(ctx context.Context, b *backoff.Records) (int, error) {
			f.mu.Lock()
			f.works++
			f.mu.Unlock()
			return work(ctx, b)
		},
		FailedMsg: "test pass failed",
		Failed: func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.failed++
		},
		Done: func(_ int, clean bool) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.done = append(f.done, clean)
		},
	}
	return f
}

func (f *fixture) counts() (works, failed int, done []bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.works, f.failed, append([]bool(nil), f.done...)
}

// skipped is the pass's seckill_pass_records_skipped gauge.
func (f *fixture) skipped(t *testing.T) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "seckill_pass_records_skipped" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pass" && l.GetValue() == "test" {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatal("no seckill_pass_records_skipped{pass=\"test\"}")
	return 0
}

// run runs the runner until the returned stop, which waits until it
// returned (failing the test if it does not).
func run(t *testing.T, r *pass.Runner[int], p pass.Pass[int]) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, p)
	}()
	return func() {
		t.Helper()
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
}

// A pass runs its work while it holds the lock, with the lease it names,
// returns what the work returned, and releases the lock afterwards.
func TestOnceRunsUnderTheLockAndReleasesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var f *fixture
	f = newFixture(t, func(ctx context.Context, _ *backoff.Records) (int, error) {
		if _, err := f.other.TryLock(ctx, "test-lock"); !errors.Is(err, lock.ErrNotAcquired) {
			t.Errorf("another process took the lock during the pass: %v, want ErrNotAcquired", err)
		}
		ttl, err := f.rdb.PTTL(ctx, f.prefix+":lock:{test-lock}").Result()
		if err != nil || ttl <= 20*time.Second || ttl > 30*time.Second {
			t.Errorf("lock's lease during the pass: %v %v, want the pass's TTL of 30s", ttl, err)
		}
		return 7, nil
	})
	var r pass.Runner[int]
	if n, err := r.Once(ctx, f.p); err != nil || n != 7 {
		t.Fatalf("Once: %d %v, want the work's 7", n, err)
	}
	if works, _, _ := f.counts(); works != 1 {
		t.Fatalf("work ran %d times, want 1", works)
	}
	l, err := f.other.TryLock(ctx, "test-lock")
	if err != nil {
		t.Fatalf("lock after the pass: %v, want it released", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// While another process holds the lock a pass does not run its work:
// Once says ErrNotAcquired, and Run reports no records waiting (the other
// process reports them), logs nothing and counts no failure.
func TestLockHeldElsewhereIsIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, func(context.Context, *backoff.Records) (int, error) { return 1, nil })
	held, err := f.other.TryLock(ctx, "test-lock")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.WithoutCancel(ctx))
	var r pass.Runner[int]
	if n, err := r.Once(ctx, f.p); !errors.Is(err, lock.ErrNotAcquired) || n != 0 {
		t.Fatalf("Once with the lock held elsewhere: %d %v, want 0 ErrNotAcquired", n, err)
	}
	f.p.Records.Metrics.RecordsWaiting("test", 3)
	stop := run(t, &r, f.p)
	waittest.Until(t, 10*time.Second, "three idle passes", func() bool {
		_, _, done := f.counts()
		return len(done) >= 3
	})
	stop()
	works, failed, done := f.counts()
	if works != 0 || failed != 0 {
		t.Errorf("work ran %d times and %d passes failed while the lock was held elsewhere, want none", works, failed)
	}
	for i, clean := range done {
		if clean {
			t.Errorf("idle pass %d told clean", i)
		}
	}
	if g := f.skipped(t); g != 0 {
		t.Errorf("records skipped: %v while idle, want 0", g)
	}
	if s := f.logs.String(); strings.Contains(s, "test pass failed") {
		t.Errorf("an idle pass logged a failure:\n%s", s)
	}
}

// A pass that fails is logged once at warning level, with its error, and
// counted; Run keeps going at the default interval (Every is 0), and the
// lock is free again after each pass.
func TestFailedPassIsLoggedAndCounted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(context.Context, *backoff.Records) (int, error) { return 2, errors.New("boom") })
	var r pass.Runner[int]
	stop := run(t, &r, f.p)
	waittest.Until(t, 10*time.Second, "three failed passes", func() bool {
		_, failed, _ := f.counts()
		return failed >= 3
	})
	stop()
	works, failed, done := f.counts()
	// The stop may cut the last pass short (not a failure), or come before
	// a pass takes the lock (no work).
	if failed < works-1 || len(done) < works {
		t.Errorf("%d passes worked, %d counted failed, %d told done; want every pass done, each failed but the last", works, failed, len(done))
	}
	for i, clean := range done {
		if clean {
			t.Errorf("failed pass %d told clean", i)
		}
	}
	lines := strings.Count(f.logs.String(), `"level":"WARN","msg":"test pass failed","err":"boom"`)
	if lines != failed {
		t.Errorf("%d warning lines for %d failed passes:\n%s", lines, failed, f.logs)
	}
	l, err := f.other.TryLock(context.Background(), "test-lock")
	if err != nil {
		t.Fatalf("lock after the passes: %v, want it released", err)
	}
	l.Release(context.Background())
}

// The end of Run's context stops it: no pass after it, and the pass it
// cut short is neither logged nor counted as failed.
func TestContextEndStopsRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	var passes atomic.Int32
	f := newFixture(t, func(ctx context.Context, _ *backoff.Records) (int, error) {
		if passes.Add(1) == 3 {
			cancel()
			<-ctx.Done() // the lock's context ends with Run's
			return 0, ctx.Err()
		}
		return 0, nil
	})
	var r pass.Runner[int]
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.Run(ctx, f.p)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	works, failed, done := f.counts()
	if works != 3 || failed != 0 {
		t.Errorf("work ran %d times, %d counted failed; want 3 and none", works, failed)
	}
	if want := []bool{true, true, false}; len(done) != 3 || done[0] != want[0] || done[1] != want[1] || done[2] != want[2] {
		t.Errorf("passes told clean %v, want %v", done, want)
	}
	if s := f.logs.String(); strings.Contains(s, "test pass failed") {
		t.Errorf("the pass the stop cut short was logged as failed:\n%s", s)
	}
}

// The records a pass fails on are reported at its end, and without
// records of its own a pass keeps the runner's from one pass to the next,
// so a record's backoff outlasts the pass.
func TestRecordsReportedAndKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var seen []*backoff.Records
	f := newFixture(t, func(_ context.Context, b *backoff.Records) (int, error) {
		seen = append(seen, b)
		if b.Due("a") {
			b.Failed("a", errors.New("bad record"), "record", "a")
		}
		return 0, nil
	})
	var r pass.Runner[int]
	if _, err := r.Once(ctx, f.p); err != nil {
		t.Fatal(err)
	}
	if g := f.skipped(t); g != 1 {
		t.Errorf("records skipped after a pass that failed one: %v, want 1", g)
	}
	if seen[0] != f.p.Records {
		t.Error("the work was not given the pass's records")
	}

	f.p.Records = nil
	var own pass.Runner[int]
	for range 2 {
		if _, err := own.Once(ctx, f.p); err != nil {
			t.Fatal(err)
		}
	}
	if b := seen[1]; b == nil || b != seen[2] || b.Pass != "test" {
		t.Fatalf("records without the pass's own: %p then %p, want one, of pass test", b, seen[2])
	}
	if n := strings.Count(f.logs.String(), "bad record"); n != 2 {
		t.Errorf("%d failure lines, want 2 (one a runner; the second pass of each backs the record off)", n)
	}
}

// The work runs with the lock's context: when the lock is lost (here its
// key is deleted, and the watchdog's next renewal finds it gone) the work's
// context ends while the pass's own goes on.
func TestWorkStopsWhenTheLockIsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var f *fixture
	f = newFixture(t, func(wctx context.Context, _ *backoff.Records) (int, error) {
		if err := f.rdb.Del(ctx, f.prefix+":lock:{test-lock}").Err(); err != nil {
			return 0, err
		}
		select {
		case <-wctx.Done():
			return 0, wctx.Err()
		case <-time.After(10 * time.Second):
			return 0, errors.New("the work's context outlived the lock")
		}
	})
	f.p.TTL = 300 * time.Millisecond // renewed every 100ms
	var r pass.Runner[int]
	if _, err := r.Once(ctx, f.p); !errors.Is(err, context.Canceled) {
		t.Fatalf("pass that lost its lock: %v, want its work's context cancelled", err)
	}
}
