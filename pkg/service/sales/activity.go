package sales

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/unit"
)

// PricedItem is one item of a sale as the operator listed it, with the
// sale price given for it (nil: its item's).
type PricedItem struct {
	ItemID    int64
	Label     string
	SalePrice *int64
}

// NewActivity is a sale the operator asks for, decoded.
type NewActivity struct {
	// Sale is the sale's item (or Items), times and settings; its Items
	// are set from Items.
	Sale activity.Draft
	// Items, when not nil, are the sale's items (a sale of several).
	Items []PricedItem
	// SalePrice is the sale price of a sale of one item (nil: the
	// item's); Currency that of every sale price given (nil: each item's).
	SalePrice *int64
	Currency  *string
	// Room is the sale's waiting room (nil: none).
	Room *activity.WaitingRoom
	// Mode is "first_come" ("") or "draw", which needs EntriesCloseAt.
	Mode           string
	EntriesCloseAt *time.Time
	// By is the operator's subject, for the sale's audit.
	By string
}

// Create checks the new sale n and writes it: Redis first, for the
// layout its keys have now (a lost answer is an error, never "no keys");
// MySQL then checks the items' other sales with the items' rows locked.
func (s *Service) Create(ctx context.Context, n NewActivity) (activity.Activity, error) {
	n.Sale.Items = listed(n.Items)
	a, err := n.Sale.Activity(s.Now())
	if err != nil {
		return activity.Activity{}, err
	}
	if n.Room != nil {
		a.Room = *n.Room
		if err := a.CheckRoom(); err != nil {
			return activity.Activity{}, err
		}
	}
	if err := a.CheckAccess(); err != nil {
		return activity.Activity{}, err
	}
	if err := s.saleDraw(&a, n.Mode, n.EntriesCloseAt); err != nil {
		return activity.Activity{}, err
	}
	if n.Items != nil {
		if n.SalePrice != nil {
			return activity.Activity{}, order.Errorf(order.ErrInvalidArgument, "a sale of items takes each item's sale_price in items, not one sale_price")
		}
		if a.Items, err = s.saleItems(ctx, n.Items, n.Currency); err != nil {
			return activity.Activity{}, err
		}
	} else if a.SalePrice, err = s.salePrice(ctx, "sale_price", n.Sale.ItemID, n.SalePrice, n.Currency); err != nil {
		return activity.Activity{}, err
	}
	live, err := s.layouts(ctx, a)
	if err != nil {
		return activity.Activity{}, err
	}
	return unit.Do(ctx, s.Tx, func(ctx context.Context) (activity.Activity, error) {
		a, err := s.Sales.CreateSale(ctx, a, s.keyGuard(live))
		if err != nil {
			return a, err
		}
		return a, s.audit(ctx, a, activity.ActionCreate, n.By)
	})
}

// audit records, in ctx's unit, that operator by did action to sale a,
// with a's settings after it.
func (s *Service) audit(ctx context.Context, a activity.Activity, action activity.Action, by string) error {
	if s.Audit == nil {
		return nil
	}
	return s.Audit.RecordAction(ctx, activity.AuditEntry{ActivityID: a.ID, Action: action, Subject: by, At: s.Now(),
		Detail: a.SettingsDetail()})
}

// Change is a change of a sale the operator asks for, decoded.
type Change struct {
	activity.Change
	// Items, when not nil, are the sale's new items (SaleChange.Items is
	// set from them).
	Items []PricedItem
	// Currency is that of the items' sale prices (nil: each item's).
	Currency *string
	// Room is the sale's new room (nil: unchanged; its seed stays once
	// drawn).
	Room *activity.WaitingRoom
	// By is the operator's subject, for the sale's audit.
	By string
}

// Change changes sale id's times, per-user limit, bucket count, items,
// room or access before it starts (up to activity.SettingsGuard before), and, once it
// was warmed up, not its bucket count, its items nor a later end (the
// keys have them).
func (s *Service) Change(ctx context.Context, id int64, c Change) (activity.Activity, error) {
	sc := c.Change
	sc.Room = c.Room != nil
	sc.Items = listed(c.Items)
	if err := sc.Check(); err != nil {
		return activity.Activity{}, err
	}
	ch := activity.Patch{StartsAt: sc.StartsAt, EndsAt: sc.EndsAt, PerUserLimit: sc.PerUserLimit,
		StockBuckets: sc.StockBuckets, PaymentWindow: s.PaymentWindow, Room: c.Room, Access: sc.Access}
	if c.Items != nil {
		items, err := s.saleItems(ctx, c.Items, c.Currency)
		if err != nil {
			return activity.Activity{}, err
		}
		ch.Items = items
	}
	if sc.StockBuckets != nil || c.Items != nil {
		g, err := s.patchGuard(ctx, id, ch.Items)
		if err != nil {
			return activity.Activity{}, err
		}
		ch.Guard = &g
	}
	a, err := unit.Do(ctx, s.Tx, func(ctx context.Context) (activity.Activity, error) {
		a, err := s.Sales.PatchActivity(ctx, id, ch, s.Now())
		if err != nil {
			return a, err
		}
		return a, s.audit(ctx, a, activity.ActionChange, c.By)
	})
	if err == nil && sc.Access != nil && a.AccessMode().Coded() {
		s.loadCodes(ctx, a)
	}
	return a, err
}

