// Package fulfil turns create-order events into MySQL orders, in batches:
// claim the reservations in Redis, write the orders and take the stock in
// one MySQL transaction for the whole batch, then confirm (or release) the
// reservations. It is a handler of the orderevents Router and knows nothing
// of Kafka: it answers an outcome per event, and every step is idempotent,
// so an event that is not final is simply handled again.
package fulfil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/consume"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// Stock is Redis as fulfilment uses it (*stockredis.Store): claim and
// confirm a batch's reservations (every sale's in one round trip), give a
// refused order's back.
type Stock interface {
	ClaimAll(ctx context.Context, sales []reservation.SaleOrders) ([][]reservation.State, []error)
	ConfirmAll(ctx context.Context, sales []reservation.SaleOrders) ([]int64, []error)
	Release(ctx context.Context, r reservation.Ref, o reservation.ReleaseOptions) (reservation.Released, error)
	ReleaseCapped(ctx context.Context, r reservation.Ref, o reservation.ReleaseOptions, dbStock int64) (reservation.Released, error)
	Reservation(ctx context.Context, orderNo string) (reservation.Info, error)
}

// Orders writes the batch's orders into MySQL (*fulfilment.Service).
type Orders interface {
	Fulfil(ctx context.Context, reqs []order.FulfilRequest) (map[string]order.FulfilOutcome, error)
}

// Activities is MySQL as fulfilment reads the activity an event names and
// the stock left for a refusal (*orderdb.Activities).
type Activities interface {
	Activity(ctx context.Context, id int64) (activity.Activity, error)
	ItemStock(ctx context.Context, itemID int64) (int64, error)
}

// Losses hears of the orders MySQL holds live whose reservations Redis
// did not have when they were claimed (*redisloss.Reporter): Redis lost
// data, and those orders reached MySQL after it did.
type Losses interface {
	ReservationsMissing(ctx context.Context, orderNos []string) error
}

// Handler fulfils batches of events; the orderevents Router feeds it.
type Handler struct {
	Stock         Stock
	DB            Orders
	Activities    Activities
	PaymentWindow time.Duration
	Log           *slog.Logger
	// Losses is told of every order MySQL holds live whose claim found no
	// reservation, before its event is final (see reportMissing); nil
	// tells no one.
	Losses Losses
	// Metrics records how long orders stayed PENDING; nil records nothing.
	Metrics *metrics.Consumer
	// Tracer traces each item's batch and, in each sampled order's own
	// trace, the order's part of it (see batchTrace); nil traces nothing.
	Tracer *tracing.Tracer
	// Now is the shared clock (clock.Clock.Now) the payment deadlines
	// start from; nil is time.Now.
	Now func() time.Time

	activities activity.Cache
}

// Handle decides every event and returns its outcome (see Outcome): final
// (in MySQL, skipped, or poison for the router to dead-letter) or Retry.
// Events are taken by sale (the tag their order numbers name): one claim
// script per sale, one MySQL transaction for the orders of every sale of
// the batch, then one confirm script per sale (the scripts of all the sales
// in one pipeline each time). A sale whose Redis fails retries its own
// events only; when the one transaction fails, each sale is written alone,
// so a sale MySQL refuses retries its own events only too. Every step is
// idempotent, so handling an event again is always safe.
func (p *Handler) Handle(ctx context.Context, events []order.Event) []consume.Result {
	res := make([]consume.Result, len(events))
	byTag := map[int64]*saleBatch{}
	var sales []*saleBatch
	for i, e := range events {
		if err := p.possible(ctx, e); errors.Is(err, errImpossible) {
			res[i] = result(Poison, err)
			continue
		} else if err != nil {
			res[i] = result(Retry, err) // MySQL could not say
			continue
		}
		tag := order.TagOf(e.OrderNo)
		b, ok := byTag[tag]
		if !ok {
			b = &saleBatch{tag: tag}
			byTag[tag] = b
			sales = append(sales, b)
		}
		b.idx = append(b.idx, i)
		b.events = append(b.events, e)
	}
	for _, b := range sales {
		b.bt = p.startBatch(ctx, b.tag, b.events)
	}
	p.claimSales(ctx, sales)
	p.writeSales(ctx, sales)
	p.settleSales(ctx, sales)
	for _, b := range sales {
		var err error
		for j, r := range b.res {
			if r.Outcome == consume.Retry && err == nil {
				err = r.Err
			}
			b.bt.outcome(j, r)
			res[b.idx[j]] = r
		}
		b.bt.end(err)
	}
	return res
}

