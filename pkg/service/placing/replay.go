package placing

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// notAdmitted answers an order of a room sale without a valid admission
// in the reserve script's order (key, quota, admission): the key first, so
// a retry of an order this key placed gets it back whatever became of the
// admission since (expired, used, or not sent); then a buyer holding an
// order in the sale hears ALREADY_PURCHASED; only then refused is the
// refusal. One read, shared with concurrent requests (one MGET answers
// many); a valid admission never pays it, the script answers a replayed
// key. When Redis cannot be read the buyer hears 503, not a refusal: the
// key may have an order. A key Redis does not know is looked up in MySQL
// before the refusal (Redis may have lost it).
func (s *Service) notAdmitted(ctx context.Context, r PlaceRequest, item reservation.Item, refused error) (Placed, error) {
	prior, err := s.Reservations.PriorOrders(ctx, item, r.ActivityID, r.UserID, r.IdempotencyKey)
	switch {
	case err != nil:
		return Placed{}, fmt.Errorf("look up the key of an order without admission: %w", err)
	case prior.ByKey != "":
		return s.replay(ctx, r, item, prior.ByKey)
	case prior.QuotaHolder != "":
		return Placed{}, order.ErrAlreadyPurchased
	}
	return s.refuseUnlessMySQLHasKey(ctx, r, item, refused)
}

// refuseUnlessMySQLHasKey answers refused (an order refused for want of an
// admission, after Redis knew no order of its key) unless MySQL has an
// order of the key: Redis may have lost the key's record (emptied, or
// brought back from an older copy, before the heal puts it back), and
// MySQL's order is then the answer, as the script's replay would have
// given it.
func (s *Service) refuseUnlessMySQLHasKey(ctx context.Context, r PlaceRequest, item reservation.Item, refused error) (Placed, error) {
	o, err := s.Orders.OrderOfKey(ctx, r.ActivityID, r.UserID, r.IdempotencyKey)
	switch {
	case err == nil:
		return s.replay(ctx, r, item, o.OrderNo)
	case !errors.Is(err, order.ErrNotFound):
		return Placed{}, fmt.Errorf("look up the key of an order without admission in MySQL: %w", err)
	}
	return Placed{}, refused
}

// freeStaleKey frees the user's idempotency key that names prior when MySQL
// has prior FAILED for a reason the API answered 503 for: that answer
// promised the key could buy again. It reports whether it freed it.
func (s *Service) freeStaleKey(ctx context.Context, user, prior string) bool {
	o, err := s.Orders.Order(ctx, prior)
	if err != nil || o.UserID != user || o.Status != order.Failed || !order.AnsweredUnavailable(o.FailureReason) {
		return false
	}
	ref := reservation.OrderRef(o)
	_, err = s.Reservations.Release(ctx, ref, reservation.ReleaseOptions{Reason: o.FailureReason,
		From: []reservation.State{reservation.StateReserved, reservation.StateClaimed}, FreeKey: true})
	if err != nil {
		return false
	}
	s.Log.Warn("idempotency key named an order refused with 503; freed", "order_no", prior, "user_id", user)
	return true
}

// replay answers a repeated idempotency key with the original order, or
// refuses (order.ErrKeyReused) a request that is not the one the
// key was first used for: another sale, another item, another quantity
// (the IETF Idempotency-Key draft; Stripe answers so too). An order known
// only by its number (Redis lost its reservation, MySQL has yet to write
// it) cannot be compared and is answered as the same.
//
// A repeat of a request still placing its order gets that request's
// answer once it has one (this instance's), or order.ErrInProgress (another
// instance's: the order is in neither MySQL nor a final state yet and
// younger than inFlightFor), never a 202 the first may still break
// (flights.go).
func (s *Service) replay(ctx context.Context, r PlaceRequest, item reservation.Item, orderNo string) (Placed, error) {
	published := false
	if f := s.flights.find(orderNo); f != nil {
		if !f.sameRequest(r, item) {
			return Placed{}, keyReused(orderNo, f.activity, f.item, f.quantity)
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return Placed{}, inProgress(orderNo)
		}
		if f.err != nil {
			// The first request's failure (a 503: nothing held).
			return f.p, f.err
		}
		// Published: the order's state from here on is the stores'.
		published = true
	}
	o, inMySQL, err := lifecycle.Find(ctx, s.Orders, s.Reservations, s.Numbers, r.UserID, orderNo)
	if err != nil {
		if errors.Is(err, order.ErrNotFound) {
			return Placed{OrderNo: orderNo, Status: order.Pending}, nil
		}
		return Placed{}, err
	}
	if o.ActivityID != 0 && (o.ActivityID != r.ActivityID || o.ItemID != item.ID || o.Quantity != r.Quantity) {
		return Placed{}, keyReused(orderNo, o.ActivityID, o.ItemID, o.Quantity)
	}
	if !published && !inMySQL && o.Status == order.Pending && s.Now().Sub(o.CreatedAt) < inFlightFor {
		return Placed{}, inProgress(orderNo)
	}
	return Placed{OrderNo: orderNo, Status: o.Status}, nil
}

func keyReused(orderNo string, activity, item int64, quantity int) error {
	return order.Errorf(order.ErrKeyReused,
		"this Idempotency-Key was first used for order %s (activity %d, item %d, quantity %d): a retry must send the same request, and another request needs another key",
		orderNo, activity, item, quantity)
}

func inProgress(orderNo string) error {
	return order.Errorf(order.ErrInProgress, "the first request with this Idempotency-Key (order %s) is still placing it: send the same request again in a second", orderNo)
}
