// Package sweep finds stranded reservations, ones still unconfirmed long
// after they were made (the API died between reserving and publishing, the
// publish outcome was unknown, or the API gave the order up in MySQL when
// Redis could not be told), and finishes them: it confirms those MySQL
// holds live, releases those it failed or closed, and re-publishes the
// rest (the consumer is idempotent). It never releases a reservation
// MySQL has not decided: a consumer may be inside its transaction. A
// reservation (or an item) a sweep fails on is reported and skipped for a
// while (package backoff); the sweep goes on with the others.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/seckill/seckill/consumer/internal/backoff"
	"github.com/seckill/seckill/consumer/internal/pass"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/foundation/metrics"
)

// Publisher re-publishes events.
type Publisher interface {
	Publish(ctx context.Context, e order.Event) error
}

// Items lists the warmed items (*stockredis.Stock).
type Items interface {
	ScanWarmedItems(ctx context.Context, cursor uint64, count int64) (items []reservation.Item, next uint64, err error)
}

// Reservations is Redis as the sweep uses it (*stockredis.Reservations):
// the items' old unconfirmed reservations, and what settles each.
type Reservations interface {
	PendingOlderThanEach(ctx context.Context, items []reservation.Item, cutoff time.Time, limit int64) (pending map[reservation.Item][]string, errs map[reservation.Item]error)
	Reservation(ctx context.Context, orderNo string) (reservation.Info, error)
	Confirm(ctx context.Context, item reservation.Item, orderNos []string) (int64, error)
	Release(ctx context.Context, r reservation.Ref, o reservation.ReleaseOptions) (reservation.Released, error)
	Touch(ctx context.Context, item reservation.Item, orderNo string, t time.Time) error
}

// Orders reads the MySQL rows of stranded reservations (*orderdb.DB).
type Orders interface {
	Orders(ctx context.Context, orderNos []string) (map[string]order.Order, error)
	// LiveOrderOf is the number of user's live order in activity, "" if
	// none.
	LiveOrderOf(ctx context.Context, activity int64, user string) (string, error)
}

// Sweeper runs the sweep; exactly one runs at a time across processes.
type Sweeper struct {
	Items        Items
	Reservations Reservations
	DB           Orders
	Publisher    Publisher
	Locker       pass.Locker
	// After is how old an unconfirmed reservation must be to count as
	// stranded (default 10s; keep it above the publish timeout).
	After time.Duration
	// Every is the pause between sweeps (default 2s).
	Every time.Duration
	Log   *slog.Logger
	// Metrics counts what the sweep did; nil counts nothing.
	Metrics *metrics.Sweep
	// Backoff holds the reservations and items a sweep failed on
	// (default: backoff.New without metrics).
	Backoff *backoff.Records

	runner pass.Runner[Stats]
}

// Stats counts what one sweep did.
type Stats struct {
	Confirmed, Released, Republished int
}

// pass is the sweep's pass: under the "sweep" lock, every Every.
func (s *Sweeper) pass() pass.Pass[Stats] {
	return pass.Pass[Stats]{
		Name: metrics.PassSweep, Lock: "sweep", TTL: 15 * time.Second, Every: s.Every, Default: 2 * time.Second,
		Locker: s.Locker, Log: s.Log, Records: s.Backoff, Work: s.sweep,
		FailedMsg: "sweep failed", Failed: s.Metrics.Failed,
		Done: func(st Stats, clean bool) {
			s.Metrics.Swept(st.Confirmed, st.Released, st.Republished)
			if clean && st != (Stats{}) {
				s.Log.Info("stranded reservations swept", "confirmed", st.Confirmed, "released", st.Released, "republished", st.Republished)
			}
		},
	}
}

// Run sweeps every Every until ctx ends.
func (s *Sweeper) Run(ctx context.Context) { s.runner.Run(ctx, s.pass()) }

// SweepOnce sweeps every warmed item once, under the "sweep" lock. It
// returns lock.ErrNotAcquired when another process is sweeping.
func (s *Sweeper) SweepOnce(ctx context.Context) (Stats, error) { return s.runner.Once(ctx, s.pass()) }

// sweep sweeps every warmed item once; b backs off the reservations and
// items it fails on.
func (s *Sweeper) sweep(ctx context.Context, b *backoff.Records) (Stats, error) {
	var st Stats
	after := s.after()
	// The warmed items a page at a time (SSCAN), and each page's pending
	// lists in one pipeline: an idle sweep makes a few round trips however
	// many items were ever warmed, and reads MySQL only for what it found.
	var cursor uint64
	for {
		page, next, err := s.Items.ScanWarmedItems(ctx, cursor, itemsPage)
		if err != nil {
			return st, err
		}
		due := make([]reservation.Item, 0, len(page))
		for _, item := range page {
			if b.Due(itemKey(item)) {
				due = append(due, item)
			}
		}
		cutoff := time.Now().Add(-after)
		pending, failed := s.Reservations.PendingOlderThanEach(ctx, due, cutoff, batch)
		for _, item := range due {
			key := itemKey(item)
			err := failed[item]
			if err == nil {
				err = s.sweepItem(ctx, item, pending[item], cutoff, &st, b)
			}
			switch {
			case ctx.Err() != nil:
				return st, ctx.Err()
			case err != nil:
				b.Failed(key, err, "item_id", item.ID)
			default:
				b.Succeeded(key, "item_id", item.ID)
			}
		}
		if next == 0 {
			return st, nil
		}
		cursor = next
	}
}

