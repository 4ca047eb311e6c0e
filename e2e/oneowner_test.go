package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/order"
)

// apiAnswer is an admin answer: a created or changed sale, or an error.
type apiAnswer struct {
	ActivityID int64 `json:"activity_id"`
	Error      struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// One sale owns an item at a time, through the HTTP API: a plain sale of
// an item whose room sale is scheduled is 409 ITEM_IN_ANOTHER_SALE, its
// message naming the room sale and the item, nothing written; one that
// starts when the room sale ends is made; a PATCH moving it into the room
// sale's window is refused and changes nothing; a sale of an item whose
// other sale was cancelled is made.
func TestOneSaleOwnsAnItemAtATime(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	admin := func(method, path string, body map[string]any) (int, apiAnswer) {
		t.Helper()
		var a apiAnswer
		code, err := api.Do(method, path, 1, auth.RoleAdmin, nil, body, &a)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return code, a
	}
	newItem := func() int64 {
		t.Helper()
		var it struct {
			ItemID int64 `json:"item_id"`
		}
		if code, err := api.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil, map[string]any{"name": "one owner", "stock": 2}, &it); err != nil || code != 201 {
			t.Fatalf("create item: %d %v", code, err)
		}
		return it.ItemID
	}
	sale := func(item int64, starts, ends time.Time, extra map[string]any) (int, apiAnswer) {
		t.Helper()
		body := map[string]any{"item_id": item, "starts_at": starts, "ends_at": ends, "per_user_limit": 1}
		for k, v := range extra {
			body[k] = v
		}
		return admin("POST", "/admin/v1/activities", body)
	}
	salesOf := func(item int64) int64 {
		return p.Count("SELECT COUNT(*) FROM activities WHERE item_id = ? OR id IN (SELECT activity_id FROM activity_items WHERE item_id = ?)", item, item)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	h := func(n float64) time.Time { return now.Add(time.Duration(n * float64(time.Hour))) }

	x := newItem()
	code, room := sale(x, h(1), h(2), map[string]any{"waiting_room": map[string]any{"admit_per_second": 5}})
	if code != 201 {
		t.Fatalf("room sale: %d %+v", code, room)
	}
	code, refused := sale(x, h(1.5), h(3), nil)
	if code != 409 || refused.Error.Code != "ITEM_IN_ANOTHER_SALE" ||
		!strings.Contains(refused.Error.Message, fmt.Sprintf("sale %d ", room.ActivityID)) ||
		!strings.Contains(refused.Error.Message, fmt.Sprintf("item %d ", x)) {
		t.Fatalf("overlapping plain sale: %d %+v, want 409 ITEM_IN_ANOTHER_SALE naming sale %d and item %d", code, refused, room.ActivityID, x)
	}
	// A sale of sizes one of which is x overlaps as well.
	y := newItem()
	code, refused = admin("POST", "/admin/v1/activities", map[string]any{"starts_at": h(0.5), "ends_at": h(1.5),
		"items": []map[string]any{{"item_id": y, "label": "S"}, {"item_id": x, "label": "M"}}})
	if code != 409 || refused.Error.Code != "ITEM_IN_ANOTHER_SALE" {
		t.Fatalf("overlapping sale of sizes: %d %+v", code, refused)
	}
	if n := salesOf(x); n != 1 {
		t.Fatalf("item %d is in %d sales after the refusals, want the room sale alone", x, n)
	}
	if n := salesOf(y); n != 0 {
		t.Fatalf("item %d is in %d sales: a refused sale was written", y, n)
	}

	// From the room sale's end: the windows only touch.
	code, after := sale(x, h(2), h(3), nil)
	if code != 201 {
		t.Fatalf("a sale from the room sale's end: %d %+v", code, after)
	}
	code, refused = admin("PATCH", fmt.Sprintf("/admin/v1/activities/%d", after.ActivityID), map[string]any{"starts_at": h(1.75)})
	if code != 409 || refused.Error.Code != "ITEM_IN_ANOTHER_SALE" || !strings.Contains(refused.Error.Message, fmt.Sprintf("sale %d ", room.ActivityID)) {
		t.Fatalf("PATCH into the room sale's window: %d %+v", code, refused)
	}
	a, err := p.DB.Activities.Activity(t.Context(), after.ActivityID)
	if err != nil || !a.StartsAt.Equal(h(2)) {
		t.Fatalf("the refused PATCH changed the sale: starts %s, %v", a.StartsAt, err)
	}
	// The room sale's own move into the other's window is refused too; a
	// move within its own is not.
	if code, refused = admin("PATCH", fmt.Sprintf("/admin/v1/activities/%d", room.ActivityID), map[string]any{"ends_at": h(2.5)}); code != 409 || refused.Error.Code != "ITEM_IN_ANOTHER_SALE" {
		t.Fatalf("PATCH of the room sale's end into the next sale: %d %+v", code, refused)
	}
	if code, refused = admin("PATCH", fmt.Sprintf("/admin/v1/activities/%d", room.ActivityID), map[string]any{"ends_at": h(1.5)}); code != 200 {
		t.Fatalf("PATCH of the room sale within its window: %d %+v", code, refused)
	}

	// A cancelled sale gives its item up: a sale of it from before the
	// cancel on is made.
	z := newItem()
	code, live := sale(z, now.Add(-time.Minute), h(1), nil)
	if code != 201 {
		t.Fatalf("live sale: %d %+v", code, live)
	}
	if code, refused = sale(z, now.Add(-30*time.Second), h(2), nil); code != 409 || refused.Error.Code != "ITEM_IN_ANOTHER_SALE" {
		t.Fatalf("a sale of an item in a live sale: %d %+v", code, refused)
	}
	if code, _ := admin("POST", fmt.Sprintf("/admin/v1/activities/%d/cancel", live.ActivityID), nil); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	if code, again := sale(z, now.Add(-30*time.Second), h(2), nil); code != 201 {
		t.Fatalf("a sale of an item whose sale was cancelled: %d %+v", code, again)
	}
}

// The drawer's key is one no buyer can send: an order carrying the key the
// drawer gives an entry's order is refused as an invalid key (400), in any
// sale, so no buyer can hold it before the drawer.
func TestDrawerKeyIsNoBuyersKey(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	drawSale := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{1}, EntriesCloseIn: 10 * time.Minute})
	e := enter(t, api, drawSale, 7, drawSale.Items[0].ID)
	if e.EntryID == "" {
		t.Fatalf("entry: %+v", e)
	}
	other := api.CreateSale(5, 1)
	pl, err := api.PlaceOrder(7, order.DrawKey(e.EntryID), other.ActivityID, 1)
	if err != nil || pl.Code != 400 || pl.Error != "INVALID_ARGUMENT" {
		t.Fatalf("an order with the drawer's key %q: %+v %v, want 400 INVALID_ARGUMENT", order.DrawKey(e.EntryID), pl, err)
	}
	if n := p.Count("SELECT COUNT(*) FROM orders"); n != 0 {
		t.Fatalf("%d orders after the refusal", n)
	}
}
