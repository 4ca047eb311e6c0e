package sweep_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/consumer/internal/sweep"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/adapter/lock"
	"github.com/seckill/seckill/pkg/adapter/orderevents"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// roundTrips counts what a client sends: one a command, one a pipeline.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}

// A sweep costs what is stranded, not how many items were ever warmed: with
// 3,000 items in the warmed set and one stranded reservation among them, a
// sweep re-publishes that one and makes a few dozen Redis round trips (the
// set a page at a time, each page's pending lists in one pipeline), where
// it made one round trip per item (and read the set whole) before. On the
// Redis Cluster too, where the items' lists are on every master.
func TestSweepRoundTripsDoNotGrowWithTheItems(t *testing.T) {
	t.Parallel()
	for _, cluster := range []bool{false, true} {
		t.Run("cluster="+strconv.FormatBool(cluster), func(t *testing.T) {
			t.Parallel()
			sweepRoundTrips(t, cluster)
		})
	}
}

func sweepRoundTrips(t *testing.T, cluster bool) {
	const after = 2 * time.Second
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, RedisCluster: cluster})
	s := p.NewSale(10, 1)
	stranded := p.ReserveEventAt(s, 1, 1, "k1", time.Now().Add(-time.Minute))
	rdb := p.Redis
	// What a warm-up adds to the warmed items' set (stockredis's items key),
	// for 3,000 items nobody sells any more.
	ids := make([]any, 3000)
	for i := range ids {
		ids[i] = strconv.FormatInt(s.ItemID+1+int64(i), 10)
	}
	if err := rdb.SAdd(ctx, p.Prefix+":items", ids...).Err(); err != nil {
		t.Fatal(err)
	}
	if items, err := p.Store.Stock.WarmedItems(ctx); err != nil || len(items) != len(ids)+1 {
		t.Fatalf("warmed items: %d %v, want %d", len(items), err, len(ids)+1)
	}
	pub := orderevents.NewPublisher(orderevents.Config{Brokers: kafkatest.Brokers(), Topic: p.Topic})
	defer pub.Close()
	counted := &roundTrips{}
	rdb.AddHook(counted)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := stockredis.New(rdb, p.Prefix)
	sw := &sweep.Sweeper{Items: store.Stock, Reservations: store.Reservations, DB: p.DB.Orders, Publisher: pub, After: after, Log: log,
		Locker: lock.New(rdb, lock.Options{Prefix: p.Prefix, InstanceID: "sweep-idle"})}

	counted.n.Store(0)
	st, err := sw.SweepOnce(ctx)
	if want := (sweep.Stats{Republished: 1}); err != nil || st != want {
		t.Fatalf("sweep: %+v %v, want %+v", st, err, want)
	}
	busy := counted.n.Load()
	counted.n.Store(0)
	if st, err := sw.SweepOnce(ctx); err != nil || st != (sweep.Stats{}) {
		t.Fatalf("second sweep: %+v %v, want nothing done", st, err)
	}
	idle := counted.n.Load()
	t.Logf("Redis round trips: %d for the sweep that re-published, %d for an idle one, over %d items", busy, idle, len(ids)+1)
	if busy > 40 || idle > 40 {
		t.Errorf("Redis round trips: %d for the sweep that re-published, %d for an idle one; want at most 40 each over %d items",
			busy, idle, len(ids)+1)
	}
	if info, err := p.Store.Reservations.Reservation(ctx, stranded.OrderNo); err != nil || info.State != reservation.StateReserved {
		t.Errorf("stranded reservation: %+v %v, want still reserved (re-published)", info, err)
	}
}
