// Package intake places flash-sale orders: it validates the request,
// reserves stock in Redis with the reserve script, publishes the
// create-order event to Kafka, and gives the reservation back when the
// event cannot be published.
package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/foundation/failpoint"
	"github.com/seckill/seckill/pkg/foundation/logs"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/tracing"
	"github.com/seckill/seckill/pkg/service/lifecycle"
)

// Publisher sends create-order events; an error means the event may or may
// not have reached Kafka.
type Publisher interface {
	Publish(ctx context.Context, e order.Event) error
}

// Activities finds activities (MySQL).
type Activities interface {
	Activity(ctx context.Context, id int64) (order.Activity, error)
}

// Orders finds orders in MySQL, and records there as FAILED the ones the API
// gives up (see orderdb.DB.Abandon).
type Orders interface {
	Order(ctx context.Context, orderNo string) (order.Order, error)
	OrderOfKey(ctx context.Context, activity int64, user, key string) (order.Order, error)
	Abandon(ctx context.Context, e order.Event, reason string) (order.Order, error)
}

// Stock is Redis as the service uses it (*stockredis.Store): the reserve
// script and what settles a reservation the API cannot confirm, the reads
// that answer a replayed key and an order's status, the warm-up, and the
// stock reads, layout and restock the HTTP handlers reach through the
// service.
type Stock interface {
	Reserve(ctx context.Context, r stockredis.Reservation) (stockredis.ReserveResult, error)
	Release(ctx context.Context, r stockredis.Ref, o stockredis.ReleaseOptions) (stockredis.Released, error)
	PriorOrders(ctx context.Context, item stockredis.Item, activity int64, user, idemKey string) (stockredis.PriorOrders, error)
	HeldOrder(ctx context.Context, item stockredis.Item, activity int64, user string) (string, error)
	Reservation(ctx context.Context, orderNo string) (stockredis.ReservationInfo, error)
	WarmupFrom(ctx context.Context, item stockredis.Item, buckets int, ttl time.Duration, db stockredis.StockReader) (int64, error)
	Stock(ctx context.Context, item stockredis.Item) (stockredis.Snapshot, error)
	Stocks(ctx context.Context, items []stockredis.Item) ([]stockredis.Snapshot, error)
	Layout(ctx context.Context, item stockredis.Item) (order.Layout, error)
	Restock(ctx context.Context, item stockredis.Item, id, qty int64) (stockredis.RestockResult, error)
}

// Service places orders.
type Service struct {
	Stock         Stock
	Publisher     Publisher
	Activities    Activities
	Orders        Orders
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

	activities orderdb.ActivityCache
	soldOut    sync.Map // item id -> soldOutMark
	stockGen   sync.Map // item id -> *atomic.Uint64, raised by ClearSoldOut
}

// SoldOutTTL is how long the in-process sold-out flag is trusted before the
// next request asks Redis again (released stock sells again within it).
const SoldOutTTL = time.Second

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
}

// Placed is an accepted order.
type Placed struct {
	OrderNo string
	Status  order.Status
}

