package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/bench/internal/load"
	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/bench/internal/stats"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"gorm.io/gorm"
)

// reference measures the two raw limits the pipeline sits on, in the same
// run: the reserve script called straight from Go (no HTTP, no JWT, no
// Kafka) at the flash concurrency, and one MySQL transaction per order
// (insert + conditional update of the hot stock row) from 50 goroutines.
func (e *env) reference(ctx context.Context, conns int) (*report.Reference, error) {
	ref := &report.Reference{ReserveConcurrency: conns, MySQLConcurrency: 50}
	d := e.opts.refDuration

	// Reserve: its own key prefix and item; never sells out.
	prefix := "benchref" + e.runID
	rdb := stockredis.NewClient(e.opts.redisConfig(prefix))
	defer rdb.Close()
	store := stockredis.New(rdb, prefix)
	const item = 1
	if _, err := store.Stock.Warmup(ctx, reservation.One(item), time.Hour, func(context.Context) (int64, error) { return 1 << 40, nil }); err != nil {
		return nil, err
	}
	defer func() { _ = deleteKeys(context.WithoutCancel(ctx), rdb, prefix+":*") }()
	gen := order.NewNumberGenerator()
	var reserveErrs atomic.Int64
	update, done := e.meter.track("ref-reserve", d, 0)
	stopCPU := e.measureCPU()
	res := load.Run(ctx, load.Config{Workers: conns, Duration: d, Progress: update}, func(ctx context.Context, w int, seq int64) load.Outcome {
		_, err := store.Reservations.Reserve(ctx, reservation.Reservation{
			OrderNo: gen.Next(item), UserID: strconv.FormatInt(seq+1, 10), ItemID: item, ActivityID: 1, Quantity: 1,
			IdempotencyKey: "r" + strconv.FormatInt(seq, 36), At: time.Now(),
			QuotaTTL: 2 * time.Minute, ReservationTTL: 2 * time.Minute,
		})
		if err != nil {
			reserveErrs.Add(1)
			return load.ServerError
		}
		return load.Accepted
	})
	ref.ReserveCPU = stopCPU()
	done()
	ref.ReserveOps = res.Count(load.Accepted)
	ref.ReservePerSecond = stats.Rate(ref.ReserveOps, res.Elapsed)
	ref.ReserveLatency = summarize(res)
	if n := reserveErrs.Load(); n > 0 {
		e.meter.say("reference: %d reserve calls failed", n)
	}

	// MySQL: a scratch item with stock that never runs out.
	db, err := orderdb.Open(orderdb.Config{DSN: e.opts.mysqlDSN, MaxOpenConns: ref.MySQLConcurrency})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	it, err := db.Activities.CreateItem(ctx, "bench reference "+e.runID, 1<<30)
	if err != nil {
		return nil, err
	}
	e.items = append(e.items, it.ID)
	g := db.Gorm()
	base := userBase()
	var firstErr error
	var once sync.Once
	update, done = e.meter.track("ref-mysql", d, 0)
	stopCPU = e.measureCPU()
	res = load.Run(ctx, load.Config{Workers: ref.MySQLConcurrency, Duration: d, Progress: update}, func(ctx context.Context, w int, seq int64) load.Outcome {
		now := time.Now().UTC()
		err := g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec(`INSERT INTO orders (order_no, user_id, item_id, activity_id, quantity, status,
				idempotency_key, reserved_at, created_at, updated_at) VALUES (?, ?, ?, ?, 1, 'CREATED', ?, ?, ?, ?)`,
				gen.Next(it.ID), base+seq, it.ID, 0, "m"+strconv.FormatInt(seq, 36), now, now, now).Error; err != nil {
				return err
			}
			res := tx.Exec("UPDATE item_stock SET stock = stock - 1 WHERE item_id = ? AND stock >= 1", it.ID)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != 1 {
				return fmt.Errorf("no stock left")
			}
			return nil
		})
		if err != nil {
			once.Do(func() { firstErr = err })
			return load.ServerError
		}
		return load.Accepted
	})
	ref.MySQLCPU = stopCPU()
	done()
	ref.MySQLTxs = res.Count(load.Accepted)
	ref.MySQLErrors = res.Count(load.ServerError)
	ref.MySQLPerSecond = stats.Rate(ref.MySQLTxs, res.Elapsed)
	ref.MySQLLatency = summarize(res)
	if firstErr != nil {
		e.meter.say("reference: %d MySQL transactions failed, first: %v", ref.MySQLErrors, firstErr)
	}
	if e.opts.topology != "" {
		if err := e.referencePublish(ctx, ref, gen); err != nil {
			return nil, err
		}
	}
	return ref, nil
}

