package draws_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/schematest"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/foundation/unit"
	"github.com/seckill/seckill/pkg/service/draws"
	"github.com/seckill/seckill/pkg/service/fulfilment"
	"github.com/seckill/seckill/pkg/service/sales"
)

// drawn is a draw sale whose draw ran, and the services that act on it as
// the api and the consumer do: the draw's (runs and settles), fulfilment
// (writes the picks' orders), the sale's (ends it).
type drawn struct {
	db      *mysqltest.DB
	a       activity.Activity
	draws   *draws.Service
	fulfil  *fulfilment.Service
	sales   *sales.Service
	ranking []draw.Picked
	numbers *order.NumberGenerator
}

// newDrawn makes a sale of one item of stock units, n buyers entered for
// one unit each, and runs its draw: stock winners, then the alternates.
func newDrawn(t *testing.T, stock int64, n int) *drawn {
	t.Helper()
	db := mysqltest.New(t)
	ctx := context.Background()
	it, err := db.Activities.CreateItem(ctx, "sneaker", stock)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	closes := now.Add(time.Minute)
	a, err := db.Activities.CreateActivity(ctx, activity.Activity{ItemID: it.ID, Items: []activity.Item{{ItemID: it.ID}},
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PerUserLimit: 1,
		Draw: activity.Draw{EntriesCloseAt: closes, Seed: draw.NewSeed()}})
	if err != nil {
		t.Fatal(err)
	}
	d := &drawn{db: db, a: a, numbers: order.NewNumberGenerator(),
		draws:  &draws.Service{Tx: db, Store: db.Draws, Events: db.Outbox, Now: func() time.Time { return now }},
		fulfil: &fulfilment.Service{Tx: db, Orders: db.Orders, Events: db.Outbox, Draws: db.Draws},
		sales:  &sales.Service{Tx: db, Sales: db.Activities, Closer: noCloser{}, Now: time.Now}}
	for u := range n {
		if _, created, err := d.draws.Enter(ctx, a, strconv.Itoa(u), 0, 1, "", ""); err != nil || !created {
			t.Fatalf("enter %d: created %v, %v", u, created, err)
		}
	}
	if res, err := d.draws.Run(ctx, a.ID, closes); err != nil || !res.Ran || res.Winners != int(min(stock, int64(n))) {
		t.Fatalf("the run: %+v, %v", res, err)
	}
	if d.ranking, err = db.Draws.Results(ctx, a.ID); err != nil || len(d.ranking) != n {
		t.Fatalf("the ranking: %d entries, %v", len(d.ranking), err)
	}
	return d
}

// noCloser closes nothing: the sales here have no orders of buyers'.
type noCloser struct{}

func (noCloser) CloseCancelled(context.Context, int64, int) (int, error) { return 0, nil }

// number gives p an order number as the drawer does (NumberPick) and
// returns the request of its order, reserved at at.
func (d *drawn) number(t *testing.T, p draw.Picked, at time.Time) order.FulfilRequest {
	t.Helper()
	no, err := d.db.Draws.NumberPick(context.Background(), p.EntryID, d.numbers.NextFor(p.ItemID, p.UserID))
	if err != nil {
		t.Fatal(err)
	}
	return order.FulfilRequest{Event: order.Event{Version: order.EventVersion, OrderNo: no, IdempotencyKey: order.DrawKey(p.EntryID),
		UserID: p.UserID, ItemID: p.ItemID, ActivityID: d.a.ID, Quantity: p.Quantity, ReservedAt: at},
		PayDeadline: at.Add(time.Hour)}
}

// write has the consumer write the orders of reqs and wants each to end
// as want.
func (d *drawn) write(t *testing.T, want order.Status, reqs ...order.FulfilRequest) {
	t.Helper()
	out, err := d.fulfil.Fulfil(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if o := out[r.Event.OrderNo]; o.Status != want {
			t.Fatalf("order %s: %+v, want %s", r.Event.OrderNo, o, want)
		}
	}
}