// itemsPage is about how many items one SSCAN of a sweep lists, and batch
// how many stranded reservations of an item one sweep handles (and asks
// MySQL for in one statement).
const (
	itemsPage = 500
	batch     = 500
)

func itemKey(item reservation.Item) string {
	return "item:" + strconv.FormatInt(item.ID, 10) + "@" + strconv.FormatInt(item.Tag, 10)
}

func (s *Sweeper) after() time.Duration {
	if s.After <= 0 {
		return 10 * time.Second
	}
	return s.After
}

// sweepItem sweeps one item's stranded reservations nos (its oldest
// pending ones, at most batch). A reservation that
// fails is given to b and the others go on; an error is what fails the
// whole item (its pending list, its orders in MySQL).
func (s *Sweeper) sweepItem(ctx context.Context, item reservation.Item, nos []string, cutoff time.Time, st *Stats, b *backoff.Records) error {
	if len(nos) == 0 {
		return nil
	}
	due := nos[:0]
	for _, no := range nos {
		if b.Due(no) {
			due = append(due, no)
		}
	}
	if len(due) == 0 {
		return nil
	}
	inDB, err := s.DB.Orders(ctx, due)
	if err != nil {
		return err
	}
	var confirm []string
	for _, no := range due {
		c, err := s.sweepOne(ctx, item, no, inDB, cutoff, st)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			b.Failed(no, err, "order_no", no, "item_id", item.ID)
			continue
		}
		if c {
			confirm = append(confirm, no)
		} else {
			b.Succeeded(no, "order_no", no, "item_id", item.ID)
		}
	}
	n, err := s.Reservations.Confirm(ctx, item, confirm)
	if err == nil {
		st.Confirmed += int(n)
		for _, no := range confirm {
			b.Succeeded(no, "order_no", no, "item_id", item.ID)
		}
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// One script confirms them all: find the one that fails it.
	for _, no := range confirm {
		n, err := s.Reservations.Confirm(ctx, item, []string{no})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			b.Failed(no, fmt.Errorf("confirm: %w", err), "order_no", no, "item_id", item.ID)
			continue
		}
		st.Confirmed += int(n)
		b.Succeeded(no, "order_no", no, "item_id", item.ID)
	}
	return nil
}

// sweepOne finishes one stranded reservation, or reports that MySQL has
// its order created and it is to be confirmed (with the item's others).
func (s *Sweeper) sweepOne(ctx context.Context, item reservation.Item, no string, inDB map[string]order.Order, cutoff time.Time, st *Stats) (confirm bool, err error) {
	info, err := s.Reservations.Reservation(ctx, no)
	if errors.Is(err, order.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	log := s.Log.With("order_no", no, "user_id", info.UserID, "item_id", item.ID)
	if o, ok := inDB[no]; ok {
		if o.Status.Live() {
			return true, nil
		}
		// MySQL's FAILED row is final, so even a CLAIMED reservation may
		// go: no consumer can create this order any more. An order the
		// API gave up (it answered 503) frees its key. A CLOSED order has
		// its units back in MySQL, yet its reservation is live: Redis came
		// back from a state older than the close's release, whose credit
		// went with it (or that release has not run yet, and then finds
		// RELEASED). A confirm would keep its units out of Redis stock for
		// good; the release gives them back, as the closer's does. An
		// order refused for the buyer's live one hands its quota to it.
		var holder string
		if o.Status == order.Failed && order.CollidesWithLive(o.FailureReason) {
			if holder, err = s.DB.LiveOrderOf(ctx, o.ActivityID, o.UserID); err != nil {
				return false, err
			}
		}
		rel, err := s.Reservations.Release(ctx, info.Ref, reservation.ReleaseOptions{Reason: o.FailureReason,
			From:    []reservation.State{reservation.StateReserved, reservation.StateClaimed},
			FreeKey: order.AnsweredUnavailable(o.FailureReason), QuotaTo: holder})
		if err != nil {
			return false, err
		}
		if rel.Released {
			st.Released++
			log.Info("stranded reservation released", "status", o.Status, "reason", o.FailureReason)
		}
		return false, nil
	}
	switch info.State {
	case reservation.StateReserved:
	case reservation.StateClaimed:
		// A consumer took the event; if it died, Kafka redelivers the
		// uncommitted message. Re-publish only when that has not
		// happened for much longer (the message itself was lost).
		if info.ReservedAt.After(cutoff.Add(-5 * s.after())) {
			return false, nil
		}
	default:
		return false, nil
	}
	ev := order.Event{
		Version: order.EventVersion, OrderNo: no, IdempotencyKey: info.IdempotencyKey,
		UserID: info.UserID, ItemID: item.ID, ActivityID: info.ActivityID, Quantity: info.Quantity,
		ReservedAt: info.ReservedAt, AccessCode: string(info.Code),
	}
	if err := s.Publisher.Publish(ctx, ev); err != nil {
		return false, err
	}
	// Push its sweep time forward so it is not re-published every round
	// while the consumer works through a backlog.
	if err := s.Reservations.Touch(ctx, item, no, time.Now()); err != nil {
		return false, err
	}
	st.Republished++
	log.Info("stranded reservation re-published", "state", info.State)
	return false, nil
}
