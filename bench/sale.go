package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/verify"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// sale is one item and its activity, made through the admin API.
type sale struct {
	item, activity int64
	stock          int64
	quantity       int
	// tag is the first item of a sale of several items (0: item), whose
	// hash tag every Redis key of the sale shares; label is the item's
	// label in it.
	tag   int64
	label string
}

// stockItem names the sale's item for stockredis.
func (s sale) stockItem() reservation.Item {
	if s.tag == 0 {
		return reservation.One(s.item)
	}
	return reservation.In(s.tag, s.item)
}

// adminCall sends an admin request to the first API (they share Redis and
// MySQL, so any one will do) and decodes a JSON answer into out.
func (e *env) adminCall(ctx context.Context, method, path string, body, out any, want int) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	hc := &http.Client{Timeout: 30 * time.Second}
	st, err := load.Do(ctx, hc, load.Call{Method: method, URL: e.apis[0] + path, Token: e.admin, Body: raw}, &buf)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if st != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, st, want, bytes.TrimSpace(buf.Bytes()))
	}
	if out != nil {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			return fmt.Errorf("%s %s: decode %q: %w", method, path, buf.String(), err)
		}
	}
	return nil
}

// newSale creates an item with stock, an activity running now whose
// per-user limit is quantity and whose stock is split over buckets, and
// warms it up.
func (e *env) newSale(ctx context.Context, name string, stock int64, quantity, buckets int) (sale, error) {
	now := time.Now().UTC()
	return e.makeSale(ctx, name, stock, quantity, map[string]any{
		"starts_at": now.Add(-time.Minute), "ends_at": now.Add(3 * time.Hour), "stock_buckets": buckets,
	})
}

// makeSale creates an item with stock and an activity selling it with
// per-user limit quantity and the activity fields in act (its times at
// least), and warms it up.
func (e *env) makeSale(ctx context.Context, name string, stock int64, quantity int, act map[string]any) (sale, error) {
	s := sale{stock: stock, quantity: quantity}
	var item struct {
		ItemID int64 `json:"item_id"`
	}
	if err := e.adminCall(ctx, http.MethodPost, "/admin/v1/items", map[string]any{
		"name": fmt.Sprintf("bench %s %s", name, e.runID), "stock": stock,
	}, &item, http.StatusCreated); err != nil {
		return s, err
	}
	s.item = item.ItemID
	e.items = append(e.items, s.item)
	body := map[string]any{"item_id": s.item, "per_user_limit": quantity}
	for k, v := range act {
		body[k] = v
	}
	var created struct {
		ActivityID int64 `json:"activity_id"`
	}
	if err := e.adminCall(ctx, http.MethodPost, "/admin/v1/activities", body, &created, http.StatusCreated); err != nil {
		return s, err
	}
	s.activity = created.ActivityID
	if err := e.adminCall(ctx, http.MethodPost, fmt.Sprintf("/admin/v1/activities/%d/warmup", s.activity), nil, nil, http.StatusOK); err != nil {
		return s, err
	}
	return s, nil
}

