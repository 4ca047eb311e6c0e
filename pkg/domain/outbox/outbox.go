// Package outbox is the events the shop hears of its orders: one per
// change MySQL commits (an order created, failed, paid, closed, a refund
// owed; a draw entry's outcome, its promotion, its end unselected),
// written in the transaction of the change and relayed from there
// (docs/events.md has their schema and the delivery guarantees).
package outbox

import (
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/domain/draw"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Type names what happened.
type Type string

// The events of an order.
const (
	OrderCreated Type = "order.created"
	// OrderFailed: MySQL refused the order (Data.Reason says why).
	OrderFailed Type = "order.failed"
	OrderPaid   Type = "order.paid"
	// OrderClosed: unpaid past its window, cancelled by the buyer, or its
	// sale cancelled (Data.Reason).
	OrderClosed Type = "order.closed"
	// RefundOwed: a payment arrived for an order that could not take it;
	// Data.Amount is the payment's, Data.TransactionID the provider's id.
	RefundOwed Type = "refund.owed"
)

// The events of a draw's entry, on the entry's own stream (Stream): its
// outcome when the draw ran (entry.won or entry.alternate, seq 1), then,
// for an alternate, entry.promoted when an order of it commits CREATED (an
// order of it that FAILED promotes nobody: it is picked anew when units
// come back, and has one order at most that is not FAILED), or
// entry.not_selected once its sale ended without giving it an order.
const (
	EntryWon       Type = "entry.won"
	EntryAlternate Type = "entry.alternate"
	// EntryPromoted: Data.OrderNo is the order the alternate got.
	EntryPromoted Type = "entry.promoted"
	// EntryNotSelected: Data.Reason is the end's (order.ReasonSaleEnded,
	// order.ReasonSaleCancelled). The entry's last event.
	EntryNotSelected Type = "entry.not_selected"
)

// The statuses of entry.promoted and entry.not_selected (entry.won and
// entry.alternate have the draw's outcome, draw.Won and draw.Alternate).
const (
	StatusPromoted    = "PROMOTED"
	StatusNotSelected = "NOT_SELECTED"
)

// Data is what an event says of its order.
type Data struct {
	// OrderNo is the order's number; an entry's event has its entry's
	// EntryID instead, and an order a draw made has both.
	OrderNo  string `json:"order_no,omitempty"`
	EntryID  string `json:"entry_id,omitempty"`
	SaleID   int64  `json:"sale_id"`
	ItemID   int64  `json:"item_id"`
	Quantity int    `json:"quantity"`
	// Amount and Currency: the order's price (absent when its sale had
	// none), or the payment owed back for refund.owed.
	Amount   *int64 `json:"amount,omitempty"`
	Currency string `json:"currency,omitempty"`
	// Subject is the buyer (the subject of their token).
	Subject string `json:"subject"`
	// Status is the order's status after the change, or what became of
	// an entry (WON, ALTERNATE, PROMOTED, NOT_SELECTED).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Rank is an entry's place in the draw's ranking (from 1).
	Rank int `json:"rank,omitempty"`
	// TransactionID is the provider's payment (order.paid, refund.owed).
	TransactionID string `json:"transaction_id,omitempty"`
	// Seq counts the order's (or the entry's) events from 1, in the order
	// they committed.
	Seq int `json:"seq"`
}

// Event is one event as the outbox holds it.
// Its JSON is the event as the Kafka topic carries it.
type Event struct {
	// ID is unique and stable: every delivery of the event carries it.
	ID   string `json:"id"`
	Type Type   `json:"type"`
	// Time is MySQL's clock in the transaction that wrote the event.
	Time time.Time `json:"timestamp"`
	Data Data      `json:"data"`
}

// Topic is the Kafka topic the relay publishes the events to, keyed by
// order number.
const Topic = "seckill.order-events"

// Stream is what the event is about: its events are numbered (Seq) and
// delivered in order. It is the order's number, or for an entry's event
// "entry_" and the entry's id.
func (e Event) Stream() string {
	if e.Type.OfEntry() {
		return EntryStream(e.Data.EntryID)
	}
	return e.Data.OrderNo
}

// Known tells whether the outbox writes events of type t.
func (t Type) Known() bool {
	switch t {
	case OrderCreated, OrderFailed, OrderPaid, OrderClosed, RefundOwed, EntryWon, EntryAlternate, EntryPromoted, EntryNotSelected:
		return true
	}
	return false
}

// OfEntry tells an entry's event from an order's.
func (t Type) OfEntry() bool {
	switch t {
	case EntryWon, EntryAlternate, EntryPromoted, EntryNotSelected:
		return true
	}
	return false
}

// Opens says whether t may be a stream's first event: an order's is its
// creation or its failure (New), an entry's its outcome (Drawn).
func (t Type) Opens() bool {
	switch t {
	case OrderCreated, OrderFailed, EntryWon, EntryAlternate:
		return true
	}
	return false
}

// Head is what MySQL holds of a stream beside its events: the sale it is
// of, how many events it committed (Seq, the seq of its last: the
// order's event_seq) and the status its last event states (the order's).
// An entry's Status is empty, which no event is held to: its events state
// their entry's outcome, which an order's status does not hold.
type Head struct {
	Stream string
	Sale   int64
	Seq    int
	Status string
}

// EntryStream is the stream of draw entry id's events.
func EntryStream(id string) string { return entryPrefix + id }

// EntryOfStream is the entry whose stream is stream, if it is an entry's.
func EntryOfStream(stream string) (string, bool) { return strings.CutPrefix(stream, entryPrefix) }

const entryPrefix = "entry_"

// IDOf is the id of stream's seq-th event.
func IDOf(stream string, seq int) string { return "evt_" + stream + "_" + strconv.Itoa(seq) }

// Shards is how many parts the outbox is split into among relays.
const Shards = 64

// ShardOf is the part of the outbox stream's events are in.
func ShardOf(stream string) int { return int(crc32.ChecksumIEEE([]byte(stream)) % Shards) }

// Of is the event t of order o as it is after the change; reason is the
// change's (a failure's or a close's).
func Of(t Type, o order.Order) Event {
	d := Data{OrderNo: o.OrderNo, SaleID: o.ActivityID, ItemID: o.ItemID, Quantity: o.Quantity,
		Subject: o.UserID, Status: string(o.Status), Reason: o.FailureReason}
	if entry, ok := order.DrawEntryOf(o.IdempotencyKey); ok && order.DrawKey(entry) == o.IdempotencyKey {
		d.EntryID = entry
	}
	if o.Amount.Priced() {
		amount := o.Amount.Amount
		d.Amount, d.Currency = &amount, o.Amount.Currency
	}
	return Event{Type: t, Data: d}
}

// Refund is the refund.owed event of a payment of paid for order o that o
// could not take.
func Refund(o order.Order, txID string, paid order.Money) Event {
	e := Of(RefundOwed, o)
	amount := paid.Amount
	e.Data.Amount, e.Data.Currency, e.Data.TransactionID = &amount, paid.Currency, txID
	return e
}

// Check refuses an event the outbox must not hold.
func (e Event) Check() error {
	if !e.Type.Known() {
		return fmt.Errorf("outbox: unknown event type %q", e.Type)
	}
	if e.Data.OrderNo == "" && !e.Type.OfEntry() || e.Data.EntryID == "" && e.Type.OfEntry() {
		return fmt.Errorf("outbox: a %s event names no order or entry", e.Type)
	}
	if e.Type == EntryPromoted && e.Data.OrderNo == "" {
		return fmt.Errorf("outbox: an entry.promoted event names no order")
	}
	return nil
}

// New is the first event of order o, written with its row (which starts
// the order's count at 1): order.created, or order.failed when MySQL
// refused it.
func New(o order.Order) Event {
	t := OrderCreated
	if o.Status == order.Failed {
		t = OrderFailed
	}
	e := Of(t, o)
	e.Data.Seq = 1
	return e
}

// Drawn is the first event of a draw's entry: its outcome when sale's
// draw ranked it (p).
func Drawn(sale int64, p draw.Picked) Event {
	t := EntryAlternate
	if p.Outcome == draw.Won {
		t = EntryWon
	}
	e := ofEntry(t, p, p.Outcome)
	e.Data.SaleID, e.Data.Seq = sale, 1
	return e
}

// Promoted is the event of alternate p whose order p.OrderNo committed
// CREATED; it takes the entry's next number (Seq 0) when recorded.
func Promoted(p draw.Picked) Event {
	e := ofEntry(EntryPromoted, p, StatusPromoted)
	e.Data.OrderNo = p.OrderNo
	return e
}

// NotSelected is the last event of alternate p, which its sale's end
// (reason: order.ReasonSaleEnded or order.ReasonSaleCancelled) left
// without an order; it takes the entry's next number when recorded.
func NotSelected(p draw.Picked, reason string) Event {
	e := ofEntry(EntryNotSelected, p, StatusNotSelected)
	e.Data.Reason = reason
	return e
}

func ofEntry(t Type, p draw.Picked, status string) Event {
	return Event{Type: t, Data: Data{EntryID: p.EntryID, SaleID: p.ActivityID, ItemID: p.ItemID, Quantity: p.Quantity,
		Subject: p.UserID, Status: status, Rank: p.Rank}}
}
