package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
)

// A sale ending in the year 3000 (an operator's typo: its keys' lifetime
// would overflow and no warm-up of it could ever succeed) is refused with
// 400 INVALID_ARGUMENT, by POST and by PATCH, and nothing is written: no
// activity row, no change to the sale, nothing in Redis or Kafka. So is a
// start more than order.MaxSaleLead ahead and a sale longer than
// order.MaxSaleLength; the longest sale the range allows is accepted.
func TestSaleTimesOutOfRangeRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	item := ts.newItem(t, 10)
	admin := adminToken(t)
	adminReq := func(method, path, body string) request {
		return request{method: method, path: path, token: admin, body: body}
	}
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	soon := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	year3000 := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	activities := func() int64 {
		var n int64
		if err := ts.db.Gorm().WithContext(ctx).Table("activities").Where("item_id = ?", item).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}

	create := func(starts, ends time.Time) response {
		return ts.do(t, ts.url, adminReq("POST", "/admin/v1/activities",
			fmt.Sprintf(`{"item_id":%d,"starts_at":%q,"ends_at":%q}`, item, at(starts), at(ends))))
	}
	ts.noWrites(t, []int64{item}, func() {
		wantMessage(t, create(soon, year3000), http.StatusBadRequest, "INVALID_ARGUMENT", "at most 90 days after starts_at")
		wantMessage(t, create(year3000, year3000.Add(time.Hour)), http.StatusBadRequest, "INVALID_ARGUMENT", "at most 1825 days")
		wantMessage(t, create(soon, soon.Add(activity.MaxLength+time.Second)), http.StatusBadRequest, "INVALID_ARGUMENT", "too long")
	})
	if n := activities(); n != 0 {
		t.Fatalf("%d activities written by refused creates, want 0", n)
	}

	id := ts.newActivity(t, item, soon, soon.Add(time.Hour), 1)
	path := fmt.Sprintf("/admin/v1/activities/%d", id)
	ts.noWrites(t, []int64{item}, func() {
		for _, body := range []string{
			fmt.Sprintf(`{"ends_at":%q}`, at(year3000)),
			fmt.Sprintf(`{"starts_at":%q,"ends_at":%q}`, at(year3000), at(year3000.Add(time.Hour))),
			fmt.Sprintf(`{"starts_at":%q,"per_user_limit":2}`, at(soon.Add(-activity.MaxLength-time.Hour))),
		} {
			wantError(t, ts.do(t, ts.url, adminReq("PATCH", path, body)), http.StatusBadRequest, "INVALID_ARGUMENT")
		}
	})
	a, err := ts.db.Activities.Activity(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !a.StartsAt.Equal(soon) || !a.EndsAt.Equal(soon.Add(time.Hour)) || a.PerUserLimit != 1 {
		t.Fatalf("a refused PATCH changed the sale: %s - %s limit %d", a.StartsAt, a.EndsAt, a.PerUserLimit)
	}
	if n := activities(); n != 1 {
		t.Fatalf("%d activities, want the one created", n)
	}
	// After the one created: one sale owns an item at a time.
	if r := create(soon.Add(time.Hour), soon.Add(time.Hour+activity.MaxLength)); r.status != http.StatusCreated {
		t.Fatalf("a sale of the longest length: %d %s", r.status, r.body)
	}
}
