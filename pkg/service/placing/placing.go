// Package placing places flash-sale orders: it validates the request,
// reserves stock in Redis with the reserve script, publishes the
// create-order event to Kafka, and gives the reservation back when the
// event cannot be published.
package placing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/foundation/failpoint"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/tracing"
	"github.com/seckill/seckill/pkg/foundation/unit"
	"github.com/seckill/seckill/pkg/service/lifecycle"
	"github.com/seckill/seckill/pkg/service/waitingroom"
)

// Publisher sends create-order events; an error means the event may or may
// not have reached Kafka.
type Publisher interface {
	Publish(ctx context.Context, e order.Event) error
}

// Activities finds activities (MySQL).
type Activities interface {
	Activity(ctx context.Context, id int64) (activity.Activity, error)
}

// Orders finds orders in MySQL, and records there as FAILED the ones the API
// gives up (see orderdb.Orders.Abandon).
type Orders interface {
	Order(ctx context.Context, orderNo string) (order.Order, error)
	OrderOfKey(ctx context.Context, activity int64, user, key string) (order.Order, error)
	Abandon(ctx context.Context, e order.Event, reason string) (o order.Order, written bool, err error)
}

// Events is the outbox (*orderdb.Outbox): an order the API gives up is
// written FAILED in a unit of work (Tx) with its order.failed event.
type Events interface {
	Record(ctx context.Context, evs ...outbox.Event) error
}

// Reservations is Redis's reservations as the service uses them
// (*stockredis.Reservations): the reserve script and what settles a
// reservation the API cannot confirm, and the reads that answer a replayed
// key and an order's status.
type Reservations interface {
	Reserve(ctx context.Context, r reservation.Reservation) (reservation.Result, error)
	Release(ctx context.Context, r reservation.Ref, o reservation.ReleaseOptions) (reservation.Released, error)
	PriorOrders(ctx context.Context, item reservation.Item, activity int64, user, idemKey string) (reservation.PriorOrders, error)
	HeldOrder(ctx context.Context, item reservation.Item, activity int64, user string) (string, error)
	Reservation(ctx context.Context, orderNo string) (reservation.Info, error)
}

// Stock is Redis's stock as the service uses it (*stockredis.Stock): the
// warm-up, and the stock reads, layout and restock the HTTP handlers reach
// through the service.
type Stock interface {
	WarmupFrom(ctx context.Context, item reservation.Item, buckets int, ttl time.Duration, db reservation.StockReader) (int64, error)
	Stock(ctx context.Context, item reservation.Item) (reservation.Snapshot, error)
	Stocks(ctx context.Context, items []reservation.Item) ([]reservation.Snapshot, error)
	Layout(ctx context.Context, item reservation.Item) (activity.Layout, error)
	Restock(ctx context.Context, item reservation.Item, id, qty int64) (reservation.Restocked, error)
}

// Service places orders.
type Service struct {
	Reservations Reservations
	Stock        Stock
	// Rooms runs the sales' waiting rooms the HTTP handlers reach through
	// the service (*stockredis.Rooms); nil: no waiting rooms.
	Rooms         waitingroom.Rooms
	Publisher     Publisher
	Activities    Activities
	Orders        Orders
	Tx            unit.Work
	Events        Events
	Numbers       *order.NumberGenerator
	PaymentWindow time.Duration
	Log           *slog.Logger
	// Now is the shared clock (clock.Clock.Now), never the process's own:
	// it decides whether the sale is on, stamps the event's reserved_at
	// (which the consumer checks against MySQL's ends_at), and the API's
	// end, cancel and change of a sale use it too.
	Now func() time.Time
	// Metrics records reserve and publish outcomes; nil records nothing.
	Metrics *metrics.Intake
	// Codes checks the presale codes of sales that take orders only with
	// one (required when such a sale is on).
	Codes Codes

	activities activity.Cache
	soldOut    sync.Map // item id -> soldOutMark
	// flights are the orders this instance is placing or placed lately
	// (flights.go).
	flights  flights
	stockGen sync.Map // item id -> *atomic.Uint64, raised by ClearSoldOut
}

// PlaceRequest is one buyer's order attempt.
type PlaceRequest struct {
	UserID     string
	ActivityID int64
	// ItemID is the item bought: required for a sale of several items, 0
	// for a sale of one (its item).
	ItemID         int64
	Quantity       int
	IdempotencyKey string
	RequestID      string
	// Admission is the buyer's admission (X-Admission) in a sale with a
	// waiting room; ignored in a sale without one.
	Admission string
	// AccessCode is the presale code the buyer gave, as typed ("" for
	// none); read only by a sale that takes orders only with a code.
	AccessCode string
	// ClientAddr is the client address's bucket (the api's address
	// limiter's key): invalid codes are counted per address too.
	ClientAddr string
}