// loadCodes loads a sale that became coded's codes into Redis now: a sale
// warmed up while it was open is not warmed again by the schedule, and its
// buyers would find the codes not loaded. A failure is logged: a warm-up
// (idempotent) loads them, as does the buyers' side when it finds them
// not loaded.
func (s *Service) loadCodes(ctx context.Context, a activity.Activity) {
	if s.Codes == nil {
		return
	}
	if _, err := s.Codes.Load(ctx, a, s.CodeReader); err != nil && s.Log != nil {
		s.Log.Warn("the sale's access is now coded; its codes are not loaded into Redis yet (a warm-up loads them)",
			"request_id", logs.RequestID(ctx), "activity_id", a.ID, "err", err)
	}
}

// listed is items as order.NewSale and order.SaleChange list them (nil:
// nil).
func listed(items []PricedItem) []activity.NewItem {
	if items == nil {
		return nil
	}
	out := make([]activity.NewItem, len(items))
	for i, it := range items {
		out[i] = activity.NewItem{ItemID: it.ItemID, Label: it.Label}
	}
	return out
}

// saleDraw sets a new sale's draw as the operator asked for it (mode,
// closes): its seed drawn now, and its commitment, which MySQL stores with
// it and every answer shows from then on.
func (s *Service) saleDraw(a *activity.Activity, mode string, closes *time.Time) error {
	d, err := activity.NewDraw(mode, closes)
	if err != nil {
		return err
	}
	if d.On() {
		d.Seed = draw.NewSeed()
		d.Commitment = draw.Seed(d.Seed).Commitment()
	}
	a.Draw = d
	return a.CheckDraw(s.Now(), s.PaymentWindow)
}

// saleItems are the items of a sale as the operator listed them (already
// checked by order.CheckSaleItems), each with the sale price given for it
// in currency (or its item's).
func (s *Service) saleItems(ctx context.Context, items []PricedItem, currency *string) ([]activity.Item, error) {
	out := make([]activity.Item, len(items))
	for i, it := range items {
		price, err := s.salePrice(ctx, fmt.Sprintf("items[%d].sale_price", i), it.ItemID, it.SalePrice, currency)
		if err != nil {
			return nil, err
		}
		out[i] = activity.Item{ItemID: it.ItemID, Label: it.Label, SalePrice: price}
	}
	return out, nil
}

// salePrice is the sale price the operator gave for item (field names it
// in errors), in currency or else the item's: zero when none was given.
func (s *Service) salePrice(ctx context.Context, field string, item int64, price *int64, currency *string) (order.Money, error) {
	if price != nil && currency == nil {
		// The sale is priced in the item's currency unless told otherwise.
		it, err := s.Sales.Item(ctx, item)
		if err != nil {
			return order.Money{}, err
		}
		if !it.Price.Priced() {
			return order.Money{}, order.Errorf(order.ErrInvalidArgument, "item %d has no price: give %s a currency", item, field)
		}
		currency = &it.Price.Currency
	}
	return order.OptionalPrice(field, price, currency)
}

// layouts are the layouts Redis holds now for each of a's items, under
// a's tag.
func (s *Service) layouts(ctx context.Context, a activity.Activity) (map[int64]activity.Layout, error) {
	live := map[int64]activity.Layout{}
	for _, id := range a.ItemIDs() {
		l, err := s.Stock.Layout(ctx, reservation.In(a.ItemID, id))
		if err != nil {
			return nil, err
		}
		live[id] = l
	}
	return live, nil
}

// keyGuard is what a change of a sale is checked against: live, the layout
// Redis holds for each item (read just before), and how long each sale's
// keys live, by the rule placing gives them their lifetimes with.
func (s *Service) keyGuard(live map[int64]activity.Layout) activity.KeyGuard {
	return activity.KeyGuard{Live: live, Now: s.Now(), KeysUntil: func(a activity.Activity) time.Time {
		return a.KeysLiveUntil(s.PaymentWindow)
	}}
}

// patchGuard is keyGuard for a change of activity id's bucket count or
// items (nil: unchanged): the layout Redis holds now for each item the sale
// will have, under the tag it will have.
func (s *Service) patchGuard(ctx context.Context, id int64, items []activity.Item) (activity.KeyGuard, error) {
	a, err := s.Sales.Activity(ctx, id)
	if err != nil {
		return activity.KeyGuard{}, err
	}
	if items != nil {
		a.ItemID, a.Items = items[0].ItemID, items
	}
	live, err := s.layouts(ctx, a)
	if err != nil {
		return activity.KeyGuard{}, err
	}
	return s.keyGuard(live), nil
}
