package stockredis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// Reserve runs the reserve script. It returns order.ErrNotWarmed,
// order.ErrAlreadyPurchased or order.ErrSoldOut for the refusals, and an
// error wrapping order.ErrUnavailable when Redis cannot be reached.
func (s *Reservations) Reserve(ctx context.Context, r reservation.Reservation) (reservation.Result, error) {
	mode := plainMode
	switch r.Selling {
	case activity.SellsInRoom:
		if r.Buckets > 1 {
			return reservation.Result{}, fmt.Errorf("reserve: a sale with a waiting room has one stock key an item: %w", order.ErrInvalidArgument)
		}
		mode = roomMode
	default: // activity.SellsFirstCome, and a draw's orders, which take
		// their units as a first-come sale's do:
		// from the item's stock key, or its buckets.
		if r.Buckets > 1 {
			return s.reserveBucketed(ctx, r)
		}
	}
	return s.runReserve(ctx, r, s.keys(r.Item()).Stock(), mode)
}

// runReserve runs the reserve script with first as KEYS[1] in mode (see
// reserve.lua), in a batch with concurrent reservations of the same item.
func (s *Reservations) runReserve(ctx context.Context, r reservation.Reservation, first string, mode reserveMode) (_ reservation.Result, err error) {
	_, span := s.span(ctx, "reserve", r.Item())
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrOrderNo.String(r.OrderNo), tracing.AttrActivityID.Int64(r.ActivityID), tracing.AttrQuantity.Int(r.Quantity))
	}
	defer func() { endSpan(span, err) }()
	return s.reserves.reserve(ctx, r, first, mode)
}

// Release gives the reservation's stock and quota back if its state is one
// of o.From.
func (s *Reservations) Release(ctx context.Context, r reservation.Ref, o reservation.ReleaseOptions) (reservation.Released, error) {
	return s.release(ctx, r, o, "")
}

// ReleaseCapped is Release for an order MySQL refused for lack of stock:
// after giving the reservation back it caps Redis stock at what MySQL can
// still fulfil (dbStock minus what is in flight), in the same script, so
// the units MySQL does not have are never offered to the next buyer.
func (s *Reservations) ReleaseCapped(ctx context.Context, r reservation.Ref, o reservation.ReleaseOptions, dbStock int64) (reservation.Released, error) {
	return s.release(ctx, r, o, strconv.FormatInt(dbStock, 10))
}

func (s *Reservations) release(ctx context.Context, r reservation.Ref, o reservation.ReleaseOptions, dbStock string) (_ reservation.Released, err error) {
	ctx, span := s.span(ctx, "release", r.Item())
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrOrderNo.String(r.OrderNo), tracing.AttrActivityID.Int64(r.ActivityID), attribute.String("seckill.reason", o.Reason))
	}
	defer func() { endSpan(span, err) }()
	res, err := s.releaseStep(ctx, r, o, dbStock)
	if err != nil {
		return reservation.Released{}, err
	}
	state, _ := res[1].(string)
	out := reservation.Released{Released: res[0].(int64) == 1, State: reservation.State(state)}
	switch {
	case len(res) == 4:
		// A bucketed reservation released now, or found released (a
		// repeated release): its units go back to the bucket they came
		// from, once (bucket_give is idempotent per order).
		if err := s.buckets.releaseToBucket(ctx, r.Item(), r.OrderNo, res[2], dbStock); err != nil {
			return out, err
		}
	case out.State == reservation.StateMissing:
		// No reservation: if the order took units from a bucket before
		// its reserve script failed, they go back.
		if err := s.buckets.giveBackAny(ctx, r.Item(), r.OrderNo); err != nil {
			return out, err
		}
	}
	return out, nil
}

