// Package fulfil turns create-order events into MySQL orders, in batches:
// claim the reservations in Redis, write the orders and take the stock in
// one MySQL transaction per item, then confirm (or release) the
// reservations. Every step is idempotent, so a batch that fails anywhere is
// simply processed again.
package fulfil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/pkg/failpoint"
	"github.com/seckill/seckill/pkg/logs"
	"github.com/seckill/seckill/pkg/metrics"
	"github.com/seckill/seckill/pkg/order"
	"github.com/seckill/seckill/pkg/orderdb"
	"github.com/seckill/seckill/pkg/orderevents"
	"github.com/seckill/seckill/pkg/stockredis"
)

// DeadLetters receives poison messages.
type DeadLetters interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Processor fulfils batches of events.
type Processor struct {
	Stock         *stockredis.Store
	DB            *orderdb.DB
	DLQ           DeadLetters
	Topic         string
	PaymentWindow time.Duration
	Log           *slog.Logger
	// Metrics records batches, outcomes, lag and dead letters; nil records
	// nothing.
	Metrics *metrics.Consumer

	activities sync.Map // id -> order.Activity
	// deadLettered holds the messages of a batch being retried that were
	// dead-lettered already, so a retry does not write them twice.
	deadLettered sync.Map // msgID -> struct{}
}

// msgID identifies a message in the topic it was read from.
type msgID struct {
	topic     string
	partition int
	offset    int64
}

func idOf(m kafka.Message) msgID { return msgID{m.Topic, m.Partition, m.Offset} }

// Stats counts what one batch did.
type Stats struct {
	Created, Failed, Existing, Skipped, DeadLettered int
}

// Process handles every message of the batch. It returns nil only when
// every message is final (in MySQL, released, or dead-lettered), so the
// caller may commit their offsets; any error means "retry the same batch".
func (p *Processor) Process(ctx context.Context, msgs []kafka.Message) (Stats, error) {
	var st Stats
	byItem := map[int64][]order.Event{}
	var items []int64
	for _, m := range msgs {
		e, err := orderevents.Decode(m.Value)
		if err == nil {
			err = p.possible(ctx, e)
			if err != nil && !errors.Is(err, errImpossible) {
				return st, err // MySQL could not say: retry the batch
			}
		}
		if err != nil {
			if _, done := p.deadLettered.Load(idOf(m)); !done {
				if err := p.deadLetter(ctx, m, err); err != nil {
					return st, err
				}
				p.deadLettered.Store(idOf(m), struct{}{})
			}
			st.DeadLettered++
			continue
		}
		if _, ok := byItem[e.ItemID]; !ok {
			items = append(items, e.ItemID)
		}
		byItem[e.ItemID] = append(byItem[e.ItemID], e)
	}
	for _, item := range items {
		if err := p.processItem(ctx, item, byItem[item], &st); err != nil {
			return st, err // retried with the same messages
		}
	}
	if st.DeadLettered > 0 { // the batch is done: forget its dead letters
		for _, m := range msgs {
			p.deadLettered.Delete(idOf(m))
		}
	}
	return st, nil
}

func (p *Processor) processItem(ctx context.Context, item int64, events []order.Event, st *Stats) error {
	nos := make([]string, len(events))
	for i, e := range events {
		nos[i] = e.OrderNo
	}
	states, err := p.Stock.Claim(ctx, item, nos)
	if err != nil {
		return err
	}
	var reqs []orderdb.Request
	stateOf := make(map[string]string, len(events))
	for i, e := range events {
		stateOf[e.OrderNo] = states[i]
		if states[i] == stockredis.StateReleased {
			// The API gave this reservation back (publish failed); the
			// event that reached Kafka anyway must not become an order.
			st.Skipped++
			continue
		}
		act, err := p.activity(ctx, e.ActivityID) // cached by possible
		if err != nil {
			return err
		}
		window := p.PaymentWindow
		if act.PaymentWindow > 0 {
			window = act.PaymentWindow
		}
		reqs = append(reqs, orderdb.Request{Event: e, PayDeadline: time.Now().Add(window)})
	}
	if len(reqs) == 0 {
		return nil
	}
	out, err := p.DB.Fulfil(ctx, item, reqs)
	if err != nil {
		return err
	}
	// A crash here leaves orders in MySQL whose reservations are CLAIMED
	// and whose offsets are not committed: the redelivery must finish them.
	failpoint.Inject("consumer-after-commit")
	var confirm []string
	var failed []orderdb.Request
	outOfStock := false
	for _, r := range reqs {
		e := r.Event
		o := out[e.OrderNo]
		if o.Existing {
			st.Existing++
		}
		if o.Status == order.Failed {
			if !o.Existing {
				st.Failed++
			}
			outOfStock = outOfStock || o.Reason == order.ReasonOutOfStock
			failed = append(failed, r)
			continue
		}
		confirm = append(confirm, e.OrderNo)
		if !o.Existing {
			st.Created++
			p.Metrics.FulfilDelay(time.Since(e.ReservedAt))
			p.Log.Info("order created", "order_no", e.OrderNo, "request_id", e.RequestID,
				"user_id", e.UserID, "item_id", e.ItemID, "status", order.Created)
		}
	}
	if _, err := p.Stock.Confirm(ctx, item, confirm); err != nil {
		return err
	}
	dbStock := int64(-1)
	if outOfStock {
		// MySQL had less than Redis believed. Read what it has now (after
		// this batch's orders are confirmed, so they no longer count as in
		// flight): the releases below cap Redis at it.
		if dbStock, err = p.DB.ItemStock(ctx, item); err != nil {
			return err
		}
	}
	for _, r := range failed {
		o := out[r.Event.OrderNo]
		if err := p.release(ctx, r.Event, o.Reason, stateOf[r.Event.OrderNo], !o.Existing, dbStock); err != nil {
			return err
		}
	}
	return nil
}

