package main

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/consumer/internal/backoff"
	"github.com/seckill/seckill/consumer/internal/drawer"
	"github.com/seckill/seckill/consumer/internal/redisloss"
	"github.com/seckill/seckill/consumer/internal/retention"
	"github.com/seckill/seckill/consumer/internal/sweep"
	"github.com/seckill/seckill/consumer/internal/unpaid"
	"github.com/seckill/seckill/consumer/internal/warmup"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/room"
	"github.com/seckill/seckill/pkg/foundation/clock"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/periodic"
	"github.com/seckill/seckill/pkg/service/draws"
	"github.com/seckill/seckill/pkg/service/lifecycle"
	"github.com/seckill/seckill/pkg/service/placing"
	"github.com/seckill/seckill/pkg/service/reconcile"
	"github.com/seckill/seckill/pkg/service/relay"
	"github.com/seckill/seckill/pkg/service/sales"
	"github.com/seckill/seckill/pkg/service/waitingroom"
	"github.com/seckill/seckill/pkg/service/webhooks"
)

// pass is a periodic job that runs beside the fulfilment loop until its
// context ends. Each acts only while it holds its lock, so one process of
// the group does it.
type pass interface {
	Run(ctx context.Context)
}

// stores are what the passes work on.
type stores struct {
	rdb   redis.UniversalClient
	store *stockredis.Store
	db    *orderdb.DB
	pub   *orderevents.Publisher
	// events publishes the outbox (the shop's events).
	events *orderevents.OutboxWriter
	clk    *clock.Clock
	// numbers makes the draws' order numbers, signed as the api's are.
	numbers *order.NumberGenerator
}

// newPasses builds the sweep, the closer and, when configured, the heal
// watch and the warm-up.
func newPasses(s settings, st stores, reg *prometheus.Registry, log *slog.Logger) []pass {
	lockMetrics := metrics.NewLock(reg)
	locker := lock.New(st.rdb, lock.Options{Prefix: s.redis.Prefix, InstanceID: s.instance, Logger: log,
		OnAcquire: lockMetrics.Acquired, OnLost: lockMetrics.Lost})
	// A record a periodic pass fails on is reported and skipped for a while;
	// the pass goes on with the others.
	failures := metrics.NewPasses(reg)
	freeze := metrics.NewDrawFreeze(reg)
	passes := []pass{
		&sweep.Sweeper{Items: st.store.Stock, Reservations: st.store.Reservations, DB: st.db.Orders, Publisher: st.pub, After: s.sweepAfter, Every: s.sweepEvery, Log: log,
			Locker: locker, Metrics: metrics.NewSweep(reg), Backoff: backoff.New(metrics.PassSweep, log, failures)},
		&unpaid.Closer{
			Lifecycle: &lifecycle.Service{Tx: st.db, Events: st.db.Outbox, DB: st.db.Orders, Payments: st.db.Payments, Stock: st.store.Reservations, Log: log},
			Locker:    locker, Every: s.closeEvery, Log: log, Metrics: metrics.NewCloser(reg),
			Backoff: backoff.New(metrics.PassCloser, log, failures),
		},
		&drawer.Drawer{DB: st.db.Draws, Draws: &draws.Service{Tx: st.db, Store: st.db.Draws, Events: st.db.Outbox, Now: st.clk.Now}, Activities: st.db.Activities, Orders: st.db.Orders, Reservations: st.store.Reservations,
			Stock: st.store.Stock, Placing: &placing.Service{Reservations: st.store.Reservations, Stock: st.store.Stock, Publisher: st.pub, Activities: st.db.Activities, Orders: st.db.Orders, Tx: st.db, Events: st.db.Outbox, Numbers: st.numbers, PaymentWindow: s.window, Log: log, Now: st.clk.Now},
			Numbers: st.numbers, Locker: locker, Every: s.drawEvery, Log: log, Now: st.clk.Now,
			Picks:     backoff.New(metrics.PassDraw, log, failures),
			Watermark: orderevents.NewEntriesWatermark(s.kafka, s.entries.GroupID), Grace: s.drawGrace,
			FreezeWait: freeze.Observe, Behind: freeze.Behind},
		// Every instance relays: the relays share the outbox's shards.
		&relayPass{relay: &relay.Relay{Tx: st.db, Store: st.db.Outbox, Publisher: st.events,
			Fanout: &webhooks.Fanout{Queue: st.db.Webhooks}}, every: s.relayEvery, log: log},
		// Every instance delivers: the endpoints are shared by lease.
		&webhooks.Dispatcher{Store: st.db.Webhooks, Sender: webhook.Sender{Client: webhook.NewClient(s.webhooks.Timeout, s.webhooks.AllowPrivate)},
			Owner: s.instance + "-" + rand.Text()[:8], Every: s.webhooks.Every, Lease: s.webhooks.Timeout + 30*time.Second, Batch: s.webhooks.Batch,
			Concurrency: s.webhooks.Concurrency, Schedule: s.webhooks.Schedule, DisableAfter: s.webhooks.DisableAfter,
			Metrics: metrics.NewWebhooks(reg), Log: log.With("component", "webhooks"), Now: st.clk.Now},
		&retention.Purger{Store: st.db.Outbox, Locker: locker, Keep: s.outboxKeep, Log: log, Now: st.clk.Now},
	}
	// The watch repairs Redis from MySQL as soon as it sees that Redis
	// lost data (a restart, a failover, its marker gone or behind), under
	// the reconciler's lock; it judges against what it recorded in MySQL,
	// so a loss while no consumer ran is repaired at start.
	if s.healEvery > 0 {
		repairer := &redisloss.Repairer{TryLock: tryLock(locker), Checker: &reconcile.Checker{
			Stock: st.store.Reconciler, DB: reconcile.DB{Reads: st.db.Reconcile, Restocks: st.db.Restocks,
				OrderLookup: st.db.Orders, Items: st.db.Activities, Pinger: st.db}, Log: log.With("component", "heal"), Warmer: st.store.Stock,
			PaymentWindow: s.window, Stores: []reconcile.Pinger{st.store, st.db}, Now: st.clk.Now}}
		passes = append(passes, &redisloss.Watch{Redis: st.rdb, Marker: redisloss.MarkerKey(s.redis.Prefix), Record: st.db.RedisWatches,
			Repair: repairer.Repair, Every: s.healEvery, Log: log, Metrics: metrics.NewHeal(reg),
			Rooms: rebuildAfterLoss(s, st, log), Now: st.clk.Now, Settle: stockredis.MovingRetention + 5*time.Second})
	}
	// Activities warm themselves up SECKILL_WARMUP_LEAD before they start.
	if s.warmupLead > 0 {
		passes = append(passes, &warmup.Scheduler{DB: st.db.Activities, Sales: &sales.Service{Tx: st.db, Sales: st.db.Activities, Warmups: st.db.Activities,
			Restocks: st.db.Restocks, Stock: st.store.Stock, Codes: st.store.Codes, CodeReader: st.db.Codes,
			PaymentWindow: s.window, Log: log, Now: st.clk.Now}, Locker: locker, Lead: s.warmupLead,
			Log: log, Now: st.clk.Now, Backoff: backoff.New(metrics.PassWarmup, log, failures)})
	}
	return passes
}

