package stockredis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// Reservation is a request to take stock for one order.
type Reservation struct {
	OrderNo        string
	UserID         string
	ItemID         int64
	ActivityID     int64
	Quantity       int
	IdempotencyKey string
	At             time.Time
	// QuotaTTL keeps the quota and idempotency records (until the activity
	// ends plus a margin); ReservationTTL keeps the reservation hash (past
	// the payment window, so cancel and timeout can release through it).
	QuotaTTL       time.Duration
	ReservationTTL time.Duration
	// Buckets is the number of stock buckets of the activity (0 or 1: the
	// item has one stock key).
	Buckets int
	// Tag is the sale's first item (activity.Activity.ItemID), whose hash tag
	// the keys share; 0 means ItemID. The order number names it too.
	Tag int64
	// Room is true for a sale with a waiting room: the order must hold an
	// admission of the buyer's (see Room), and uses it up.
	Room bool
}

// item is where the reservation's keys are.
func (r Reservation) item() Item { return Item{ID: r.ItemID, Tag: r.Tag}.tagged() }

// ReserveResult says what the reserve script did.
type ReserveResult struct {
	// OrderNo is the new order's number, or the original one for a
	// duplicate idempotency key.
	OrderNo string
	// Duplicate is true when the key was used before; nothing was reserved.
	Duplicate bool
	// Left is the stock left after the reservation (or seen when sold out).
	Left int64
}

// Reserve runs the reserve script. It returns order.ErrNotWarmed,
// order.ErrAlreadyPurchased or order.ErrSoldOut for the refusals, and an
// error wrapping order.ErrUnavailable when Redis cannot be reached.
func (s *Reservations) Reserve(ctx context.Context, r Reservation) (ReserveResult, error) {
	switch {
	case r.Room && r.Buckets > 1:
		return ReserveResult{}, fmt.Errorf("reserve: a sale with a waiting room has one stock key an item: %w", order.ErrInvalidArgument)
	case r.Room:
		return s.runReserve(ctx, r, s.keys(r.item()).Stock(), roomMode)
	case r.Buckets > 1:
		return s.reserveBucketed(ctx, r)
	}
	return s.runReserve(ctx, r, s.keys(r.item()).Stock(), plainMode)
}

// runReserve runs the reserve script with first as KEYS[1] in mode (see
// reserve.lua), in a batch with concurrent reservations of the same item.
func (s *Reservations) runReserve(ctx context.Context, r Reservation, first string, mode reserveMode) (_ ReserveResult, err error) {
	_, span := s.span(ctx, "reserve", r.item())
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrOrderNo.String(r.OrderNo), tracing.AttrActivityID.Int64(r.ActivityID), tracing.AttrQuantity.Int(r.Quantity))
	}
	defer func() { endSpan(span, err) }()
	return s.reserves.reserve(ctx, r, first, mode)
}

// Ref identifies a reservation and every key its release touches.
type Ref struct {
	OrderNo        string
	UserID         string
	ItemID         int64
	ActivityID     int64
	IdempotencyKey string
}

// item is where the reservation's keys are: its order number names the
// sale's tag (order.TagOf).
func (r Ref) item() Item { return In(order.TagOf(r.OrderNo), r.ItemID) }

// EventRef is the reservation of an order's create event.
func EventRef(e order.Event) Ref {
	return Ref{OrderNo: e.OrderNo, UserID: e.UserID, ItemID: e.ItemID, ActivityID: e.ActivityID, IdempotencyKey: e.IdempotencyKey}
}

// OrderRef is the reservation of an order MySQL holds.
func OrderRef(o order.Order) Ref {
	return Ref{OrderNo: o.OrderNo, UserID: o.UserID, ItemID: o.ItemID, ActivityID: o.ActivityID, IdempotencyKey: o.IdempotencyKey}
}

// ReleaseOptions says which reservation a release may give back, and how.
type ReleaseOptions struct {
	// Reason is recorded on the released reservation.
	Reason string
	// From are the states the reservation may be released from; in any
	// other state it is left as it is.
	From []State
	// FreeKey also deletes the idempotency record, so the same key buys
	// again (the API answered 503, which promised that).
	FreeKey bool
}

// Released is what a release did: whether it released the reservation,
// and the state it found it in (StateReleased for a release repeated).
type Released struct {
	Released bool
	State    State
}

// Gone reports whether nothing is held for the reservation any more: it
// was released now or before, or there is none.
func (r Released) Gone() bool {
	return r.Released || r.State == StateReleased || r.State == StateMissing
}

// Release gives the reservation's stock and quota back if its state is one
// of o.From.
func (s *Reservations) Release(ctx context.Context, r Ref, o ReleaseOptions) (Released, error) {
	return s.release(ctx, r, o, "")
}

// ReleaseCapped is Release for an order MySQL refused for lack of stock:
// after giving the reservation back it caps Redis stock at what MySQL can
// still fulfil (dbStock minus what is in flight), in the same script, so
// the units MySQL does not have are never offered to the next buyer.
func (s *Reservations) ReleaseCapped(ctx context.Context, r Ref, o ReleaseOptions, dbStock int64) (Released, error) {
	return s.release(ctx, r, o, strconv.FormatInt(dbStock, 10))
}