// release gives a refused order's stock and quota back in Redis; fresh
// says the order became FAILED in this batch (not a redelivery). For an
// order MySQL refused for lack of stock, dbStock (>= 0) caps Redis stock at
// what MySQL can still fulfil, in the same script.
func (p *Processor) release(ctx context.Context, e order.Event, reason, claimState string, fresh bool, dbStock int64) error {
	log := p.Log.With("order_no", e.OrderNo, "request_id", e.RequestID, "user_id", e.UserID, "item_id", e.ItemID)
	if claimState == stockredis.StateMissing {
		// Redis lost the reservation: there is nothing to give back there;
		// the reconciler aligns Redis with MySQL.
		log.Warn("order failed; its reservation is missing in Redis", "reason", reason, "status", order.Failed)
		return nil
	}
	ref := stockredis.Ref{OrderNo: e.OrderNo, UserID: e.UserID, ItemID: e.ItemID,
		ActivityID: e.ActivityID, IdempotencyKey: e.IdempotencyKey}
	var (
		released bool
		state    string
		err      error
	)
	if reason == order.ReasonOutOfStock && dbStock >= 0 {
		released, state, err = p.Stock.ReleaseCapped(ctx, ref, reason, dbStock, stockredis.StateReserved, stockredis.StateClaimed)
	} else {
		// An order the API gave up (it answered 503) frees its idempotency
		// key too, so the buyer's retry with that key tries anew.
		released, state, err = p.Stock.Release(ctx, ref, reason, order.AnsweredUnavailable(reason), stockredis.StateReserved, stockredis.StateClaimed)
	}
	if err != nil {
		return err
	}
	if released && reason == order.ReasonOutOfStock {
		log.Log(ctx, logs.Alert, "Redis and MySQL disagree: MySQL had no stock for a reservation Redis accepted",
			"reason", reason, "quantity", e.Quantity, "status", order.Failed)
	} else if released {
		log.Info("order failed; reservation released", "reason", reason, "status", order.Failed)
	} else if fresh {
		log.Info("order failed; reservation already final", "reason", reason, "state", state, "status", order.Failed)
	} else {
		log.Debug("order failed; reservation already final", "state", state)
	}
	return nil
}

// deadLetter publishes a poison message to the dead-letter topic with the
// reason, and releases its reservation when the message identifies one.
func (p *Processor) deadLetter(ctx context.Context, m kafka.Message, cause error) error {
	dl := orderevents.DeadLetter{Reason: cause.Error(), Topic: m.Topic, Partition: m.Partition,
		Offset: m.Offset, Original: m.Value, At: time.Now().UTC()}
	b, _ := json.Marshal(dl)
	if err := p.DLQ.WriteMessages(ctx, kafka.Message{Key: m.Key, Value: b}); err != nil {
		return fmt.Errorf("dead-letter: %w: %w", order.ErrUnavailable, err)
	}
	p.Metrics.DeadLettered()
	p.Log.Error("poison message dead-lettered", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "reason", cause.Error())
	// Enough to find the reservation? Then give its stock back, but only
	// while it is RESERVED: a CLAIMED one was taken by a consumer for a
	// valid event of the same order, which is in MySQL or will be once that
	// uncommitted event is redelivered; releasing it would skip that order.
	// The keys to release come from the reservation itself, not from the
	// event, whose other fields may be what is wrong with it.
	var e order.Event
	if json.Unmarshal(m.Value, &e) != nil || order.ItemOf(e.OrderNo) <= 0 {
		return nil
	}
	info, err := p.Stock.Reservation(ctx, order.ItemOf(e.OrderNo), e.OrderNo)
	if errors.Is(err, order.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	_, _, err = p.Stock.Release(ctx, info.Ref, order.ReasonInvalidEvent, false, stockredis.StateReserved)
	return err
}

// errImpossible marks an event that decodes but cannot be a real order.
var errImpossible = errors.New("impossible event")

// possible checks an event against its activity: the activity exists, it
// sells the event's item, and the quantity is within its per-user limit.
// An error wrapping errImpossible means poison; any other is transient.
func (p *Processor) possible(ctx context.Context, e order.Event) error {
	act, err := p.activity(ctx, e.ActivityID)
	switch {
	case errors.Is(err, order.ErrNotFound):
		return fmt.Errorf("%w: no activity %d", errImpossible, e.ActivityID)
	case err != nil:
		return err
	case act.ItemID != e.ItemID:
		return fmt.Errorf("%w: activity %d sells item %d, not %d", errImpossible, e.ActivityID, act.ItemID, e.ItemID)
	case e.Quantity > act.PerUserLimit:
		return fmt.Errorf("%w: quantity %d above the activity's limit %d", errImpossible, e.Quantity, act.PerUserLimit)
	}
	return nil
}

func (p *Processor) activity(ctx context.Context, id int64) (order.Activity, error) {
	if a, ok := p.activities.Load(id); ok {
		return a.(order.Activity), nil
	}
	a, err := p.DB.Activity(ctx, id)
	if err != nil {
		return order.Activity{}, err
	}
	p.activities.Store(id, a)
	return a, nil
}