// Place reserves and publishes one order. Errors are domain errors from
// package order, wrapped with context.
func (s *Service) Place(ctx context.Context, r PlaceRequest) (Placed, error) {
	if !order.ValidIdempotencyKey(r.IdempotencyKey) {
		return Placed{}, order.Errorf(order.ErrInvalidArgument, "Idempotency-Key must be 1-64 characters of A-Z a-z 0-9 _ -")
	}
	if r.ActivityID <= 0 {
		return Placed{}, order.Errorf(order.ErrInvalidArgument, "activity_id must be a positive integer")
	}
	act, err := s.activity(ctx, r.ActivityID)
	if err != nil {
		return Placed{}, err
	}
	if act.Draw.On() {
		return Placed{}, order.Errorf(order.ErrDrawSale, "sale %d is a draw: enter it at /api/v1/activities/%d/entries; its winners get their orders from the draw", act.ID, act.ID)
	}
	if err := act.CheckQuantity(r.Quantity); err != nil {
		return Placed{}, err
	}
	chosen, err := act.ChooseItem(r.ItemID)
	if err != nil {
		return Placed{}, err
	}
	item := stockredis.In(act.ItemID, chosen.ItemID)
	now := s.Now()
	if !act.ActiveAt(now) {
		if !now.Before(act.EndsAt) {
			// A key accepted during the sale still gets its order back
			// after it (the record outlives the sale by order.KeyMargin).
			if prior, err := s.Stock.PriorOrders(ctx, item, act.ID, r.UserID, r.IdempotencyKey); err == nil && prior.ByKey != "" {
				return s.replay(ctx, r, item, prior.ByKey)
			}
		}
		return Placed{}, order.Errorf(order.ErrActivityNotActive, "the sale runs from %s to %s",
			act.StartsAt.Format(time.RFC3339), act.EndsAt.Format(time.RFC3339))
	}
	if act.Room.On() {
		// Signed by the sale's key: a forged, expired or another buyer's
		// or sale's admission reserves nothing; the reserve script then
		// checks it is unused.
		if _, err := room.Verify(act.Room.Key[:], r.Admission, act.ID, r.UserID, now); err != nil {
			return s.notAdmitted(ctx, r, item, err)
		}
	}
	if s.flaggedSoldOut(item.ID, now) {
		// The flag only ever refuses, and in the reserve script's order: a
		// replayed key still gets its order back and a buyer holding an
		// order hears so (a read that concurrent requests share: one MGET
		// answers many).
		prior, err := s.Stock.PriorOrders(ctx, item, act.ID, r.UserID, r.IdempotencyKey)
		if err == nil && prior.ByKey != "" {
			return s.replay(ctx, r, item, prior.ByKey)
		}
		s.Metrics.SkippedSoldOut()
		if err == nil && prior.QuotaHolder != "" {
			return Placed{}, order.ErrAlreadyPurchased
		}
		return Placed{}, order.ErrSoldOut
	}

	quotaTTL, err := act.RecordsLifetime(now)
	if err != nil {
		return Placed{}, fmt.Errorf("reserve in activity %d: %w", act.ID, err)
	}
	reservationTTL, err := act.KeysLifetime(now, s.PaymentWindow)
	if err != nil {
		return Placed{}, fmt.Errorf("reserve in activity %d: %w", act.ID, err)
	}
	// The number names the sale's first item: its keys' hash tag.
	no := s.Numbers.NextFor(act.ItemID, r.UserID)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.AttrOrderNo.String(no), tracing.AttrItemID.Int64(item.ID),
			tracing.AttrActivityID.Int64(act.ID), tracing.AttrQuantity.Int(r.Quantity))
	}
	ev := order.Event{
		Version: order.EventVersion, OrderNo: no, IdempotencyKey: r.IdempotencyKey,
		UserID: r.UserID, ItemID: item.ID, ActivityID: act.ID, Quantity: r.Quantity,
		ReservedAt: now, RequestID: r.RequestID,
	}
	started := time.Now()
	reservation := stockredis.Reservation{
		OrderNo: no, UserID: r.UserID, ItemID: item.ID, Tag: item.Tag, ActivityID: act.ID,
		Quantity: r.Quantity, IdempotencyKey: r.IdempotencyKey, At: now,
		QuotaTTL: quotaTTL, ReservationTTL: reservationTTL,
		Buckets: act.StockBuckets, Room: act.Room.On(),
	}
	// The stock generation before the script: a refusal that raced a
	// restock or a release here (ClearSoldOut) must not flag the units it
	// brought back as sold out.
	gen := s.stockGeneration(item.ID)
	res, err := s.Stock.Reserve(ctx, reservation)
	if err == nil && res.Duplicate && res.OrderNo != no && s.freeStaleKey(ctx, r.UserID, res.OrderNo) {
		// The key named an order this API refused with 503 (Redis came
		// back from an older state with the record): it buys anew.
		res, err = s.Stock.Reserve(ctx, reservation)
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
		return Placed{}, err
	case stockredis.MayHaveRun(err):
		// The buyer hears 503, which promises that nothing stays reserved:
		// take back whatever the script may have reserved.
		return s.giveUp(ctx, ev, order.ReasonReserveFailed, err)
	case errors.Is(err, order.ErrNotAdmitted):
		// The script found no order of the key and no such admission:
		// both may be records Redis lost.
		return s.refuseUnlessMySQLHasKey(ctx, r, item, err)
	case err != nil:
		return Placed{}, err
	case res.Duplicate && res.OrderNo != no:
		return s.replay(ctx, r, item, res.OrderNo)
	}

	failpoint.Inject("api-after-reserve")
	started = time.Now()
	err = s.Publisher.Publish(ctx, ev)
	s.Metrics.Published(err, time.Since(started))
	if err != nil {
		return s.giveUp(ctx, ev, order.ReasonPublishFailed, err)
	}
	s.Log.InfoContext(ctx, "order reserved", "order_no", no, "request_id", r.RequestID,
		"user_id", r.UserID, "item_id", item.ID, "activity_id", act.ID, "status", order.Pending)
	return Placed{OrderNo: no, Status: order.Pending}, nil
}

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
func (s *Service) notAdmitted(ctx context.Context, r PlaceRequest, item stockredis.Item, refused error) (Placed, error) {
	prior, err := s.Stock.PriorOrders(ctx, item, r.ActivityID, r.UserID, r.IdempotencyKey)
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
func (s *Service) refuseUnlessMySQLHasKey(ctx context.Context, r PlaceRequest, item stockredis.Item, refused error) (Placed, error) {
	o, err := s.Orders.OrderOfKey(ctx, r.ActivityID, r.UserID, r.IdempotencyKey)
	switch {
	case err == nil:
		return s.replay(ctx, r, item, o.OrderNo)
	case !errors.Is(err, order.ErrNotFound):
		return Placed{}, fmt.Errorf("look up the key of an order without admission in MySQL: %w", err)
	}
	return Placed{}, refused
}

// giveUp handles a reservation the API cannot confirm: its publish failed
// or its outcome is unknown, or Redis may have run the reserve script
// without the answer arriving. The buyer is to hear 503, which promises
// that no order comes of the request, nothing stays reserved and the key may
// buy again, unless Kafka did take the event and a consumer created it.
//
// MySQL decides first: the order is recorded FAILED there unless a consumer
// created it already, and the unique order number makes that exactly one
// of {FAILED here, CREATED by a consumer}. The FAILED row is final for the
// consumer, the sweep and the repair, so even a Redis that later comes back
// from an older state with this reservation RESERVED again cannot turn it
// into an order. Then the reservation is released in Redis (any retry of a
// release whose answer was lost finds it RELEASED: done); if Redis cannot be
// told, the sweep releases it later.
func (s *Service) giveUp(ctx context.Context, ev order.Event, reason string, cause error) (Placed, error) {
	ref := stockredis.EventRef(ev)
	// The request's context may be what timed out; the release must still run.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	log := logs.WithTrace(ctx, s.Log).With("order_no", ev.OrderNo, "request_id", ev.RequestID, "user_id", ev.UserID, "item_id", ev.ItemID)
	o, dbErr := s.Orders.Abandon(rctx, ev, reason)
	if dbErr == nil && o.Status != order.Failed {
		s.Metrics.Unpublished(metrics.UnpublishedClaimed)
		log.Info("order not confirmed here but a consumer created it", "status", o.Status, "err", cause)
		return Placed{OrderNo: ev.OrderNo, Status: o.Status}, nil
	}
	recorded := dbErr == nil
	from := []stockredis.State{stockredis.StateReserved}
	if recorded {
		// No consumer can create the order any more: a claimed reservation
		// may go too.
		from = append(from, stockredis.StateClaimed)
	}
	rel, err := s.release(rctx, ref, stockredis.ReleaseOptions{Reason: reason, From: from, FreeKey: true})
	state := rel.State
	switch {
	case err == nil && rel.Gone():
		// Nothing is held for this request.
		s.Metrics.Unpublished(metrics.UnpublishedReleased)
		log.Warn("order not confirmed; reservation released", "state", state, "reason", reason,
			"status", order.Failed, "recorded", recorded, "err", cause, "mysql_err", dbErr)
		return Placed{}, logs.Logged(cause)
	case err == nil:
		// MySQL could not be asked and a consumer claimed it (and may have
		// finished it since): Kafka did take the event after all.
		s.Metrics.Unpublished(metrics.UnpublishedClaimed)
		log.Info("order not confirmed here but a consumer claimed it", "state", state, "err", cause)
		return Placed{OrderNo: ev.OrderNo, Status: order.Pending}, nil
	case recorded:
		s.Metrics.Unpublished(metrics.UnpublishedAbandoned)
		log.Warn("order not confirmed; recorded FAILED in MySQL, the sweep gives the reservation back",
			"reason", reason, "status", order.Failed, "err", cause, "redis_err", err)
		return Placed{}, logs.Logged(cause)
	default:
		// Two faults at once: the reservation stays as it is and the sweep
		// re-publishes it, so the buyer may end up with an order after all.
		s.Metrics.Unpublished(metrics.UnpublishedKept)
		log.Error("order not confirmed and neither Redis nor MySQL could record it; the sweep will re-publish it",
			"reason", reason, "err", cause, "redis_err", err, "mysql_err", dbErr)
		return Placed{}, logs.Logged(cause)
	}
}

// release runs Stock.Release, trying a few times. Repeating it is safe: a
// release whose answer was lost is found RELEASED by the next attempt.
func (s *Service) release(ctx context.Context, ref stockredis.Ref, o stockredis.ReleaseOptions) (stockredis.Released, error) {
	var (
		rel stockredis.Released
		err error
	)
	for attempt := range 3 {
		rel, err = s.Stock.Release(ctx, ref, o)
		if err == nil {
			return rel, nil
		}
		time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
	}
	return rel, err
}

// reserveOutcome names what the reserve script answered, for the metrics.
func reserveOutcome(res stockredis.ReserveResult, err error) metrics.ReserveOutcome {
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
	}
	return metrics.ReserveError
}