// releaseStep is release.lua, the first of a release's steps: a bucketed
// reservation's give-back to its bucket follows (releaseToBucket).
func (s *Reservations) releaseStep(ctx context.Context, r reservation.Ref, o reservation.ReleaseOptions, dbStock string) ([]any, error) {
	k := s.keys(r.Item())
	keys := []string{k.Stock(), k.Inflight(), k.Pending(), k.Reservation(r.OrderNo),
		k.Quota(r.ActivityID, r.UserID), k.Idem(r.UserID, r.IdempotencyKey), k.Codes(r.ActivityID), k.Gives()}
	forget := "0"
	if o.FreeKey {
		forget = "1"
		keys = append(keys, k.room(r.ActivityID, "adm"), k.room(r.ActivityID, "used"), k.room(r.ActivityID, "held"), k.room(r.ActivityID, "lcode"))
	}
	from := make([]string, len(o.From))
	for i, st := range o.From {
		from[i] = string(st)
	}
	keepCode := "0"
	if order.KeepsCode(o.Reason) {
		keepCode = "1"
	}
	res, err := s.releaseScript.Run(ctx, s.rdb, keys, r.OrderNo, strings.Join(from, ","), o.Reason, forget, dbStock, keepCode, o.QuotaTo, MovingRetention.Milliseconds()).Slice()
	if err != nil {
		return nil, unavailable("release", err)
	}
	return res, nil
}

// Claim moves the reservations of orders (all of item) from RESERVED to
// CLAIMED and returns the state each had before, in the same order.
func (s *Reservations) Claim(ctx context.Context, item reservation.Item, orderNos []string) ([]reservation.State, error) {
	if len(orderNos) == 0 {
		return nil, nil
	}
	states, errs := s.ClaimAll(ctx, []reservation.SaleOrders{{Tag: item.Tagged().Tag, OrderNos: [][]string{orderNos}}})
	return states[0], errs[0]
}

// Confirm marks the reservations of orders committed in MySQL as CONFIRMED
// and returns how many it moved.
func (s *Reservations) Confirm(ctx context.Context, item reservation.Item, orderNos []string) (int64, error) {
	if len(orderNos) == 0 {
		return 0, nil
	}
	item = item.Tagged()
	moved, errs := s.ConfirmAll(ctx, []reservation.SaleOrders{{Tag: item.Tag, Items: []int64{item.ID}, OrderNos: [][]string{orderNos}}})
	return moved[0], errs[0]
}

// Reservation reads one reservation; order.ErrNotFound when there is none.
func (s *Reservations) Reservation(ctx context.Context, orderNo string) (reservation.Info, error) {
	tag := order.TagOf(orderNo)
	m, err := s.rdb.HGetAll(ctx, s.keys(reservation.One(tag)).Reservation(orderNo)).Result()
	if err != nil {
		return reservation.Info{}, unavailable("read reservation", err)
	}
	if len(m) == 0 {
		return reservation.Info{}, order.ErrNotFound
	}
	return parseReservation(tag, orderNo, m), nil
}

// parseReservation reads a reservation hash of order orderNo; item is its
// item when the hash does not name it.
func parseReservation(item int64, orderNo string, m map[string]string) reservation.Info {
	atoi := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	if id := atoi(m["item"]); id > 0 {
		item = id
	}
	return reservation.Info{
		Ref: reservation.Ref{OrderNo: orderNo, UserID: m["user"], ItemID: item,
			ActivityID: atoi(m["activity"]), IdempotencyKey: m["key"]},
		State:      reservation.State(m["state"]),
		Quantity:   int(atoi(m["qty"])),
		ReservedAt: time.UnixMilli(atoi(m["at"])),
		Reason:     m["reason"],
		Code:       access.Digest(m["code"]),
	}
}

// PendingOlderThan lists up to limit unconfirmed order numbers of item
// reserved before cutoff, oldest first.
func (s *Reservations) PendingOlderThan(ctx context.Context, item reservation.Item, cutoff time.Time, limit int64) ([]string, error) {
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
func (s *Reservations) Touch(ctx context.Context, item reservation.Item, orderNo string, t time.Time) error {
	err := s.rdb.ZAddXX(ctx, s.keys(item).Pending(), redis.Z{Score: float64(t.UnixMilli()), Member: orderNo}).Err()
	if err != nil {
		return unavailable("touch pending", err)
	}
	return nil
}