// drain waits until no units of the items are in flight (every
// reservation confirmed or released), polling Redis. It returns how long
// that took and whether it happened before timeout.
func (e *env) drain(ctx context.Context, items []reservation.Item, timeout time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	for {
		var inflight int64
		for _, it := range items {
			snap, err := e.store.Stock.Stock(ctx, it)
			if err != nil {
				return time.Since(start), false, err
			}
			inflight += snap.Inflight
		}
		if inflight == 0 {
			return time.Since(start), true, nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), false, nil
		}
		if err := e.checkPrograms(); err != nil {
			return time.Since(start), false, err
		}
		select {
		case <-ctx.Done():
			return time.Since(start), false, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// answer is the API's answer to one order request.
type answer struct {
	user       int64
	key        string
	sent, done time.Duration
	outcome    load.Outcome
	orderNo    string
	// pick is the item asked for, by its place in the load's bodies
	// (-1: the load's one body).
	pick int
}

// tally is what the bench read back about one sale.
type tally struct {
	obs     verify.Observation
	created int64 // live orders
	failed  int64
	// orders maps each of the item's order numbers in MySQL to its status.
	orders map[string]order.Status
}

// observe reads the sale's final state from MySQL and Redis and builds the
// observation the invariants are checked on: answers are what the API
// answered (every 202 at least), errs the requests that failed, demand the
// most units the buyers could have bought.
func (e *env) observe(ctx context.Context, s sale, answers []answer, errs, demand int64, drained bool) (tally, error) {
	var t tally
	o := &t.obs
	o.InitialStock, o.Quantity, o.DemandUnits, o.Errors, o.Drained = s.stock, int64(s.quantity), demand, errs, drained
	var err error
	if o.DBStock, err = e.db.Activities.ItemStock(ctx, s.item); err != nil {
		return t, err
	}
	snap, err := e.store.Stock.Stock(ctx, s.stockItem())
	if err != nil {
		return t, err
	}
	o.RedisWarmed, o.RedisStock, o.Inflight = snap.Warmed, snap.Stock, snap.Inflight

	g := e.db.Gorm().WithContext(ctx)
	rows, err := g.Raw("SELECT order_no, status, quantity FROM orders WHERE item_id = ?", s.item).Rows()
	if err != nil {
		return t, fmt.Errorf("read orders: %w", err)
	}
	t.orders = map[string]order.Status{}
	for rows.Next() {
		var no, st string
		var q int64
		if err := rows.Scan(&no, &st, &q); err != nil {
			rows.Close()
			return t, err
		}
		status := order.Status(st)
		t.orders[no] = status
		if status.Live() {
			o.LiveOrders++
			o.LiveUnits += q
		} else if status == order.Failed {
			t.failed++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t, err
	}
	t.created = o.LiveOrders

	var over struct{ Users, Extra int64 }
	if err := g.Raw(`SELECT COUNT(*) AS users, COALESCE(SUM(n - 1), 0) AS extra FROM (
		SELECT user_id, COUNT(*) AS n FROM orders WHERE activity_id = ? AND status IN ('CREATED', 'PAID')
		GROUP BY user_id HAVING COUNT(*) > 1) t`, s.activity).Scan(&over).Error; err != nil {
		return t, fmt.Errorf("count live orders per user: %w", err)
	}
	o.UsersOverLimit, o.ExtraLiveOrders = over.Users, over.Extra

	acked := map[string]bool{}
	var missing []string
	for _, a := range answers {
		if a.outcome != load.Accepted || a.orderNo == "" || acked[a.orderNo] {
			continue
		}
		acked[a.orderNo] = true
		if _, ok := t.orders[a.orderNo]; !ok {
			missing = append(missing, a.orderNo)
		}
	}
	// Not in MySQL: fine if its reservation was released (FAILED). One
	// the consumer confirmed since MySQL was read is looked up again.
	var recheck []string
	for _, no := range missing {
		info, err := e.store.Reservations.Reservation(ctx, no)
		switch {
		case errors.Is(err, order.ErrNotFound):
			o.Unresolved = append(o.Unresolved, no+" (no reservation)")
		case err != nil:
			return t, err
		case info.State == reservation.StateReleased:
		case info.State == reservation.StateConfirmed:
			recheck = append(recheck, no)
		default:
			o.Unresolved = append(o.Unresolved, no+" ("+string(info.State)+")")
		}
	}
	for len(recheck) > 0 {
		n := min(len(recheck), 1000)
		found, err := e.db.Orders.Orders(ctx, recheck[:n])
		if err != nil {
			return t, err
		}
		for _, no := range recheck[:n] {
			if _, ok := found[no]; !ok {
				o.Unresolved = append(o.Unresolved, no+" (CONFIRMED in Redis, not in MySQL)")
			}
		}
		recheck = recheck[n:]
	}
	o.Accepted = int64(len(acked))
	for no, st := range t.orders {
		if st.Live() && !acked[no] {
			o.Unacknowledged++
		}
	}
	var va []verify.Answer
	for _, a := range answers {
		va = append(va, verify.Answer{User: a.user, Key: a.key, Sent: a.sent, Done: a.done,
			Accepted: a.outcome == load.Accepted, OrderNo: a.orderNo})
	}
	o.ReplayChecked, o.ReplayMismatches = verify.CheckReplays(va)
	return t, nil
}