// freeStaleKey frees the user's idempotency key that names prior when MySQL
// has prior FAILED for a reason the API answered 503 for: that answer
// promised the key could buy again. It reports whether it freed it.
func (s *Service) freeStaleKey(ctx context.Context, user, prior string) bool {
	o, err := s.Orders.Order(ctx, prior)
	if err != nil || o.UserID != user || o.Status != order.Failed || !order.AnsweredUnavailable(o.FailureReason) {
		return false
	}
	ref := stockredis.OrderRef(o)
	_, err = s.Stock.Release(ctx, ref, stockredis.ReleaseOptions{Reason: o.FailureReason,
		From: []stockredis.State{stockredis.StateReserved, stockredis.StateClaimed}, FreeKey: true})
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
func (s *Service) replay(ctx context.Context, r PlaceRequest, item stockredis.Item, orderNo string) (Placed, error) {
	o, err := s.Status(ctx, r.UserID, orderNo)
	if err != nil {
		if errors.Is(err, order.ErrNotFound) {
			return Placed{OrderNo: orderNo, Status: order.Pending}, nil
		}
		return Placed{}, err
	}
	if o.ActivityID != 0 && (o.ActivityID != r.ActivityID || o.ItemID != item.ID || o.Quantity != r.Quantity) {
		return Placed{}, order.Errorf(order.ErrKeyReused,
			"this Idempotency-Key was first used for order %s (activity %d, item %d, quantity %d): a retry must send the same request, and another request needs another key",
			orderNo, o.ActivityID, o.ItemID, o.Quantity)
	}
	return Placed{OrderNo: orderNo, Status: o.Status}, nil
}

// Status returns the user's order: MySQL's row once the consumer wrote it,
// otherwise the reservation in Redis (PENDING, or FAILED when it was
// released before reaching MySQL), or PENDING when neither has it but the
// number is one this api issued to user lately (lifecycle.Find). Another
// user's order, and a number never issued, are not found.
func (s *Service) Status(ctx context.Context, user, orderNo string) (order.Order, error) {
	o, _, err := lifecycle.Find(ctx, s.Orders, s.Stock, s.Numbers, user, orderNo)
	return o, err
}

// HeldOrder is the number of the order user holds in the sale (the one
// holding their quota: placed and not failed, closed or cancelled), "" for
// none. One shared read (see stockredis.Store.PriorOrders).
func (s *Service) HeldOrder(ctx context.Context, a order.Activity, user string) (string, error) {
	return s.Stock.HeldOrder(ctx, stockredis.In(a.ItemID, a.ItemID), a.ID, user)
}

// Activity is the sale as this instance's copy has it (at most
// order.ActivityTTL old).
func (s *Service) Activity(ctx context.Context, id int64) (order.Activity, error) {
	return s.activity(ctx, id)
}

func (s *Service) activity(ctx context.Context, id int64) (order.Activity, error) {
	return s.activities.Get(ctx, id, s.Activities.Activity)
}

func (s *Service) flaggedSoldOut(item int64, now time.Time) bool {
	v, ok := s.soldOut.Load(item)
	if !ok {
		return false
	}
	m := v.(soldOutMark)
	if now.Sub(m.at) < SoldOutTTL && m.gen == s.stockGeneration(item) {
		return true
	}
	s.soldOut.CompareAndDelete(item, v)
	return false
}

// soldOutMark is when a reserve found the item sold out, and the item's
// stock generation before that reserve ran.
type soldOutMark struct {
	at  time.Time
	gen uint64
}

func (s *Service) stockGeneration(item int64) uint64 {
	if v, ok := s.stockGen.Load(item); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

// ClearSoldOut forgets the sold-out flag of item (stock came back here),
// and the refusals of reserves that started before: they saw the stock
// without what came back.
func (s *Service) ClearSoldOut(item int64) {
	v, _ := s.stockGen.LoadOrStore(item, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
	s.soldOut.Delete(item)
}

// Warmup loads the stock of each of the activity's items into Redis (see
// stockredis.WarmupFrom), keeping it past the activity's end, and returns
// the units loaded, over all its items.
func (s *Service) Warmup(ctx context.Context, db stockredis.StockReader, activityID int64) (order.Activity, int64, error) {
	// MySQL's row as it is now, not this instance's copy: a copy up to
	// order.ActivityTTL old may predate an end or cancel (its keys would be
	// timed by the old end, and the warm-up not recorded: a 503 for no
	// fault).
	act, err := s.Activities.Activity(ctx, activityID)
	if err != nil {
		return order.Activity{}, 0, err
	}
	ttl, err := act.KeysLifetime(s.Now(), s.PaymentWindow)
	if err != nil {
		return order.Activity{}, 0, fmt.Errorf("warm-up of activity %d: %w", act.ID, err)
	}
	if ttl < time.Second {
		// Its keys would expire at once: nothing is left to sell or settle.
		return order.Activity{}, 0, order.Errorf(order.ErrActivityNotActive, "the sale ended at %s: there is nothing to warm up",
			act.EndsAt.UTC().Format(time.RFC3339))
	}
	var total int64
	for _, id := range act.ItemIDs() {
		n, err := s.Stock.WarmupFrom(ctx, stockredis.In(act.ItemID, id), act.StockBuckets, ttl, db)
		if err != nil {
			return order.Activity{}, 0, fmt.Errorf("warm-up of activity %d, item %d: %w", act.ID, id, err)
		}
		s.ClearSoldOut(id)
		total += n
	}
	return act, total, nil
}
