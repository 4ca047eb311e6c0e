package orderdb

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

type orderRow struct {
	ID             int64 `gorm:"primaryKey"`
	OrderNo        string
	UserID         string
	ItemID         int64
	ActivityID     int64
	Quantity       int
	Status         string
	FailureReason  *string
	IdempotencyKey string
	UnitPrice      *int64
	Amount         *int64
	Currency       *string
	PayDeadline    *time.Time
	ReleasedAt     *time.Time
	ReservedAt     time.Time
	// AccessCode is the digest of the presale code the order named (NULL
	// for none); a CREATED order holds one of its uses in sale_codes.
	AccessCode *string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// EventSeq is the seq of the order's last event in the outbox (an
	// order is written with its first).
	EventSeq int
}

func (orderRow) TableName() string { return "orders" }

func (r orderRow) toOrder() order.Order {
	o := order.Order{
		OrderNo: r.OrderNo, UserID: r.UserID, ItemID: r.ItemID, ActivityID: r.ActivityID,
		Quantity: r.Quantity, Status: order.Status(r.Status), IdempotencyKey: r.IdempotencyKey,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		UnitPrice: money(r.UnitPrice, r.Currency), Amount: money(r.Amount, r.Currency),
	}
	if r.FailureReason != nil {
		o.FailureReason = *r.FailureReason
	}
	return o
}

// Order returns one order by number, order.ErrNotFound if MySQL has none.
func (s *Orders) Order(ctx context.Context, orderNo string) (order.Order, error) {
	var row orderRow
	if err := s.db(ctx).Where("order_no = ?", orderNo).Take(&row).Error; err != nil {
		return order.Order{}, wrap("read order", err)
	}
	return row.toOrder(), nil
}

// Orders returns the orders MySQL has among orderNos, by number, asking
// for ListBatch numbers per query.
func (s *Orders) Orders(ctx context.Context, orderNos []string) (map[string]order.Order, error) {
	out := make(map[string]order.Order, len(orderNos))
	for chunk := range slices.Chunk(orderNos, ListBatch) {
		var rows []orderRow
		if err := s.db(ctx).Where("order_no IN ?", chunk).Find(&rows).Error; err != nil {
			return nil, wrap("read orders", err)
		}
		for _, r := range rows {
			out[r.OrderNo] = r.toOrder()
		}
	}
	return out, nil
}

// errFallback rolls a batch back so it can be retried order by order.
var errFallback = errors.New("batch needs order-by-order fulfilment")

// FulfilBatch writes orders of one item or of several (the sizes of one
// sale; none MySQL has already, none twice) all together, in one
// transaction, or a savepoint of ctx's unit of work: one aggregated
// conditional stock update per item, in item order so two batches never
// wait on each other in a cycle, and one multi-row insert. If MySQL cannot
// take all of it (not enough stock for the sum, or a unique key fires) it
// rolls back what it wrote and reports ok false, so the caller goes order
// by order (FulfilOne) and the exact tail of the stock still sells.
//
// It first reads the orders' activities under a shared lock (an end,
// cancel or change of the sale waits for it, and it for them) and records
// as FAILED, taking no stock, every order the sale refuses
// (activity.Activity.Refusal: reserved outside the sale's window as MySQL
// has it now, or above its per-user limit), whatever the instance that
// reserved it believed, and reports it in refused (by number, with the
// reason). An activity MySQL does not have refuses nothing here (the
// consumer dead-letters such events before). An error wraps
// order.ErrUnavailable when the batch must be retried.
func (s *Orders) FulfilBatch(ctx context.Context, reqs []order.FulfilRequest) (refused map[string]string, ok bool, err error) {
	refused = map[string]string{}
	err = s.db(ctx).Transaction(func(tx *gorm.DB) error {
		acts, err := shareActivities(tx, reqs)
		if err != nil {
			return err
		}
		sums := map[int64]int{}
		rows := make([]orderRow, len(reqs))
		for i, r := range reqs {
			if reason := refusal(acts, r.Event); reason != "" {
				refused[r.Event.OrderNo] = reason
				rows[i] = newRow(r, order.Failed, reason)
				continue
			}
			sums[r.Event.ItemID] += r.Event.Quantity
			rows[i] = newRow(r, order.Created, "")
		}
		if whole, err := takeCodes(tx, reqs, refused); err != nil || !whole {
			// A code without a use left: each order alone says whose.
			return cmp.Or(err, errFallback)
		}
		if len(sums) > 0 {
			res := takeStock(tx, sums)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != int64(len(sums)) {
				// An item had less than its orders: each order alone.
				return errFallback
			}
		}
		if err := tx.Create(&rows).Error; err != nil {
			if duplicateKey(err) != "" {
				return errFallback
			}
			return err
		}
		return nil
	})
	if errors.Is(err, errFallback) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, wrap("fulfil batch", err)
	}
	return refused, true, nil
}