// saleBatch is one sale's events in a batch (tag: its first item; they may
// buy any of its items) and where their handling stands.
type saleBatch struct {
	tag    int64
	idx    []int // the events' places in the batch
	events []order.Event
	bt     *batchTrace

	res    []consume.Result
	final  bool // res is the answer: nothing more to do
	states []reservation.State
	reqs   []order.FulfilRequest
	reqIdx []int // indexes into events of reqs
	out    map[string]order.FulfilOutcome

	confirm    reservation.SaleOrders // the orders to confirm, by item
	confirmIdx []int                  // indexes into events of confirm's orders (when traced)
	failed     []int                  // indexes into reqs of the orders to release: MySQL refused (FAILED) or closed (CLOSED) them
	missing    []int                  // indexes into events of the live orders whose claim found no reservation
	outOfStock map[int64]bool         // items MySQL had less of than Redis
}

// retryAll answers Retry with err for n events.
func retryAll(n int, err error) []consume.Result {
	res := make([]consume.Result, n)
	for i := range res {
		res[i] = result(Retry, err)
	}
	return res
}

// claimSales claims the reservations of every sale (RESERVED -> CLAIMED:
// reservations are sale-wide keys, so one script takes every item's of a
// sale) and lists the orders to write; a failure retries that sale's
// events.
func (p *Handler) claimSales(ctx context.Context, sales []*saleBatch) {
	claims := make([]reservation.SaleOrders, len(sales))
	for i, b := range sales {
		nos := make([]string, len(b.events))
		for j, e := range b.events {
			nos[j] = e.OrderNo
		}
		claims[i] = reservation.SaleOrders{Ctx: b.bt.context(ctx), Tag: b.tag, OrderNos: [][]string{nos}}
	}
	start := time.Now()
	states, errs := p.Stock.ClaimAll(ctx, claims)
	for i, b := range sales {
		b.bt.stepAll("claim", start, errs[i])
		p.claimed(ctx, b, states[i], errs[i])
	}
}

// claimed takes in the claim of b's reservations.
func (p *Handler) claimed(ctx context.Context, b *saleBatch, states []reservation.State, err error) {
	if err != nil {
		b.res, b.final = retryAll(len(b.events), err), true
		return
	}
	b.states, b.res = states, make([]consume.Result, len(b.events))
	for i, e := range b.events {
		if states[i] == reservation.StateReleased {
			// The API gave this reservation back (publish failed); the
			// event that reached Kafka anyway must not become an order.
			b.res[i] = result(Skipped, nil)
			continue
		}
		act, err := p.activity(ctx, e.ActivityID) // cached by possible
		if err != nil {
			b.res, b.final = retryAll(len(b.events), err), true
			return
		}
		// The order costs its item's price in the sale (activities never
		// change price, so it is the price the buyer saw when the API
		// reserved).
		it, _ := act.Item(e.ItemID) // possible checked it is sold there
		b.reqs = append(b.reqs, order.FulfilRequest{Event: e, PayDeadline: p.now().Add(act.PaymentWindowOr(p.PaymentWindow)),
			UnitPrice: it.SalePrice})
		b.reqIdx = append(b.reqIdx, i)
	}
	b.final = len(b.reqs) == 0
}

