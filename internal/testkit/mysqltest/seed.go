package mysqltest

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/service/fulfilment"
)

// SeedLive writes live orders of users 1..n (one unit each, idempotency
// key "k<user>") in the activity straight into MySQL, with the consumer's
// own write (Fulfil) a thousand at a time: a sale that sold n
// units, with Redis left as it was. It returns the orders' events, by
// user.
func (d *DB) SeedLive(ctx context.Context, a activity.Activity, n int) ([]order.Event, error) {
	gen := order.NewNumberGenerator()
	all := make([]order.Event, 0, n)
	for from := 1; from <= n; from += 1000 {
		var reqs []order.FulfilRequest
		for u := from; u < from+1000 && u <= n; u++ {
			e := order.Event{Version: order.EventVersion, OrderNo: gen.Next(a.ItemID), IdempotencyKey: "k" + strconv.Itoa(u),
				UserID: strconv.Itoa(u), ItemID: a.ItemID, ActivityID: a.ID, Quantity: 1, ReservedAt: time.Now()}
			all = append(all, e)
			reqs = append(reqs, order.FulfilRequest{Event: e, PayDeadline: time.Now().Add(time.Hour)})
		}
		out, err := Fulfil(ctx, d.DB, reqs)
		if err != nil {
			return nil, err
		}
		for _, r := range reqs {
			if o := out[r.Event.OrderNo]; o.Status != order.Created {
				return nil, fmt.Errorf("seeded order %s: %+v", r.Event.OrderNo, o)
			}
		}
	}
	return all, nil
}

// Fulfil writes reqs into db as the consumer writes a batch (the
// fulfilment service on db's orders) and returns the outcomes.
func Fulfil(ctx context.Context, db *orderdb.DB, reqs []order.FulfilRequest) (map[string]order.FulfilOutcome, error) {
	s := &fulfilment.Service{Tx: db, Orders: db.Orders, Events: db.Outbox, Draws: db.Draws}
	return s.Fulfil(ctx, reqs)
}

// OpenSale creates an item of stock units at price (none when zero) and a
// sale of it on for the next hour, one unit per buyer.
func (d *DB) OpenSale(t testing.TB, stock int64, price order.Money) activity.Activity {
	t.Helper()
	ctx := context.Background()
	it, err := d.Activities.CreatePricedItem(ctx, "ticket", stock, price)
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, StartsAt: time.Now().Add(-time.Minute),
		EndsAt: time.Now().Add(time.Hour), PerUserLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// OpenDraw creates an item of stock units and a draw sale of it that
// started a minute before now, takes entries until a minute after it
// (closes) and ends an hour after it, one unit per buyer.
func (d *DB) OpenDraw(t testing.TB, stock int64, now time.Time) (a activity.Activity, closes time.Time) {
	t.Helper()
	ctx := context.Background()
	it, err := d.Activities.CreateItem(ctx, "sneaker", stock)
	if err != nil {
		t.Fatal(err)
	}
	closes = now.Add(time.Minute)
	a, err = d.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, Items: []activity.Item{{ItemID: it.ID}},
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PerUserLimit: 1,
		Draw: activity.Draw{EntriesCloseAt: closes, Seed: draw.NewSeed()}})
	if err != nil {
		t.Fatal(err)
	}
	return a, closes
}

// OpenSizedDraw creates an item a size, of stocks[i] units, and a draw
// sale of them that started a minute ago, takes entries until closes and
// ends in an hour, two units per buyer.
func (d *DB) OpenSizedDraw(t testing.TB, closes time.Time, stocks ...int64) activity.Activity {
	t.Helper()
	ctx := context.Background()
	var items []activity.Item
	for i, n := range stocks {
		it, err := d.Activities.CreateItem(ctx, "sneaker", n)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, activity.Item{ItemID: it.ID, Label: "size " + strconv.Itoa(i+1)})
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	a, err := d.Activities.CreateActivity(ctx, activity.Activity{ItemID: items[0].ItemID, Items: items, StartsAt: now.Add(-time.Minute),
		EndsAt: now.Add(time.Hour), PerUserLimit: 2, Draw: activity.Draw{EntriesCloseAt: closes.UTC().Truncate(time.Millisecond), Seed: draw.NewSeed()}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// SeedEntries writes n entries of users u0..u<n-1> in draw sale a straight
// into draw_entries, as the entries' consumer leaves them (multi-row
// INSERTs of 5,000), and the draw's count: entrant i wants the size
// weights pick for i (weights[k] of every sum(weights) entrants want
// a.Items[k]), and one in seven wants two units. It returns how long the
// writes took.
func (d *DB) SeedEntries(t testing.TB, a activity.Activity, n int, weights []int64) time.Duration {
	t.Helper()
	if len(weights) != len(a.Items) {
		t.Fatalf("seed entries: %d weights for %d sizes", len(weights), len(a.Items))
	}
	var sum int64
	for _, w := range weights {
		sum += w
	}
	sizeOf := func(i int) int64 {
		k := int64(i) % sum
		for j, w := range weights {
			if k < w {
				return a.Items[j].ItemID
			}
			k -= w
		}
		return a.Items[0].ItemID
	}
	start := time.Now()
	at := a.StartsAt.UTC().Format("2006-01-02 15:04:05.000")
	id := make([]byte, draw.EntryIDLen/2)
	var q strings.Builder
	const rows = 5000
	for i := 0; i < n; i += rows {
		q.Reset()
		q.WriteString("INSERT INTO draw_entries (entry_id, activity_id, user_id, item_id, quantity, created_at) VALUES ")
		for j := i; j < min(i+rows, n); j++ {
			if j > i {
				q.WriteByte(',')
			}
			_, _ = rand.Read(id)
			fmt.Fprintf(&q, "('%x',%d,'u%d',%d,%d,'%s')", id, a.ID, j, sizeOf(j), 1+j%7/6, at)
		}
		if err := d.Gorm().Exec(q.String()).Error; err != nil {
			t.Fatalf("seed entries: %v", err)
		}
	}
	if err := d.Gorm().Exec("UPDATE activity_draws SET entries = ? WHERE activity_id = ?", n, a.ID).Error; err != nil {
		t.Fatalf("seed entries: %v", err)
	}
	return time.Since(start)
}