// referencePublish measures publishes straight from Go (the api's
// publisher, no HTTP, no Redis) to a scratch topic with the topology's
// replication: what the brokers alone cost per event.
func (e *env) referencePublish(ctx context.Context, ref *report.Reference, gen *order.NumberGenerator) error {
	cfg := orderevents.Config{Brokers: e.opts.brokers, Topic: "benchref." + e.runID + ".publish", Partitions: 12,
		ReplicationFactor: e.opts.kafkaReplication, MinInsyncReplicas: e.opts.kafkaMinInsync}
	if err := orderevents.EnsureTopics(ctx, cfg); err != nil {
		return err
	}
	defer func() {
		_ = orderevents.DeleteTopics(context.WithoutCancel(ctx), cfg.Brokers, cfg.Topic, orderevents.DLQTopic(cfg.Topic))
	}()
	pub := orderevents.NewPublisher(cfg)
	defer pub.Close()
	if err := pub.Warm(ctx); err != nil {
		return err
	}
	ref.PublishConcurrency = 200
	var failed atomic.Int64
	update, done := e.meter.track("ref-publish", e.opts.refDuration, 0)
	res := load.Run(ctx, load.Config{Workers: ref.PublishConcurrency, Duration: e.opts.refDuration, Progress: update}, func(ctx context.Context, w int, seq int64) load.Outcome {
		const item = 1
		err := pub.Publish(ctx, order.Event{OrderNo: gen.Next(item), UserID: strconv.FormatInt(seq+1, 10), ItemID: item, ActivityID: 1, Quantity: 1,
			IdempotencyKey: "p" + strconv.FormatInt(seq, 36), ReservedAt: time.Now()})
		if err != nil {
			failed.Add(1)
			return load.ServerError
		}
		return load.Accepted
	})
	done()
	ref.PublishOps = res.Count(load.Accepted)
	ref.PublishPerSecond = stats.Rate(ref.PublishOps, res.Elapsed)
	ref.PublishLatency = summarize(res)
	if n := failed.Load(); n > 0 {
		e.meter.say("reference: %d publishes failed", n)
	}
	return nil
}

func summarize(res load.Result) stats.Summary {
	h := stats.NewHistogram()
	for _, s := range res.Samples {
		stats.Record(h, s.Latency)
	}
	return stats.Summarize(h)
}

// startProfiles, with --pprof, collects a CPU profile of every program the
// bench started while a load of length d runs; the returned function waits
// for them and lists the files written.
func (e *env) startProfiles(ctx context.Context, scenario string, d time.Duration) func() []string {
	if len(e.pprof) == 0 || d <= 0 {
		return func() []string { return nil }
	}
	secs := max(int(d.Seconds())-1, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var files []string
	for name, addr := range e.pprof {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := (&http.Client{Timeout: d + 30*time.Second}).Do(req)
			if err != nil {
				e.meter.say("pprof %s: %v", name, err)
				return
			}
			defer resp.Body.Close()
			file := fmt.Sprintf("%s-%s.cpu.pprof", scenario, name)
			f, err := os.Create(filepath.Join(e.dir, file))
			if err != nil {
				return
			}
			_, err = io.Copy(f, resp.Body)
			f.Close()
			if err == nil {
				mu.Lock()
				files = append(files, file)
				mu.Unlock()
			}
		}()
	}
	return func() []string { wg.Wait(); return files }
}