// Placed is an accepted order.
type Placed struct {
	OrderNo string
	Status  order.Status
}

// Place reserves and publishes one order. Errors are domain errors from
// package order, wrapped with context.
func (s *Service) Place(ctx context.Context, r PlaceRequest) (Placed, error) {
	act, item, admit, err := s.saleItem(ctx, r)
	if err != nil {
		return Placed{}, err
	}
	now := s.Now()
	if p, done, err := s.refuseEarly(ctx, r, act, item, admit, now); done {
		return p, err
	}
	code, err := s.accessCode(ctx, r, act, item)
	if err != nil {
		return Placed{}, err
	}
	ev, res, err := s.newOrder(ctx, r, act, item, now)
	if err != nil {
		return Placed{}, err
	}
	ev.AccessCode, res.Code = string(code), code
	if p, done, err := s.reserve(ctx, r, act, item, ev, res, now); done {
		return p, err
	}
	f := s.flights.start(ev.OrderNo, r, item, now)
	p, err := s.send(ctx, r, act, item, ev)
	f.finish(p, err)
	return p, err
}

// send publishes the reserved order of ev, reading first the presale code
// a priority room's order took over from its buyer's place.
func (s *Service) send(ctx context.Context, r PlaceRequest, act activity.Activity, item reservation.Item, ev order.Event) (Placed, error) {
	if act.Access == access.CodePriority {
		var err error
		if ev.AccessCode, err = s.laneCode(ctx, ev.OrderNo); err != nil {
			return s.giveUp(ctx, ev, order.ReasonReserveFailed, err)
		}
	}
	return s.publish(ctx, r, act, item, ev)
}

// admission is what the way a sale sells asks of a request before the
// reserve, at now: nil when it may go on, or why it may not.
type admission func(now time.Time) error

// saleItem checks the request against its sale and returns the sale, the
// item it buys, and the admission the sale asks of it (nil: none).
func (s *Service) saleItem(ctx context.Context, r PlaceRequest) (activity.Activity, reservation.Item, admission, error) {
	if !order.ValidIdempotencyKey(r.IdempotencyKey) {
		return activity.Activity{}, reservation.Item{}, nil, order.Errorf(order.ErrInvalidArgument, "Idempotency-Key must be 1-64 characters of A-Z a-z 0-9 _ -")
	}
	if r.ActivityID <= 0 {
		return activity.Activity{}, reservation.Item{}, nil, order.Errorf(order.ErrInvalidArgument, "activity_id must be a positive integer")
	}
	act, err := s.activity(ctx, r.ActivityID)
	if err != nil {
		return activity.Activity{}, reservation.Item{}, nil, err
	}
	var admit admission
	switch act.Selling() {
	case activity.SellsByDraw:
		return activity.Activity{}, reservation.Item{}, nil, order.Errorf(order.ErrDrawSale, "sale %d is a draw: enter it at /api/v1/activities/%d/entries; its winners get their orders from the draw", act.ID, act.ID)
	case activity.SellsInRoom:
		// Signed by the sale's key: a forged, expired or another buyer's
		// or sale's admission reserves nothing; the reserve script then
		// checks it is unused.
		admit = func(now time.Time) error {
			_, err := room.Verify(act.Room.Key[:], r.Admission, act.ID, r.UserID, now)
			return err
		}
	case activity.SellsFirstCome:
		// Whoever reserves first buys: nothing to show.
	}
	if err := act.CheckQuantity(r.Quantity); err != nil {
		return activity.Activity{}, reservation.Item{}, nil, err
	}
	chosen, err := act.ChooseItem(r.ItemID)
	if err != nil {
		return activity.Activity{}, reservation.Item{}, nil, err
	}
	return act, reservation.In(act.ItemID, chosen.ItemID), admit, nil
}