// writeSales writes the orders of every sale left in one MySQL transaction
// (fulfilment.Service.Fulfil takes orders of several items); if that fails, each
// sale alone, so only the sales MySQL cannot take retry. A sale whose
// write failed is final with its events to retry.
func (p *Handler) writeSales(ctx context.Context, sales []*saleBatch) {
	var writing []*saleBatch
	var all []order.FulfilRequest
	for _, b := range sales {
		if !b.final {
			writing = append(writing, b)
			all = append(all, b.reqs...)
		}
	}
	if len(writing) == 0 {
		return
	}
	start := time.Now()
	out, err := p.fulfil(writing[0].bt.context(ctx), writing[0].tag, all)
	if err == nil || len(writing) == 1 {
		for _, b := range writing {
			b.bt.step("mysql transaction", start, err, b.reqIdx)
			if err != nil {
				b.res, b.final = retryAll(len(b.events), err), true
				continue
			}
			b.out = out
		}
		return
	}
	for _, b := range writing {
		start := time.Now()
		out, err := p.fulfil(b.bt.context(ctx), b.tag, b.reqs)
		b.bt.step("mysql transaction", start, err, b.reqIdx)
		if err != nil {
			b.res, b.final = retryAll(len(b.events), err), true
			continue
		}
		b.out = out
	}
}

// fulfil is DB.Fulfil in a span of its own (under the batch's).
func (p *Handler) fulfil(ctx context.Context, item int64, reqs []order.FulfilRequest) (map[string]order.FulfilOutcome, error) {
	ctx, span := p.Tracer.StartKind(ctx, "mysql fulfil", trace.SpanKindClient)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("db.system.name", "mysql"), tracing.AttrItemID.Int64(item),
			tracing.AttrBatchSize.Int(len(reqs)))
	}
	out, err := p.DB.Fulfil(ctx, reqs)
	tracing.Fail(span, err)
	return out, err
}

// DeadLettered gives back the reservation of a poison event the router
// dead-lettered, when the event names one, but only while it is RESERVED:
// a CLAIMED one was taken by a consumer for a valid event of the same
// order, which is in MySQL or will be once that uncommitted event is
// redelivered; releasing it would skip that order. The keys to release come
// from the reservation itself, not from the event, whose other fields may
// be what is wrong with it.
func (p *Handler) DeadLettered(ctx context.Context, e order.Event) error {
	if order.TagOf(e.OrderNo) <= 0 {
		return nil
	}
	info, err := p.Stock.Reservation(ctx, e.OrderNo)
	if errors.Is(err, order.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = p.Stock.Release(ctx, info.Ref, reservation.ReleaseOptions{Reason: order.ReasonInvalidEvent,
		From: []reservation.State{reservation.StateReserved}})
	return err
}

// errImpossible marks an event that decodes but cannot be a real order.
var errImpossible = errors.New("impossible event")

// possible checks an event against its activity: the activity exists and
// sells the event's item, and its order number names the sale's first item
// (where the reservation is). An error wrapping errImpossible means poison; any
// other is transient. The sale's window and per-user limit are not checked
// here but by MySQL's row in the transaction that writes the orders
// (orderdb.Orders.FulfilBatch): an order the sale refuses ends FAILED with the
// reason (a limit lowered before the start while an instance still had the
// old one, an end it had not seen), never dead-lettered with no final
// state.
func (p *Handler) possible(ctx context.Context, e order.Event) error {
	act, err := p.activity(ctx, e.ActivityID)
	switch {
	case errors.Is(err, order.ErrNotFound):
		return fmt.Errorf("%w: no activity %d", errImpossible, e.ActivityID)
	case err != nil:
		return err
	}
	if _, ok := act.Item(e.ItemID); !ok {
		return fmt.Errorf("%w: activity %d sells items %v, not item %d", errImpossible, e.ActivityID, act.ItemIDs(), e.ItemID)
	}
	if tag := order.TagOf(e.OrderNo); tag != act.ItemID {
		return fmt.Errorf("%w: order %s names item %d, but activity %d keeps its keys with item %d", errImpossible, e.OrderNo, tag, e.ActivityID, act.ItemID)
	}
	return nil
}

func (p *Handler) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

func (p *Handler) activity(ctx context.Context, id int64) (activity.Activity, error) {
	return p.activities.Get(ctx, id, p.Activities.Activity)
}