// close closes a CREATED order as the buyer's cancel does, with its event:
// its unit goes back to MySQL's stock.
func (d *drawn) close(t *testing.T, no string) {
	t.Helper()
	err := d.db.InTx(context.Background(), func(ctx context.Context) error {
		tr, err := d.db.Orders.CloseOrder(ctx, "", no, order.ReasonCancelled)
		if err != nil || !tr.Won {
			return errors.Join(err, errors.New("not closed"))
		}
		return d.db.Outbox.Record(ctx, outbox.Of(outbox.OrderClosed, tr.Order))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stream reads the entry's events and checks what every entry stream
// holds: seq 1, 2, ... with the ids they give, the entry's own fields, the
// documented schema, times in commit order. It returns their types.
func (d *drawn) stream(t *testing.T, p draw.Picked) ([]outbox.Event, string) {
	t.Helper()
	s := "entry_" + p.EntryID
	evs, err := d.db.Outbox.Stream(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	types := ""
	for i, e := range evs {
		if e.Data.Seq != i+1 || e.ID != outbox.IDOf(s, i+1) || e.Stream() != s {
			t.Fatalf("entry %s: event %d is seq %d id %s", p.EntryID, i, e.Data.Seq, e.ID)
		}
		if e.Data.EntryID != p.EntryID || e.Data.SaleID != d.a.ID || e.Data.ItemID != p.ItemID || e.Data.Quantity != p.Quantity ||
			e.Data.Subject != p.UserID || e.Data.Rank != p.Rank {
			t.Fatalf("entry %+v: event %+v does not describe it", p, e.Data)
		}
		if i > 0 && e.Time.Before(evs[i-1].Time) {
			t.Fatalf("entry %s: event %d at %s, before the one it follows", p.EntryID, i, e.Time)
		}
		if err := schematest.CheckEvent(t, e); err != nil {
			t.Fatalf("entry %s: event %+v does not follow the schema: %v", p.EntryID, e, err)
		}
		types += string(e.Type) + " "
	}
	return evs, strings.TrimSpace(types)
}

// failingEvents records the events in the unit, then fails: the unit rolls
// back.
type failingEvents struct{ db *mysqltest.DB }

var errLater = errors.New("a later write in the unit failed")

func (f failingEvents) Record(ctx context.Context, evs ...outbox.Event) error {
	if err := f.db.Outbox.Record(ctx, evs...); err != nil {
		return err
	}
	return errLater
}

// The life of a draw's entries after the draw: two winners, four
// alternates. A winner's order closes and the first alternate is promoted:
// its entry.promoted is written when its order commits CREATED, not when
// it is numbered, not by a unit that rolled back, and once however many
// consumers write the order. The second alternate's first order fails (no
// unit for it: no event), it waits again, and once a unit comes back its
// new order promotes it. The third is numbered when the sale ends, its
// order on its way; the fourth has none. The end tells the fourth it was
// not selected (not a settle that rolled back), and the third once its
// order failed (reserved after the end); the winners hear nothing more. Every stream counts from 1 with no
// gap, and a settled draw writes nothing more.
func TestAlternatesArePromotedOrNotSelected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDrawn(t, 2, 6)
	w1, w2, a1, a2, a3, a4 := d.ranking[0], d.ranking[1], d.ranking[2], d.ranking[3], d.ranking[4], d.ranking[5]
	if w1.Outcome != draw.Won || w2.Outcome != draw.Won || a1.Outcome != draw.Alternate || a4.Outcome != draw.Alternate {
		t.Fatalf("the ranking: %+v", d.ranking)
	}
	now := time.Now()
	won1, won2 := d.number(t, w1, now), d.number(t, w2, now)
	d.write(t, order.Created, won1, won2)

	// Before the end, nothing is settled.
	if res, err := d.draws.Settle(ctx, d.a.ID, time.Now()); err != nil || res != (draws.Settled{}) {
		t.Fatalf("a settle of a sale still on: %+v, %v", res, err)
	}

	// A winner's order closes: the first alternate is numbered, then its
	// order is written, first by a unit that rolls back.
	d.close(t, won1.Event.OrderNo)
	promote1 := d.number(t, a1, time.Now())
	if _, typ := d.stream(t, a1); typ != "entry.alternate" {
		t.Fatalf("a numbered alternate's events: %s; its promotion waits for its order", typ)
	}
	rolled := &fulfilment.Service{Tx: d.db, Orders: d.db.Orders, Events: failingEvents{d.db}, Draws: d.db.Draws}
	if _, err := rolled.Fulfil(ctx, []order.FulfilRequest{promote1}); !errors.Is(err, errLater) {
		t.Fatalf("a unit that fails: %v", err)
	}
	if _, typ := d.stream(t, a1); typ != "entry.alternate" {
		t.Fatalf("after a unit that rolled back: %s", typ)
	}
	var wg sync.WaitGroup
	for range 3 { // three consumers write it at once, and then it is redelivered
		wg.Go(func() {
			if _, err := d.fulfil.Fulfil(ctx, []order.FulfilRequest{promote1}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	d.write(t, order.Created, promote1)
	evs, typ := d.stream(t, a1)
	if typ != "entry.alternate entry.promoted" || evs[1].Data.OrderNo != promote1.Event.OrderNo || evs[1].Data.Status != outbox.StatusPromoted {
		t.Fatalf("the promoted alternate's events: %s %+v", typ, evs)
	}
	// Its order's own stream names the entry too.
	if oevs, err := d.db.Outbox.Stream(ctx, promote1.Event.OrderNo); err != nil || len(oevs) != 1 || oevs[0].Type != outbox.OrderCreated ||
		oevs[0].Data.EntryID != a1.EntryID {
		t.Fatalf("the promoted alternate's order's events: %+v, %v", oevs, err)
	}

	// The second alternate's order finds no unit (MySQL has none free):
	// FAILED, no promotion; it waits in its place again.
	failed := d.number(t, a2, time.Now())
	d.write(t, order.Failed, failed)
	if n, err := d.db.Draws.ReturnFailedAlternates(ctx, d.a.ID); err != nil || n != 1 {
		t.Fatalf("return failed alternates: %d, %v", n, err)
	}
	if _, typ := d.stream(t, a2); typ != "entry.alternate" {
		t.Fatalf("an alternate whose order failed: %s", typ)
	}
	d.close(t, won2.Event.OrderNo)
	promote2 := d.number(t, a2, time.Now())
	if promote2.Event.OrderNo == failed.Event.OrderNo {
		t.Fatal("the alternate kept its failed order's number")
	}
	d.write(t, order.Created, promote2)
	if evs, typ := d.stream(t, a2); typ != "entry.alternate entry.promoted" || evs[1].Data.OrderNo != promote2.Event.OrderNo {
		t.Fatalf("the alternate promoted with its second order: %s %+v", typ, evs)
	}

	// The third is numbered, its order on its way, when the sale ends.
	late := d.number(t, a3, time.Now())
	ended, err := d.sales.End(ctx, d.a.ID, "operator")
	if err != nil {
		t.Fatal(err)
	}
	after := ended.EndsAt.Add(time.Millisecond)
	rolledSettle := &draws.Service{Tx: d.db, Store: d.db.Draws, Events: failingEvents{d.db}, Now: time.Now}
	if _, err := rolledSettle.Settle(ctx, d.a.ID, after); !errors.Is(err, errLater) {
		t.Fatalf("a settle whose unit fails: %v", err)
	}
	if _, typ := d.stream(t, a4); typ != "entry.alternate" {
		t.Fatalf("after a settle that rolled back: %s", typ)
	}
	if res, err := d.draws.Settle(ctx, d.a.ID, after); err != nil || res.NotSelected != 1 || res.Done {
		t.Fatalf("the settle after the end: %+v, %v; want the fourth alternate, the third one's order still on its way", res, err)
	}
	if _, err := d.db.Draws.NumberPick(ctx, a4.EntryID, d.numbers.NextFor(a4.ItemID, a4.UserID)); !errors.Is(err, order.ErrActivityNotActive) {
		t.Fatalf("numbering an alternate not selected: %v", err)
	}
	evs, typ = d.stream(t, a4)
	if typ != "entry.alternate entry.not_selected" || evs[1].Data.Reason != order.ReasonSaleEnded || evs[1].Data.OrderNo != "" {
		t.Fatalf("the alternate without an order at the end: %s %+v", typ, evs)
	}
	if _, typ := d.stream(t, a3); typ != "entry.alternate" {
		t.Fatalf("an alternate whose order is on its way: %s", typ)
	}
	if ids, err := d.db.Draws.DrawsToSettle(ctx, after); err != nil || len(ids) != 1 || ids[0] != d.a.ID {
		t.Fatalf("draws to settle: %v, %v", ids, err)
	}
	// Its order arrives, reserved after the end: MySQL refuses it, and the
	// next settle tells it.
	late.Event.ReservedAt = after
	d.write(t, order.Failed, late)
	if res, err := d.draws.Settle(ctx, d.a.ID, after); err != nil || res.NotSelected != 1 || !res.Done {
		t.Fatalf("the settle once the last order failed: %+v, %v", res, err)
	}
	if _, typ := d.stream(t, a3); typ != "entry.alternate entry.not_selected" {
		t.Fatalf("the alternate whose order failed after the end: %s", typ)
	}
	if ids, err := d.db.Draws.DrawsToSettle(ctx, after); err != nil || len(ids) != 0 {
		t.Fatalf("draws to settle once settled: %v, %v", ids, err)
	}
	if res, err := d.draws.Settle(ctx, d.a.ID, after); err != nil || res.NotSelected != 0 {
		t.Fatalf("a settle again: %+v, %v", res, err)
	}
	for _, w := range []draw.Picked{w1, w2} {
		if _, typ := d.stream(t, w); typ != "entry.won" {
			t.Fatalf("a winner's events: %s", typ)
		}
	}
	for _, p := range []draw.Picked{a1, a2} {
		if _, typ := d.stream(t, p); typ != "entry.alternate entry.promoted" {
			t.Fatalf("a promoted alternate after the end: %s", typ)
		}
	}
}

// lostAnswers is a unit of work whose commit's answer is lost once in
// every `every` units: the unit committed, the caller hears an error.
type lostAnswers struct {
	unit.Work
	mu    sync.Mutex
	n     int
	every int
}

var errLost = errors.New("the commit's answer was lost")

func (l *lostAnswers) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := l.Work.InTx(ctx, fn); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if l.n%l.every == 0 {
		return errLost
	}
	return nil
}

// A cancelled sale's alternates are told, each exactly once, however the
// settle runs: two operators cancel it at once while three drawers settle
// it, and one unit in three has its answer lost; each caller retries until
// its settle says the draw is settled. Every alternate, over more pages
// than one unit marks, has its outcome then entry.not_selected
// (SALE_CANCELLED), seq 1 and 2.
func TestEachAlternateIsNotSelectedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const entrants = 1300
	d := newDrawn(t, 1, entrants)
	lossy := &draws.Service{Tx: &lostAnswers{Work: d.db, every: 3}, Store: d.db.Draws, Events: d.db.Outbox, Now: time.Now}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, _, err := d.sales.Cancel(ctx, d.a.ID, "operator"); err != nil {
				t.Error(err)
			}
		})
	}
	var mu sync.Mutex
	told, done := 0, false
	for range 3 {
		wg.Go(func() {
			for try := 0; ; try++ {
				res, err := lossy.Settle(ctx, d.a.ID, time.Now())
				mu.Lock()
				told += res.NotSelected
				done = done || res.Done
				mu.Unlock()
				switch {
				case errors.Is(err, errLost) && try < 50:
					continue
				case err != nil:
					t.Error(err)
					return
				case res.Done:
					return
				}
				time.Sleep(time.Millisecond) // not cancelled yet, or more pages to go
			}
		})
	}
	wg.Wait()
	if !done {
		t.Fatal("no settle found the draw settled")
	}
	notSelected := 0
	for _, p := range d.ranking {
		evs, typ := d.stream(t, p)
		switch {
		case p.Outcome == draw.Won && typ == "entry.won":
		case p.Outcome == draw.Alternate && typ == "entry.alternate entry.not_selected" && evs[1].Data.Reason == order.ReasonSaleCancelled:
			notSelected++
		default:
			t.Fatalf("entry %+v: %s %+v", p, typ, evs)
		}
	}
	if notSelected != entrants-1 {
		t.Fatalf("%d alternates not selected, want %d", notSelected, entrants-1)
	}
	// A lost answer's page is counted by no caller, but written once.
	if told > notSelected {
		t.Fatalf("the settles counted %d events, %d written", told, notSelected)
	}
}

// An alternate whose order was refused for what the buyer asked (over the
// sale's per-buyer limit) is not put back in its place: promoted again,
// the same order would fail again, on every pass of the drawer, until the
// end. It keeps its failed order, and the end tells it it was not
// selected. One whose order found no unit waits again (the test above).
func TestAnAlternateRefusedForGoodStaysRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDrawn(t, 1, 2)
	w, alt := d.ranking[0], d.ranking[1]
	won := d.number(t, w, time.Now())
	d.write(t, order.Created, won)
	d.close(t, won.Event.OrderNo)
	over := d.number(t, alt, time.Now())
	over.Event.Quantity = d.a.PerUserLimit + 1
	d.write(t, order.Failed, over)
	if n, err := d.db.Draws.ReturnFailedAlternates(ctx, d.a.ID); err != nil || n != 0 {
		t.Fatalf("an alternate refused OVER_LIMIT was put back: %d, %v", n, err)
	}
	res, err := d.db.Draws.Results(ctx, d.a.ID)
	if err != nil || len(res) != 2 || res[1].OrderNo != over.Event.OrderNo {
		t.Fatalf("the alternate's order number: %+v, %v", res, err)
	}
	ended, err := d.sales.End(ctx, d.a.ID, "operator")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.draws.Settle(ctx, d.a.ID, ended.EndsAt.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, typ := d.stream(t, alt); typ != "entry.alternate entry.not_selected" {
		t.Fatalf("the refused alternate's events after the end: %s", typ)
	}
}