// refuseEarly answers, before anything is reserved, a request the sale
// turns away at now: not on, refused by the sale's admission (admit, nil
// for none: its waiting room's), or for an item flagged sold out. done is
// false when the request goes on to the reserve.
func (s *Service) refuseEarly(ctx context.Context, r PlaceRequest, act activity.Activity, item reservation.Item,
	admit admission, now time.Time) (p Placed, done bool, err error) {
	if !act.ActiveAt(now) {
		if !now.Before(act.EndsAt) {
			// A key accepted during the sale still gets its order back
			// after it (the record outlives the sale by order.KeyMargin).
			if prior, err := s.Reservations.PriorOrders(ctx, item, act.ID, r.UserID, r.IdempotencyKey); err == nil && prior.ByKey != "" {
				p, err := s.replay(ctx, r, item, prior.ByKey)
				return p, true, err
			}
		}
		return Placed{}, true, order.Errorf(order.ErrActivityNotActive, "the sale runs from %s to %s",
			act.StartsAt.Format(time.RFC3339), act.EndsAt.Format(time.RFC3339))
	}
	if admit != nil {
		if err := admit(now); err != nil {
			p, err := s.notAdmitted(ctx, r, item, err)
			return p, true, err
		}
	}
	if s.flaggedSoldOut(item.ID, now) {
		// The flag only ever refuses, and in the reserve script's order: a
		// replayed key still gets its order back and a buyer holding an
		// order hears so (a read that concurrent requests share: one MGET
		// answers many).
		prior, err := s.Reservations.PriorOrders(ctx, item, act.ID, r.UserID, r.IdempotencyKey)
		if err == nil && prior.ByKey != "" {
			p, err := s.replay(ctx, r, item, prior.ByKey)
			return p, true, err
		}
		s.Metrics.SkippedSoldOut()
		if err == nil && prior.QuotaHolder != "" {
			return Placed{}, true, order.ErrAlreadyPurchased
		}
		return Placed{}, true, order.ErrSoldOut
	}
	return Placed{}, false, nil
}

// newOrder numbers the order and returns its create event and the
// reservation that takes its stock.
func (s *Service) newOrder(ctx context.Context, r PlaceRequest, act activity.Activity, item reservation.Item, now time.Time) (order.Event, reservation.Reservation, error) {
	quotaTTL, reservationTTL, err := s.lifetimes(act, now)
	if err != nil {
		return order.Event{}, reservation.Reservation{}, fmt.Errorf("reserve in activity %d: %w", act.ID, err)
	}
	// The number names the sale's first item: its keys' hash tag.
	no := s.Numbers.NextFor(act.ItemID, r.UserID)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.AttrOrderNo.String(no), tracing.AttrItemID.Int64(item.ID),
			tracing.AttrActivityID.Int64(act.ID), tracing.AttrQuantity.Int(r.Quantity))
	}
	ev, res := records(act, item, order.Event{OrderNo: no, IdempotencyKey: r.IdempotencyKey, UserID: r.UserID,
		Quantity: r.Quantity, ReservedAt: now, RequestID: r.RequestID}, quotaTTL, reservationTTL)
	return ev, res, nil
}

// lifetimes are how long from now the records of an order in act live:
// its quota and idempotency records, and its reservation.
func (s *Service) lifetimes(act activity.Activity, now time.Time) (quota, keys time.Duration, err error) {
	if quota, err = act.RecordsLifetime(now); err != nil {
		return 0, 0, err
	}
	if keys, err = act.KeysLifetime(now, s.PaymentWindow); err != nil {
		return 0, 0, err
	}
	return quota, keys, nil
}

// records returns the create event of the order o names (its number,
// key, buyer, quantity, request and time) of item in act, and the
// reservation that takes its stock: the one place both are built, for a
// buyer's order and a draw's alike.
func records(act activity.Activity, item reservation.Item, o order.Event, quotaTTL, reservationTTL time.Duration) (order.Event, reservation.Reservation) {
	ev := order.Event{
		Version: order.EventVersion, OrderNo: o.OrderNo, IdempotencyKey: o.IdempotencyKey,
		UserID: o.UserID, ItemID: item.ID, ActivityID: act.ID, Quantity: o.Quantity,
		ReservedAt: o.ReservedAt, RequestID: o.RequestID,
	}
	res := reservation.Reservation{
		OrderNo: o.OrderNo, UserID: o.UserID, ItemID: item.ID, Tag: item.Tag, ActivityID: act.ID,
		Quantity: o.Quantity, IdempotencyKey: o.IdempotencyKey, At: o.ReservedAt,
		QuotaTTL: quotaTTL, ReservationTTL: reservationTTL,
		Buckets: act.StockBuckets, Selling: act.Selling(),
	}
	return ev, res
}