// takeStock runs the conditional stock update for every item of sums (the
// units its orders take) in one statement: each item's row loses its sum
// only where it has at least that much, so the rows affected are the items
// that had enough. The rows are locked in item order (MySQL reads an IN
// list on the primary key in key order), as one statement per item in
// sorted order did.
func takeStock(tx *gorm.DB, sums map[int64]int) *gorm.DB {
	items := slices.Sorted(maps.Keys(sums))
	if len(items) == 1 {
		sum := sums[items[0]]
		return tx.Exec("UPDATE item_stock SET stock = stock - ? WHERE item_id = ? AND stock >= ?", sum, items[0], sum)
	}
	var sum strings.Builder
	args := make([]any, 0, 4*len(items)+len(items))
	sum.WriteString("CASE item_id")
	for _, item := range items {
		sum.WriteString(" WHEN ? THEN ?")
		args = append(args, item, sums[item])
	}
	sum.WriteString(" END")
	// The same CASE twice (SET and WHERE), so its arguments twice.
	args = append(args, args...)
	args = append(args, items)
	return tx.Exec("UPDATE item_stock SET stock = stock - "+sum.String()+" WHERE stock >= "+sum.String()+" AND item_id IN ?", args...)
}

// shareActivities reads the activities of reqs inside tx under a shared
// lock: the rows as MySQL has them now, which an end or cancel cannot
// change until tx ends.
func shareActivities(tx *gorm.DB, reqs []order.FulfilRequest) (map[int64]activity.Activity, error) {
	ids := make([]int64, 0, 1)
	seen := map[int64]bool{}
	for _, r := range reqs {
		if id := r.Event.ActivityID; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	var rows []activityRow
	if err := tx.Raw("SELECT * FROM activities WHERE id IN ? LOCK IN SHARE MODE", ids).Scan(&rows).Error; err != nil {
		return nil, err
	}
	// Without their items: what refuses an order here is the sale's window
	// and limit (the consumer checked the item against its copy, and a
	// sale's items never change once it started).
	acts := make(map[int64]activity.Activity, len(rows))
	for _, row := range rows {
		acts[row.ID] = row.activity()
	}
	return acts, nil
}

// refusal is why MySQL's copy of e's sale refuses it, or "".
func refusal(acts map[int64]activity.Activity, e order.Event) string {
	a, ok := acts[e.ActivityID]
	if !ok {
		return ""
	}
	return a.Refusal(e.ReservedAt, e.Quantity)
}

// FulfilOne writes one order MySQL does not have yet, as FulfilBatch
// does, in its own transaction (or savepoint): CREATED when its item has
// the stock, else FAILED with the reason (out of stock, refused by the
// sale, a live order of the user's already, a duplicate request). An order
// someone else wrote meanwhile is reported as it is (Existing).
func (s *Orders) FulfilOne(ctx context.Context, r order.FulfilRequest) (order.FulfilOutcome, error) {
	var out order.FulfilOutcome
	err := s.db(ctx).Transaction(func(tx *gorm.DB) error {
		acts, err := shareActivities(tx, []order.FulfilRequest{r})
		if err != nil {
			return err
		}
		if reason := refusal(acts, r.Event); reason != "" {
			out = order.FulfilOutcome{Status: order.Failed, Reason: reason}
			return tx.Create(ptr(newRow(r, order.Failed, reason))).Error
		}
		// The code before the stock, as the reserve script checks them.
		if reason, err := takeCode(tx, r.Event); err != nil || reason != "" {
			if err != nil {
				return err
			}
			out = order.FulfilOutcome{Status: order.Failed, Reason: reason}
			return tx.Create(ptr(newRow(r, order.Failed, reason))).Error
		}
		res := tx.Exec("UPDATE item_stock SET stock = stock - ? WHERE item_id = ? AND stock >= ?", r.Event.Quantity, r.Event.ItemID, r.Event.Quantity)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			// The FAILED order holds no use: give back the one just taken.
			if err := giveCode(tx, r.Event.ActivityID, r.Event.AccessCode); err != nil {
				return err
			}
			out = order.FulfilOutcome{Status: order.Failed, Reason: order.ReasonOutOfStock}
			return tx.Create(ptr(newRow(r, order.Failed, order.ReasonOutOfStock))).Error
		}
		out = order.FulfilOutcome{Status: order.Created}
		return tx.Create(ptr(newRow(r, order.Created, ""))).Error
	})
	switch k := duplicateKey(err); k {
	case "":
	case "uk_orders_live", "uk_orders_key":
		// The user already holds a live order in this activity, or this
		// key already made an order in it: record the refusal without
		// touching stock. A retry of the key whose first order is still
		// live trips uk_orders_live first; it is a duplicate request too.
		reason := order.ReasonDuplicateRequest
		if k == "uk_orders_live" {
			used, kerr := s.keyUsed(ctx, r.Event)
			if kerr != nil {
				return order.FulfilOutcome{}, kerr
			}
			if !used {
				reason = order.ReasonAlreadyPurchased
			}
		}
		err = s.db(ctx).Create(ptr(newRow(r, order.Failed, reason))).Error
		out = order.FulfilOutcome{Status: order.Failed, Reason: reason}
		if duplicateKey(err) != "uk_orders_order_no" {
			break
		}
		fallthrough
	default: // order_no: someone else wrote it meanwhile
		o, rerr := s.Order(ctx, r.Event.OrderNo)
		if rerr != nil {
			return order.FulfilOutcome{}, rerr
		}
		return order.FulfilOutcome{Status: o.Status, Reason: o.FailureReason, Existing: true}, nil
	}
	if err != nil {
		return order.FulfilOutcome{}, wrap("fulfil order", err)
	}
	return out, nil
}

