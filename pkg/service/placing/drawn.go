package placing

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/failpoint"
)

// Drawn is the order of a draw's pick (a winner or an alternate), numbered
// by the drawer.
type Drawn struct {
	EntryID  string
	UserID   string
	ItemID   int64
	Quantity int
	OrderNo  string
	// Fresh says no reserve ran with OrderNo before: only then does a
	// refusal prove that no order of that number exists, so that an
	// alternate's number may be taken back (a reserve of an older number
	// may have run, its answer lost, and the record of its key be gone
	// with a Redis that lost data).
	Fresh     bool
	Alternate bool
	// Retire frees the entry's key from its earlier order prior (the
	// drawer's: MySQL must hold prior FAILED), or fails.
	Retire func(ctx context.Context, prior string) error
}

// PlaceDrawn reserves the drawn order d in sale a and publishes its
// event: nil once both are done; order.ErrSoldOut when Redis has not the
// units for it now. A retry after a lost answer finds the reservation by
// the entry's key, and the consumer takes a second event of the same
// order as the first.
func (s *Service) PlaceDrawn(ctx context.Context, a activity.Activity, d Drawn) error {
	now := s.Now()
	quotaTTL, reservationTTL, err := s.lifetimes(a, now)
	if err != nil {
		return err
	}
	item := reservation.In(a.ItemID, d.ItemID)
	key, err := s.drawKey(ctx, a, item, d)
	if err != nil {
		return err
	}
	// A draw sale has no waiting room (activity.Activity.CheckDraw): the
	// reservation needs no admission.
	ev, r := records(a, item, order.Event{OrderNo: d.OrderNo, IdempotencyKey: key, UserID: d.UserID, Quantity: d.Quantity,
		ReservedAt: now, RequestID: key}, quotaTTL, reservationTTL)
	res, err := s.Reservations.Reserve(ctx, r)
	if err == nil && res.Duplicate && res.OrderNo != d.OrderNo && (d.Fresh || d.Alternate) {
		// The key names the entry's earlier attempt: a number of an
		// alternate's is new after a failed order (ReturnFailedAlternates),
		// or fresh, and a reserve of it sets the key to it; so no reserve
		// of its number ran since the key was set, a retire whose answer was lost
		// included. Once MySQL failed that attempt for good, it frees the
		// key and this attempt reserves (once: a key that still names
		// another order is the error below).
		if err := d.Retire(ctx, res.OrderNo); err != nil {
			return err
		}
		res, err = s.Reservations.Reserve(ctx, r)
	}
	switch {
	case errors.Is(err, order.ErrSoldOut):
		return err
	case err != nil:
		return fmt.Errorf("reserve the order of entry %s: %w", d.EntryID, err)
	case res.Duplicate && res.OrderNo != d.OrderNo:
		return fmt.Errorf("entry %s: its key names order %s, its row %s", d.EntryID, res.OrderNo, d.OrderNo)
	}
	failpoint.Inject("draw-after-reserve")
	if err := s.Publisher.Publish(ctx, ev); err != nil {
		// The reservation stays RESERVED: the next pass (or the sweep)
		// publishes it again.
		return fmt.Errorf("publish the order of entry %s: %w", d.EntryID, err)
	}
	return nil
}

// drawKey is the idempotency key the drawn order d is reserved with:
// order.DrawKey, which no buyer can send, unless a reserve of d's number
// before the upgrade holds the form before (order.LegacyDrawKey; a number
// that is fresh was never reserved): a retry finds its reservation by that
// key and publishes its event with it, as the first attempt did.
func (s *Service) drawKey(ctx context.Context, a activity.Activity, item reservation.Item, d Drawn) (string, error) {
	if d.Fresh {
		return order.DrawKey(d.EntryID), nil
	}
	legacy := order.LegacyDrawKey(d.EntryID)
	prior, err := s.Reservations.PriorOrders(ctx, item, a.ID, d.UserID, legacy)
	if err != nil {
		return "", fmt.Errorf("read the order of entry %s: %w", d.EntryID, err)
	}
	if prior.ByKey == d.OrderNo {
		return legacy, nil
	}
	return order.DrawKey(d.EntryID), nil
}