// reserve runs the reserve script for the order of ev and answers the
// request when the script did not reserve it (done): a refusal, an
// earlier order of the key, or a reservation given up when the script's
// outcome is unknown.
func (s *Service) reserve(ctx context.Context, r PlaceRequest, act activity.Activity, item reservation.Item, ev order.Event,
	asked reservation.Reservation, now time.Time) (p Placed, done bool, err error) {
	no := ev.OrderNo
	started := time.Now()
	// The stock generation before the script: a refusal that raced a
	// restock or a release here (ClearSoldOut) must not flag the units it
	// brought back as sold out.
	gen := s.stockGeneration(item.ID)
	res, err := s.Reservations.Reserve(ctx, asked)
	if err == nil && res.Duplicate && res.OrderNo != no && s.freeStaleKey(ctx, r.UserID, res.OrderNo) {
		// The key named an order this API refused with 503 (Redis came
		// back from an older state with the record): it buys anew.
		res, err = s.Reservations.Reserve(ctx, asked)
	}
	s.Metrics.Reserved(reserveOutcome(res, err), time.Since(started))
	switch {
	case errors.Is(err, order.ErrSoldOut):
		// Flag the item only when nothing is left for anyone: a request
		// for more units than remain must not turn away single-unit buyers.
		// (A bucketed item does not report what is left: only a one-unit
		// refusal shows every bucket empty.)
		if res.Left <= 0 && (r.Quantity == 1 || act.StockBuckets <= 1) {
			s.soldOut.Store(item.ID, soldOutMark{at: now, gen: gen})
		}
		return Placed{}, true, err
	case errors.Is(err, order.ErrOutcomeUnknown):
		// The buyer hears 503, which promises that nothing stays reserved:
		// take back whatever the script may have reserved.
		p, err := s.giveUp(ctx, ev, order.ReasonReserveFailed, err)
		return p, true, err
	case errors.Is(err, access.ErrCodeInvalid):
		s.guessed(ctx, r, act, item)
		return Placed{}, true, err
	case errors.Is(err, order.ErrNotAdmitted):
		// The script found no order of the key and no such admission:
		// both may be records Redis lost.
		p, err := s.refuseUnlessMySQLHasKey(ctx, r, item, err)
		return p, true, err
	case err != nil:
		return Placed{}, true, err
	case res.Duplicate && res.OrderNo != no:
		p, err := s.replay(ctx, r, item, res.OrderNo)
		return p, true, err
	}
	return Placed{}, false, nil
}

// publish sends the reserved order's create event to Kafka, and gives the
// reservation up when it cannot.
func (s *Service) publish(ctx context.Context, r PlaceRequest, act activity.Activity, item reservation.Item, ev order.Event) (Placed, error) {
	failpoint.Inject("api-after-reserve")
	started := time.Now()
	err := s.Publisher.Publish(ctx, ev)
	s.Metrics.Published(err, time.Since(started))
	if err != nil {
		return s.giveUp(ctx, ev, order.ReasonPublishFailed, err)
	}
	s.Log.InfoContext(ctx, "order reserved", "order_no", ev.OrderNo, "request_id", r.RequestID,
		"user_id", r.UserID, "item_id", item.ID, "activity_id", act.ID, "status", order.Pending)
	return Placed{OrderNo: ev.OrderNo, Status: order.Pending}, nil
}

// reserveOutcome names what the reserve script answered, for the metrics.
func reserveOutcome(res reservation.Result, err error) metrics.ReserveOutcome {
	switch {
	case err == nil && res.Duplicate:
		return metrics.ReserveDuplicateKey
	case err == nil:
		return metrics.ReserveAccepted
	case errors.Is(err, order.ErrSoldOut):
		return metrics.ReserveSoldOut
	case errors.Is(err, order.ErrAlreadyPurchased):
		return metrics.ReserveAlreadyPurchased
	case errors.Is(err, order.ErrNotWarmed):
		return metrics.ReserveNotWarmed
	case errors.Is(err, access.ErrCodeInvalid), errors.Is(err, access.ErrCodeUsed):
		return metrics.ReserveCodeRefused
	}
	return metrics.ReserveError
}

// Status returns the user's order: MySQL's row once the consumer wrote it,
// otherwise the reservation in Redis (PENDING, or FAILED when it was
// released before reaching MySQL), or PENDING when neither has it but the
// number is one this api issued to user lately (lifecycle.Find). Another
// user's order, and a number never issued, are not found.
func (s *Service) Status(ctx context.Context, user, orderNo string) (order.Order, error) {
	o, _, err := lifecycle.Find(ctx, s.Orders, s.Reservations, s.Numbers, user, orderNo)
	return o, err
}

// HeldOrder is the number of the order user holds in the sale (the one
// holding their quota: placed and not failed, closed or cancelled), "" for
// none. One shared read (see stockredis.Store.PriorOrders).
func (s *Service) HeldOrder(ctx context.Context, a activity.Activity, user string) (string, error) {
	return s.Reservations.HeldOrder(ctx, reservation.In(a.ItemID, a.ItemID), a.ID, user)
}

// Activity is the sale as this instance's copy has it (at most
// activity.CopyTTL old).
func (s *Service) Activity(ctx context.Context, id int64) (activity.Activity, error) {
	return s.activity(ctx, id)
}

func (s *Service) activity(ctx context.Context, id int64) (activity.Activity, error) {
	return s.activities.Get(ctx, id, s.Activities.Activity)
}