// keyUsed reports whether e's idempotency key already made an order
// (one that is not FAILED) in e's activity: what uk_orders_key holds.
// OrderOfKey returns the order user placed in activity with key that is or
// was real (any status but FAILED; uk_orders_key holds one), or
// order.ErrNotFound.
func (s *Orders) OrderOfKey(ctx context.Context, activity int64, user, key string) (order.Order, error) {
	var row orderRow
	err := s.db(ctx).Where("activity_id = ? AND user_id = ? AND key_once = ?", activity, user, key).Take(&row).Error
	if err != nil {
		return order.Order{}, wrap("read the order of an idempotency key", err)
	}
	return row.toOrder(), nil
}

// LiveOrderOf is the number of user's live order in activity (what
// uk_orders_live holds), or "" when they have none.
func (s *Orders) LiveOrderOf(ctx context.Context, activity int64, user string) (string, error) {
	var nos []string
	err := s.db(ctx).Model(&orderRow{}).Where("activity_id = ? AND user_id = ? AND live = 1", activity, user).
		Limit(1).Pluck("order_no", &nos).Error
	if err != nil || len(nos) == 0 {
		return "", wrap("read the buyer's live order", err)
	}
	return nos[0], nil
}

func (s *Orders) keyUsed(ctx context.Context, e order.Event) (bool, error) {
	var n int64
	err := s.db(ctx).Model(&orderRow{}).
		Where("activity_id = ? AND user_id = ? AND key_once = ?", e.ActivityID, e.UserID, e.IdempotencyKey).Count(&n).Error
	if err != nil {
		return false, wrap("read order of idempotency key", err)
	}
	return n > 0, nil
}

// Abandon records that an order the API could not confirm failed for
// reason, without taking stock, unless MySQL already has the order; it
// returns the order as MySQL now holds it. The API calls it when it must
// answer 503 but could not release the reservation in Redis: the consumer
// and the stranded-reservation sweep both treat a FAILED row as final and
// release the reservation instead of creating the order, and the unique
// order number lets exactly one of {this row, the consumer's} exist.
// written says whether this call wrote the row.
func (s *Orders) Abandon(ctx context.Context, e order.Event, reason string) (o order.Order, written bool, err error) {
	row := newRow(order.FulfilRequest{Event: e}, order.Failed, reason)
	err = s.db(ctx).Create(&row).Error
	if err == nil {
		return row.toOrder(), true, nil
	}
	if duplicateKey(err) == "uk_orders_order_no" {
		o, err := s.Order(ctx, e.OrderNo)
		return o, false, err
	}
	return order.Order{}, false, wrap("abandon order", err)
}

func newRow(r order.FulfilRequest, st order.Status, reason string) orderRow {
	e := r.Event
	row := orderRow{
		OrderNo: e.OrderNo, UserID: e.UserID, ItemID: e.ItemID, ActivityID: e.ActivityID,
		Quantity: e.Quantity, Status: string(st), IdempotencyKey: e.IdempotencyKey,
		ReservedAt: e.ReservedAt.UTC(), EventSeq: 1,
	}
	if e.AccessCode != "" {
		row.AccessCode = &e.AccessCode
	}
	if r.UnitPrice.Priced() {
		amount := r.UnitPrice.Times(e.Quantity).Amount
		row.UnitPrice, row.Amount, row.Currency = &r.UnitPrice.Amount, &amount, &r.UnitPrice.Currency
	}
	if reason != "" {
		row.FailureReason = &reason
		now := time.Now().UTC()
		row.ReleasedAt = &now // nothing to give back in MySQL
	}
	if st == order.Created && !r.PayDeadline.IsZero() {
		d := r.PayDeadline.UTC()
		row.PayDeadline = &d
	}
	return row
}

func ptr[T any](v T) *T { return &v }

// LiveOrderCount counts CREATED and PAID orders of an item (tests, bench).
func (s *Orders) LiveOrderCount(ctx context.Context, itemID int64) (int64, error) {
	var n int64
	err := s.db(ctx).Model(&orderRow{}).
		Where("item_id = ? AND status IN ?", itemID, []string{string(order.Created), string(order.Paid)}).Count(&n).Error
	return n, wrap("count orders", err)
}

// StatusCounts counts an item's orders by status.
func (s *Orders) StatusCounts(ctx context.Context, itemID int64) (map[order.Status]int64, error) {
	var rows []struct {
		Status string
		N      int64
	}
	err := s.db(ctx).Model(&orderRow{}).Select("status, COUNT(*) AS n").
		Where("item_id = ?", itemID).Group("status").Scan(&rows).Error
	if err != nil {
		return nil, wrap("count orders", err)
	}
	out := map[order.Status]int64{}
	for _, r := range rows {
		out[order.Status(r.Status)] = r.N
	}
	return out, nil
}
