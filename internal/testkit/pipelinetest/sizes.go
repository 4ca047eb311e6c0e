package pipelinetest

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
)

// SizedSale is a running, warmed sale of several items (its sizes).
type SizedSale struct {
	ActivityID int64
	Items      []SaleItem
}

// SaleItem is one size of a SizedSale and its stock when the sale began.
type SaleItem struct {
	ItemID int64
	Label  string
	Stock  int64
}

// Tag is the sale's first item, whose hash tag its keys share.
func (s SizedSale) Tag() int64 { return s.Items[0].ItemID }

// Item is where item's keys are in Redis.
func (s SizedSale) Item(item int64) stockredis.Item { return stockredis.In(s.Tag(), item) }

// CreateSizedSale creates one item per stock (labelled "S1", "S2", ...) and
// a sale of all of them running now with o (its Price, when set, is each
// item's price), and warms it up.
func (a *API) CreateSizedSale(stocks []int64, o SaleOptions) SizedSale {
	t := a.pipeline.t
	t.Helper()
	s := SizedSale{}
	var items []map[string]any
	for i, stock := range stocks {
		var item struct {
			ItemID int64 `json:"item_id"`
		}
		body := map[string]any{"name": fmt.Sprintf("size %d", i+1), "stock": stock}
		if o.Currency != "" {
			body["price"], body["currency"] = o.Price, o.Currency
		}
		if code, err := a.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil, body, &item); err != nil || code != 201 {
			t.Fatalf("create item: %d %v", code, err)
		}
		label := fmt.Sprintf("S%d", i+1)
		s.Items = append(s.Items, SaleItem{ItemID: item.ItemID, Label: label, Stock: stock})
		items = append(items, map[string]any{"item_id": item.ItemID, "label": label})
	}
	now := time.Now().UTC()
	body := map[string]any{"items": items, "starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour),
		"per_user_limit": max(o.PerUserLimit, 1)}
	if o.Buckets > 1 {
		body["stock_buckets"] = o.Buckets
	}
	if o.PaymentWindow > 0 {
		body["payment_window_seconds"] = int(o.PaymentWindow / time.Second)
	}
	var act struct {
		ActivityID int64 `json:"activity_id"`
	}
	if code, err := a.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil, body, &act); err != nil || code != 201 {
		t.Fatalf("create sized activity: %d %v", code, err)
	}
	s.ActivityID = act.ActivityID
	if code, err := a.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/warmup", act.ActivityID), 1, auth.RoleAdmin, nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("warmup: %d %v", code, err)
	}
	return s
}

// PlaceItemOrderAs posts one order for qty units of item (a size) of
// activity as the user whose id is sub.
func (a *API) PlaceItemOrderAs(sub, key string, activity, item int64, qty int) (Placed, error) {
	var body struct {
		OrderNo string `json:"order_no"`
		Status  string `json:"status"`
		Error   struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	code, err := a.DoAs("POST", "/api/v1/orders", sub, "", map[string]string{"Idempotency-Key": key},
		map[string]any{"activity_id": activity, "item_id": item, "quantity": qty}, &body)
	return Placed{Code: code, OrderNo: body.OrderNo, Status: body.Status, Error: body.Error.Code}, err
}

// WaitSizedDrained polls until no reservation of any of the sale's items is
// in flight.
func (p *Pipeline) WaitSizedDrained(s SizedSale, timeout time.Duration) {
	p.t.Helper()
	for _, it := range s.Items {
		p.WaitItemDrained(s.Item(it.ItemID), timeout)
	}
}

// WaitItemDrained is WaitDrained for an item of a sale of several.
func (p *Pipeline) WaitItemDrained(item stockredis.Item, timeout time.Duration) {
	p.t.Helper()
	p.waitDrained(item, timeout)
}

// CheckSized is Check for each item of a sale of several, and for the sale:
// no item oversold (live units + MySQL stock = its initial stock), no buyer
// with two live orders in the sale whatever their items, and each item's
// Redis stock equal to its MySQL stock with nothing in flight. It returns
// what it read, by item.
func (p *Pipeline) CheckSized(s SizedSale) map[int64]Invariants {
	p.t.Helper()
	ctx := context.Background()
	g := p.DB.Gorm().WithContext(ctx)
	var two int64
	if err := g.Raw(`SELECT COUNT(*) FROM (SELECT user_id FROM orders WHERE activity_id = ? AND status IN ('CREATED','PAID')
		GROUP BY user_id HAVING COUNT(*) > 1) d`, s.ActivityID).Scan(&two).Error; err != nil {
		p.t.Fatal(err)
	}
	if two != 0 {
		p.t.Errorf("%d users hold more than one live order in the sale", two)
	}
	out := map[int64]Invariants{}
	for _, it := range s.Items {
		var inv Invariants
		if err := g.Raw("SELECT stock FROM item_stock WHERE item_id = ?", it.ItemID).Scan(&inv.DBStock).Error; err != nil {
			p.t.Fatal(err)
		}
		if err := g.Raw("SELECT COUNT(*), COALESCE(SUM(quantity), 0) FROM orders WHERE item_id = ? AND status IN ('CREATED','PAID')", it.ItemID).
			Row().Scan(&inv.LiveOrders, &inv.LiveUnits); err != nil {
			p.t.Fatal(err)
		}
		snap, err := p.Store.Stock(ctx, s.Item(it.ItemID))
		if err != nil {
			p.t.Fatal(err)
		}
		inv.RedisStock, inv.Inflight, inv.UsersWithTwoLive = snap.Stock, snap.Inflight, two
		if inv.DBStock < 0 || inv.LiveUnits+inv.DBStock != it.Stock {
			p.t.Errorf("item %d (%s) oversold: live units %d + MySQL stock %d != initial stock %d",
				it.ItemID, it.Label, inv.LiveUnits, inv.DBStock, it.Stock)
		}
		if !snap.Warmed || inv.RedisStock != inv.DBStock || inv.Inflight != 0 {
			p.t.Errorf("item %d (%s): Redis stock %d (warmed %v, in flight %d) != MySQL stock %d",
				it.ItemID, it.Label, inv.RedisStock, snap.Warmed, inv.Inflight, inv.DBStock)
		}
		out[it.ItemID] = inv
	}
	return out
}
