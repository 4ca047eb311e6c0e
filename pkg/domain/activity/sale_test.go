package activity

import (
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
)

func TestNewSaleActivity(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	starts, ends := now.Add(time.Hour), now.Add(2*time.Hour)
	n := func(v int) *int { return &v }
	for _, tc := range []struct {
		name string
		sale Draft
		want string // the client's message; "" when valid
	}{
		{"the defaults", Draft{ItemID: 1, StartsAt: starts, EndsAt: ends}, ""},
		{"every setting", Draft{ItemID: 1, StartsAt: starts, EndsAt: ends, PerUserLimit: n(3), PaymentWindowSeconds: n(60), StockBuckets: n(4)}, ""},
		{"no item", Draft{StartsAt: starts, EndsAt: ends}, "invalid argument: item_id must be a positive integer"},
		{"no end", Draft{ItemID: 1, StartsAt: starts}, "invalid argument: starts_at and ends_at are required (RFC 3339)"},
		{"ends before it starts", Draft{ItemID: 1, StartsAt: ends, EndsAt: starts}, "invalid argument: ends_at must be after starts_at"},
		{"a limit of 0", Draft{ItemID: 1, StartsAt: starts, EndsAt: ends, PerUserLimit: n(0)}, "invalid argument: per_user_limit must be from 1 to 1000"},
		{"a window of 0", Draft{ItemID: 1, StartsAt: starts, EndsAt: ends, PaymentWindowSeconds: n(0)}, "invalid argument: payment_window_seconds must be from 1 to 604800"},
		{"a window past a week", Draft{ItemID: 1, StartsAt: starts, EndsAt: ends, PaymentWindowSeconds: n(604801)}, "invalid argument: payment_window_seconds must be from 1 to 604800"},
		{"17 buckets", Draft{ItemID: 1, StartsAt: starts, EndsAt: ends, StockBuckets: n(17)}, "invalid argument: stock_buckets must be from 1 to 16"},
		{"the limit checked before the buckets", Draft{ItemID: 1, StartsAt: starts, EndsAt: ends, PerUserLimit: n(0), StockBuckets: n(0)}, "invalid argument: per_user_limit must be from 1 to 1000"},
		{"sizes", Draft{Items: []NewItem{{ItemID: 1, Label: "S"}, {ItemID: 2, Label: "M"}}, StartsAt: starts, EndsAt: ends}, ""},
		{"sizes without an end", Draft{Items: []NewItem{{ItemID: 1, Label: "S"}}, StartsAt: starts},
			"invalid argument: starts_at and ends_at are required (RFC 3339)"},
		{"sizes that end before they start", Draft{Items: []NewItem{{ItemID: 1, Label: "S"}}, StartsAt: ends, EndsAt: starts},
			"invalid argument: ends_at must be after starts_at"},
		{"item_id and items", Draft{ItemID: 1, Items: []NewItem{{ItemID: 1, Label: "S"}}, StartsAt: starts, EndsAt: ends},
			"invalid argument: give item_id (a sale of one item) or items (a sale of several), not both"},
		{"no items", Draft{Items: []NewItem{}, StartsAt: starts, EndsAt: ends}, "invalid argument: items must list from 1 to 100 items"},
		{"an item twice", Draft{Items: []NewItem{{ItemID: 1, Label: "S"}, {ItemID: 1, Label: "M"}}, StartsAt: starts, EndsAt: ends},
			"invalid argument: items[1].item_id 1 is listed twice: a sale lists each item once"},
		{"a label of 41 characters", Draft{Items: []NewItem{{ItemID: 1, Label: "0123456789012345678901234567890123456789x"}}, StartsAt: starts, EndsAt: ends},
			"invalid argument: items[0].label must be 1-40 characters"},
		{"too long", Draft{ItemID: 1, StartsAt: starts, EndsAt: starts.Add(MaxLength + time.Millisecond)},
			"invalid argument: the sale from 2026-12-01T11:00:00Z to 2027-03-01T11:00:00.001Z is too long: ends_at is at most 90 days after starts_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tc.sale.Activity(now)
			if tc.want != "" {
				if !errors.Is(err, order.ErrInvalidArgument) || order.ClientMessage(err) != tc.want {
					t.Fatalf("Activity: %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			limit, buckets, window := 1, 1, time.Duration(0)
			if tc.sale.PerUserLimit != nil {
				limit, buckets, window = *tc.sale.PerUserLimit, *tc.sale.StockBuckets, time.Duration(*tc.sale.PaymentWindowSeconds)*time.Second
			}
			if a.ItemID != 1 || !a.StartsAt.Equal(starts) || !a.EndsAt.Equal(ends) || a.PerUserLimit != limit ||
				a.StockBuckets != buckets || a.PaymentWindow != window {
				t.Fatalf("Activity = %+v", a)
			}
		})
	}
}

func TestSaleChangeCheck(t *testing.T) {
	n := func(v int) *int { return &v }
	at := time.Now()
	for _, tc := range []struct {
		name   string
		change Change
		want   string
	}{
		{"a new end", Change{EndsAt: &at}, ""},
		{"nothing", Change{}, "invalid argument: give at least one of starts_at, ends_at, per_user_limit, stock_buckets, items, waiting_room, access"},
		{"a room alone", Change{Room: true}, ""},
		{"0 buckets", Change{StockBuckets: n(0)}, "invalid argument: stock_buckets must be from 1 to 16"},
		{"a limit of 1001", Change{PerUserLimit: n(1001)}, "invalid argument: per_user_limit must be from 1 to 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.change.Check()
			if got := order.ClientMessage(err); got != tc.want || (tc.want == "") != (err == nil) {
				t.Fatalf("Check: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCheckChangeable(t *testing.T) {
	starts := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		now  time.Time
		ok   bool
	}{
		{"an hour before", starts.Add(-time.Hour), true},
		{"just before the guard", starts.Add(-SettingsGuard - time.Millisecond), true},
		{"at the guard", starts.Add(-SettingsGuard), false},
		{"started", starts.Add(time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckChangeable(starts, tc.now); (err == nil) != tc.ok || (err != nil && !errors.Is(err, order.ErrActivityStarted)) {
				t.Fatalf("CheckChangeable: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// A warmed sale keeps the bucket count and the end its keys were laid out
// and timed by: another count, or a later end, is locked; an earlier end is
// not.
func TestKeyChangeCheckWarmed(t *testing.T) {
	ends := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := Activity{EndsAt: ends, StockBuckets: 0} // 0 is one stock key
	earlier, later, one, four := ends.Add(-time.Hour), ends.Add(time.Hour), 1, 4
	warmed := ends.Add(-2 * time.Hour)
	for _, tc := range []struct {
		name      string
		change    Change
		any       bool
		warmedErr string
	}{
		{"the same bucket count", Change{StockBuckets: &one}, false, ""},
		{"the same end", Change{EndsAt: &ends}, false, ""},
		{"an earlier end", Change{EndsAt: &earlier}, true, ""},
		{"a later end", Change{EndsAt: &later}, true, "a later ends_at"},
		{"four buckets", Change{StockBuckets: &four}, true, "stock_buckets"},
		{"four buckets and a later end", Change{StockBuckets: &four, EndsAt: &later}, true, "stock_buckets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := KeyChangeOf(a, tc.change)
			if k.Any() != tc.any {
				t.Fatalf("Any = %v, want %v", k.Any(), tc.any)
			}
			if err := k.CheckWarmed(time.Time{}); err != nil {
				t.Fatalf("CheckWarmed of a sale never warmed: %v", err)
			}
			err := k.CheckWarmed(warmed)
			if tc.warmedErr == "" {
				if err != nil {
					t.Fatalf("CheckWarmed: %v, want nil", err)
				}
				return
			}
			want := "setting locked: the sale's stock was loaded into Redis at 2026-12-01T10:00:00Z with keys laid out and timed by its current settings: " +
				tc.warmedErr + " cannot be set now (end this sale and create another)"
			if !errors.Is(err, ErrSettingLocked) || order.ClientMessage(err) != want {
				t.Fatalf("CheckWarmed: %v, want %q", err, want)
			}
		})
	}
}

func TestActivityCheckQuantity(t *testing.T) {
	a := Activity{PerUserLimit: 2}
	for _, tc := range []struct {
		q  int
		ok bool
	}{{0, false}, {1, true}, {2, true}, {3, false}} {
		err := a.CheckQuantity(tc.q)
		if (err == nil) != tc.ok || (err != nil && order.ClientMessage(err) != "invalid argument: quantity must be from 1 to 2") {
			t.Errorf("CheckQuantity(%d): %v, want ok %v", tc.q, err, tc.ok)
		}
	}
	if err := (Activity{PerUserLimit: 5000}).CheckQuantity(order.MaxQuantity + 1); !errors.Is(err, order.ErrInvalidArgument) {
		t.Errorf("CheckQuantity past MaxQuantity: %v", err)
	}
}