// relayPass publishes the outbox every interval (package relay).
type relayPass struct {
	relay *relay.Relay
	every time.Duration
	log   *slog.Logger
}

func (p *relayPass) Run(ctx context.Context) {
	periodic.Every(ctx, p.every, func(ctx context.Context) {
		if n, err := p.relay.Pass(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("outbox relay pass failed; its events are published by the next", "published", n, "err", err)
		}
	})
}

// startPasses runs every pass in a goroutine of its own and returns what
// stops them and waits until they all returned. A pass returns no error
// and one pass's end never ends the others, so a WaitGroup is all the
// group needs (errgroup's error and cancel-on-first-error have no use
// here).
func startPasses(ctx context.Context, passes []pass) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, p := range passes {
		wg.Go(func() { p.Run(ctx) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// tryLock is locker's TryLock as a redisloss.Repairer takes it: the lease
// as a duration, the handle as the repairer's Lock.
func tryLock(locker *lock.Locker) func(context.Context, string, time.Duration) (redisloss.Lock, error) {
	return func(ctx context.Context, name string, ttl time.Duration) (redisloss.Lock, error) {
		l, err := locker.TryLock(ctx, name, lock.WithTTL(ttl))
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// rebuildAfterLoss is what the heal watch rebuilds from MySQL, besides the
// stock, once per loss of Redis data: the waiting rooms of the sales not
// ended (a Redis brought back from an older copy keeps the rooms'
// generations, so no room script notices it by itself), then the presale
// codes of the coded sales not ended (without them such a sale answers
// NOT_WARMED, its codes' hash not loaded, until a warm-up; the load never
// overwrites a count Redis kept).
func rebuildAfterLoss(s settings, st stores, log *slog.Logger) func(ctx context.Context, lostBy time.Time) error {
	rooms := waitingroom.New(st.store.Rooms, st.db.Rooms, log.With("component", "heal"), st.clk.Now)
	roomOf := func(ctx context.Context, id int64) (room.Room, error) {
		a, err := st.db.Activities.Activity(ctx, id)
		return waitingroom.StoreRoom(a, s.window), err
	}
	return func(ctx context.Context, lostBy time.Time) error {
		ids, err := st.db.Rooms.LiveRoomSales(ctx, st.clk.Now())
		if err != nil {
			return err
		}
		if err := rooms.RebuildAll(ctx, ids, lostBy, roomOf); err != nil {
			return err
		}
		if ids, err = st.db.Codes.LiveCodedSales(ctx, st.clk.Now()); err != nil {
			return err
		}
		for _, id := range ids {
			a, err := st.db.Activities.Activity(ctx, id)
			if err != nil {
				return err
			}
			if _, err := st.store.Codes.Load(ctx, a, st.db.Codes); err != nil {
				return err
			}
		}
		return nil
	}
}