func (s *Reservations) release(ctx context.Context, r Ref, o ReleaseOptions, dbStock string) (_ Released, err error) {
	ctx, span := s.span(ctx, "release", r.item())
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrOrderNo.String(r.OrderNo), tracing.AttrActivityID.Int64(r.ActivityID), attribute.String("seckill.reason", o.Reason))
	}
	defer func() { endSpan(span, err) }()
	k := s.keys(r.item())
	keys := []string{k.Stock(), k.Inflight(), k.Pending(), k.Reservation(r.OrderNo),
		k.Quota(r.ActivityID, r.UserID), k.Idem(r.UserID, r.IdempotencyKey)}
	forget := "0"
	if o.FreeKey {
		forget = "1"
		keys = append(keys, k.room(r.ActivityID, "adm"), k.room(r.ActivityID, "used"), k.room(r.ActivityID, "held"))
	}
	from := make([]string, len(o.From))
	for i, st := range o.From {
		from[i] = string(st)
	}
	res, err := s.releaseScript.Run(ctx, s.rdb, keys, r.OrderNo, strings.Join(from, ","), o.Reason, forget, dbStock).Slice()
	if err != nil {
		return Released{}, unavailable("release", err)
	}
	state, _ := res[1].(string)
	out := Released{Released: res[0].(int64) == 1, State: State(state)}
	switch {
	case len(res) == 4:
		// A bucketed reservation released now, or found released (a
		// repeated release): its units go back to the bucket they came
		// from, once (bucket_give is idempotent per order).
		if err := s.buckets.releaseToBucket(ctx, r.item(), r.OrderNo, res[2], dbStock); err != nil {
			return out, err
		}
	case out.State == StateMissing:
		// No reservation: if the order took units from a bucket before
		// its reserve script failed, they go back.
		if err := s.buckets.giveBackAny(ctx, r.item(), r.OrderNo); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Claim moves the reservations of orders (all of item) from RESERVED to
// CLAIMED and returns the state each had before, in the same order.
func (s *Reservations) Claim(ctx context.Context, item Item, orderNos []string) ([]State, error) {
	if len(orderNos) == 0 {
		return nil, nil
	}
	states, errs := s.ClaimAll(ctx, []SaleOrders{{Tag: item.tagged().Tag, OrderNos: [][]string{orderNos}}})
	return states[0], errs[0]
}

// Confirm marks the reservations of orders committed in MySQL as CONFIRMED
// and returns how many it moved.
func (s *Reservations) Confirm(ctx context.Context, item Item, orderNos []string) (int64, error) {
	if len(orderNos) == 0 {
		return 0, nil
	}
	item = item.tagged()
	moved, errs := s.ConfirmAll(ctx, []SaleOrders{{Tag: item.Tag, Items: []int64{item.ID}, OrderNos: [][]string{orderNos}}})
	return moved[0], errs[0]
}

// ReservationInfo is what a reservation hash holds.
type ReservationInfo struct {
	Ref
	State      State
	Quantity   int
	ReservedAt time.Time
	Reason     string
}

// Reservation reads one reservation; order.ErrNotFound when there is none.
func (s *Reservations) Reservation(ctx context.Context, orderNo string) (ReservationInfo, error) {
	tag := order.TagOf(orderNo)
	m, err := s.rdb.HGetAll(ctx, s.keys(One(tag)).Reservation(orderNo)).Result()
	if err != nil {
		return ReservationInfo{}, unavailable("read reservation", err)
	}
	if len(m) == 0 {
		return ReservationInfo{}, order.ErrNotFound
	}
	return parseReservation(tag, orderNo, m), nil
}

// parseReservation reads a reservation hash of order orderNo; item is its
// item when the hash does not name it.
func parseReservation(item int64, orderNo string, m map[string]string) ReservationInfo {
	atoi := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	if id := atoi(m["item"]); id > 0 {
		item = id
	}
	return ReservationInfo{
		Ref: Ref{OrderNo: orderNo, UserID: m["user"], ItemID: item,
			ActivityID: atoi(m["activity"]), IdempotencyKey: m["key"]},
		State:      State(m["state"]),
		Quantity:   int(atoi(m["qty"])),
		ReservedAt: time.UnixMilli(atoi(m["at"])),
		Reason:     m["reason"],
	}
}

// PendingOlderThan lists up to limit unconfirmed order numbers of item
// reserved before cutoff, oldest first.
func (s *Reservations) PendingOlderThan(ctx context.Context, item Item, cutoff time.Time, limit int64) ([]string, error) {
	res, err := s.rdb.ZRangeByScore(ctx, s.keys(item).Pending(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(cutoff.UnixMilli(), 10), Count: limit,
	}).Result()
	if err != nil {
		return nil, unavailable("list pending", err)
	}
	return res, nil
}

// Touch moves a still-pending order's sweep time to t (it stays unpending
// if it was confirmed or released meanwhile).
func (s *Reservations) Touch(ctx context.Context, item Item, orderNo string, t time.Time) error {
	err := s.rdb.ZAddXX(ctx, s.keys(item).Pending(), redis.Z{Score: float64(t.UnixMilli()), Member: orderNo}).Err()
	if err != nil {
		return unavailable("touch pending", err)
	}
	return nil
}
