package httpapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// createSale posts a sale of item with the given bucket count (0: left
// out) to base.
func (ts *testServer) createSale(t *testing.T, base string, item int64, starts, ends time.Time, buckets int) response {
	t.Helper()
	body := fmt.Sprintf(`{"item_id":%d,"starts_at":%q,"ends_at":%q`, item, starts.Format(time.RFC3339Nano), ends.Format(time.RFC3339Nano))
	if buckets > 0 {
		body += fmt.Sprintf(`,"stock_buckets":%d`, buckets)
	}
	return ts.do(t, base, request{method: "POST", path: "/admin/v1/activities", token: adminToken(t), body: body + "}"})
}

func (ts *testServer) patchSale(t *testing.T, activity int64, body string) response {
	t.Helper()
	return ts.do(t, ts.url, request{method: "PATCH", path: fmt.Sprintf("/admin/v1/activities/%d", activity), token: adminToken(t), body: body})
}

// warmSale warms the sale up, waiting out the 503 of a warm-up right after
// a change of its end or bucket count.
func (ts *testServer) warmSale(t *testing.T, activity int64) {
	t.Helper()
	var r response
	waittest.Until(t, 10*time.Second, "a warm-up past the settings guard", func() bool {
		r = ts.do(t, ts.url, request{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/warmup", activity), token: adminToken(t)})
		return r.status != 503
	})
	if r.status != 200 {
		t.Fatalf("warmup of %d: %d %s", activity, r.status, r.body)
	}
}

func (ts *testServer) salesOf(t *testing.T, item int64) int64 {
	t.Helper()
	var n int64
	if err := ts.db.Gorm().Raw("SELECT COUNT(*) FROM activities WHERE item_id = ?", item).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func activityID(t *testing.T, r response) int64 {
	t.Helper()
	if r.status != 201 {
		t.Fatalf("create sale: %d %s", r.status, r.body)
	}
	var a httpapi.ActivityView
	r.decode(t, &a)
	return a.ActivityID
}

// A second sale of an item may not lay its stock out in another number of
// buckets while the item's keys live: not while Redis holds them (the first
// sale was warmed), and not while another sale's keys may still live by its
// times although Redis holds none (lost, or not written yet). Refused with
// 409 SETTING_LOCKED, with nothing written in either store; the same
// layout, or another once the old sale's keys are past their life, is
// taken.
func TestSaleOfAnItemKeepsItsLiveLayout(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	now := time.Now().UTC()

	item := ts.newItem(t, 30)
	first := activityID(t, ts.createSale(t, ts.url, item, now.Add(-time.Minute), now.Add(time.Hour), 3))
	ts.warmSale(t, first)
	ts.noWrites(t, []int64{item}, func() {
		for _, k := range []int{0, 1, 2, 4} {
			wantError(t, ts.createSale(t, ts.url, item, now.Add(2*time.Hour), now.Add(3*time.Hour), k), 409, "SETTING_LOCKED")
		}
	})
	if n := ts.salesOf(t, item); n != 1 {
		t.Fatalf("%d sales of the item after the refusals, want 1", n)
	}
	activityID(t, ts.createSale(t, ts.url, item, now.Add(2*time.Hour), now.Add(3*time.Hour), 3))

	// Redis holds nothing of this item, but its sale ended an hour ago: its
	// reservations and quotas live a day past that.
	cold := ts.newItem(t, 10)
	if _, err := ts.db.Activities.CreateActivity(context.Background(), activity.Activity{ItemID: cold, StartsAt: now.Add(-2 * time.Hour),
		EndsAt: now.Add(-time.Hour), PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	ts.noWrites(t, []int64{cold}, func() {
		wantError(t, ts.createSale(t, ts.url, cold, now.Add(time.Hour), now.Add(2*time.Hour), 2), 409, "SETTING_LOCKED")
	})
	if n := ts.salesOf(t, cold); n != 1 {
		t.Fatalf("%d sales of the cold item after the refusal, want 1", n)
	}
	activityID(t, ts.createSale(t, ts.url, cold, now.Add(time.Hour), now.Add(2*time.Hour), 1))

	// A sale whose keys are past their life (it ended three days ago) holds
	// nothing back.
	old := ts.newItem(t, 10)
	if _, err := ts.db.Activities.CreateActivity(context.Background(), activity.Activity{ItemID: old, StartsAt: now.Add(-73 * time.Hour),
		EndsAt: now.Add(-72 * time.Hour), PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	activityID(t, ts.createSale(t, ts.url, old, now.Add(time.Hour), now.Add(2*time.Hour), 4))
}

// The read of the item's layout loses its answer: the sale is refused with
// 503 and nothing is written; an unknown layout is never taken for "no
// keys".
func TestSaleLayoutReadLost(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	p := redistest.NewProxied(t, false)
	svc := ts.service(t, nil)
	useStore(svc, stockredis.New(p.Client(t), p.Prefix))
	url := ts.serve(t, svc, ts.checkers(nil))
	item := ts.newItem(t, 10)
	now := time.Now().UTC()

	p.Proxies[0].LoseReply(proxytest.RedisCommand("MGET"), 1)
	wantError(t, ts.createSale(t, url, item, now.Add(time.Hour), now.Add(2*time.Hour), 2), 503, "UNAVAILABLE")
	if p.Lost() != 1 {
		t.Fatalf("%d answers lost, want 1", p.Lost())
	}
	if n := ts.salesOf(t, item); n != 0 {
		t.Fatalf("%d sales written after the lost answer, want none", n)
	}
	activityID(t, ts.createSale(t, url, item, now.Add(time.Hour), now.Add(2*time.Hour), 2))
}

// Changing a sale before it starts: its bucket count and a later end only
// until it is warmed up (its keys are laid out and timed by them then), an
// earlier end and its limit until shortly before the start; within
// activity.SettingsGuard of the start nothing changes, since an instance may
// still answer from its old copy when the sale opens. Every refusal writes
// nothing.
func TestSaleSettingsKeysDependOn(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	starts, ends := now.Add(time.Hour), now.Add(2*time.Hour)

	item := ts.newItem(t, 30)
	sale := activityID(t, ts.createSale(t, ts.url, item, starts, ends, 0))
	if r := ts.patchSale(t, sale, `{"stock_buckets":3}`); r.status != 200 {
		t.Fatalf("stock_buckets before the warm-up: %d %s", r.status, r.body)
	}
	wantError(t, ts.patchSale(t, sale, `{"stock_buckets":17}`), 400, "INVALID_ARGUMENT")
	ts.warmSale(t, sale)
	if l, err := ts.store.Stock.Layout(context.Background(), reservation.One(item)); err != nil || l != 3 {
		t.Fatalf("layout after the warm-up: %v %v, want 3 stock buckets", l, err)
	}
	before := func() (int, time.Time) {
		a, err := ts.db.Activities.Activity(context.Background(), sale)
		if err != nil {
			t.Fatal(err)
		}
		return a.StockBuckets, a.EndsAt
	}
	ts.noWrites(t, []int64{item}, func() {
		wantError(t, ts.patchSale(t, sale, `{"stock_buckets":1}`), 409, "SETTING_LOCKED")
		wantError(t, ts.patchSale(t, sale, fmt.Sprintf(`{"ends_at":%q}`, ends.Add(time.Minute).Format(time.RFC3339Nano))), 409, "SETTING_LOCKED")
		wantError(t, ts.patchSale(t, sale, fmt.Sprintf(`{"per_user_limit":2,"ends_at":%q}`, ends.Add(48*time.Hour).Format(time.RFC3339Nano))), 409, "SETTING_LOCKED")
	})
	if k, e := before(); k != 3 || !e.Equal(ends) {
		t.Fatalf("refused changes wrote: buckets %d, ends %s", k, e)
	}
	earlier := ends.Add(-time.Minute)
	if r := ts.patchSale(t, sale, fmt.Sprintf(`{"ends_at":%q,"per_user_limit":2}`, earlier.Format(time.RFC3339Nano))); r.status != 200 {
		t.Fatalf("an earlier end and a limit after the warm-up: %d %s", r.status, r.body)
	}
	if k, e := before(); k != 3 || !e.Equal(earlier) {
		t.Fatalf("after an earlier end: buckets %d, ends %s", k, e)
	}

	// Another item's sale, starting within the guard: too late for any
	// change.
	soon := ts.newItem(t, 5)
	s := activityID(t, ts.createSale(t, ts.url, soon, time.Now().Add(activity.SettingsGuard-300*time.Millisecond), ends, 0))
	wantError(t, ts.patchSale(t, s, `{"per_user_limit":3}`), 409, "ACTIVITY_STARTED")
	if a, err := ts.db.Activities.Activity(context.Background(), s); err != nil || a.PerUserLimit != 1 {
		t.Fatalf("a change within the guard wrote: %+v %v", a, err)
	}
}

// The sale's end moves later right before a warm-up, while this instance
// still holds its old copy of the sale: the warm-up is not recorded for
// keys timed by the old end (503, and the consumer's schedule warms it
// again), or, if the instance had the new copy already, its keys live past
// the new end. Never a sale on record as warmed whose keys expire before it
// ends.
func TestWarmupAfterALaterEnd(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	now := time.Now().UTC()
	item := ts.newItem(t, 10)
	sale := activityID(t, ts.createSale(t, ts.url, item, now.Add(time.Hour), now.Add(2*time.Hour), 0))
	// A buyer early: the instance caches the sale.
	wantError(t, ts.place(t, ts.url, buyerToken(t, 9), "early", sale), 409, "ACTIVITY_NOT_ACTIVE")
	later := now.Add(50 * time.Hour)
	if r := ts.patchSale(t, sale, fmt.Sprintf(`{"ends_at":%q}`, later.Format(time.RFC3339Nano))); r.status != 200 {
		t.Fatalf("later end before the warm-up: %d %s", r.status, r.body)
	}
	r := ts.do(t, ts.url, request{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/warmup", sale), token: adminToken(t)})
	warmedAt, err := ts.db.Activities.ActivityWarmedAt(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	ttl := ts.rdb.PTTL(context.Background(), ts.store.Keys(reservation.One(item)).Stock()).Val()
	switch {
	case r.status == 503:
		if !warmedAt.IsZero() {
			t.Fatalf("a warm-up from the old copy was recorded at %s", warmedAt)
		}
		t.Log("warmed from the old copy: not recorded")
	case r.status == 200:
		if warmedAt.IsZero() || ttl < time.Until(later) {
			t.Fatalf("warm-up recorded at %s with the stock key living %s, less than the %s to the sale's end",
				warmedAt, ttl, time.Until(later).Round(time.Second))
		}
		t.Log("warmed from the new copy")
	default:
		t.Fatalf("warm-up: %d %s", r.status, r.body)
	}
}

// The sale's bucket count changes right before a warm-up, while this
// instance still holds its old copy of the sale: the warm-up waits (503,
// nothing written) until every instance's copy is younger than the change
// (activity.SettingsGuard), then lays the item out in the new count. A warm-up
// from the old copy would have laid it out in the old one, which the next
// warm-ups could then not lay out again.
func TestWarmupRightAfterABucketChange(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	var (
		item, sale int64
		warm       func() response
	)
	// The warm-up must come within activity.SettingsGuard of the change; on a
	// loaded machine it may not, and is then rightly taken: a new sale.
	for attempt := 1; ; attempt++ {
		now := time.Now().UTC()
		item = ts.newItem(t, 30)
		sale = activityID(t, ts.createSale(t, ts.url, item, now.Add(time.Hour), now.Add(2*time.Hour), 0))
		// A buyer early: the instance caches the sale, with one stock key.
		wantError(t, ts.place(t, ts.url, buyerToken(t, 9), "early", sale), 409, "ACTIVITY_NOT_ACTIVE")
		changed := time.Now()
		if r := ts.patchSale(t, sale, `{"stock_buckets":3}`); r.status != 200 {
			t.Fatalf("stock_buckets before the warm-up: %d %s", r.status, r.body)
		}
		warm = func() response {
			return ts.do(t, ts.url, request{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/warmup", sale), token: adminToken(t)})
		}
		arose := true
		ts.noWritesIf(t, []int64{item}, func() bool {
			r := warm()
			if r.status != 503 && time.Since(changed) >= activity.SettingsGuard && attempt < 3 {
				t.Logf("attempt %d: the warm-up came %v after the change, past the guard: again", attempt, time.Since(changed).Round(time.Millisecond))
				arose = false
				return false
			}
			wantError(t, r, 503, "UNAVAILABLE")
			return true
		})
		if arose {
			break
		}
	}
	var last response
	waittest.Until(t, 10*time.Second, "the warm-up taken once every copy is younger than the change", func() bool {
		last = warm()
		return last.status != 503
	})
	if last.status != 200 {
		t.Fatalf("warm-up after the guard: %d %s", last.status, last.body)
	}
	if l, err := ts.store.Stock.Layout(context.Background(), reservation.One(item)); err != nil || l != 3 {
		t.Fatalf("layout after the warm-up: %v %v, want 3 stock buckets", l, err)
	}
}

// A warm-up right after the operator ended a sale this instance has a
// copy of (younger than activity.CopyTTL, so with the old end) works
// from MySQL's row: 200, recorded, its keys timed by the new end. From the
// copy it was a 503 "the sale changed while it warmed up" for no fault.
func TestWarmupRightAfterAnEnd(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	_, sale := ts.openSale(t, 10, 1)
	// A buyer: the instance caches the sale, with its old end.
	ts.mustPlace(t, ts.url, buyerToken(t, 9), "before-the-end", sale)
	if r := ts.do(t, ts.url, request{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/end", sale), token: adminToken(t)}); r.status != 200 {
		t.Fatalf("end: %d %s", r.status, r.body)
	}
	r := ts.do(t, ts.url, request{method: "POST", path: fmt.Sprintf("/admin/v1/activities/%d/warmup", sale), token: adminToken(t)})
	if r.status != 200 {
		t.Fatalf("warm-up right after the end: %d %s, want 200", r.status, r.body)
	}
}
