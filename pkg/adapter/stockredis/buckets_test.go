package stockredis_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

const buckets = 3

func bucketRes(user int64, key string) reservation.Reservation {
	r := res(user, key, 1)
	r.Buckets = buckets
	return r
}

func warmBuckets(t *testing.T, s *stockredis.Store, stock int64) int64 {
	t.Helper()
	n, err := s.Stock.WarmupBuckets(context.Background(), reservation.One(item), buckets, time.Hour, func(context.Context) (int64, error) { return stock, nil })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func bucketValues(t *testing.T, s *stockredis.Store) []int64 {
	t.Helper()
	out := make([]int64, buckets)
	for i := range out {
		v, err := s.Client().Get(context.Background(), s.Keys(reservation.One(item)).Bucket(i)).Int64()
		if err != nil {
			t.Fatalf("bucket %d: %v", i, err)
		}
		out[i] = v
	}
	return out
}

// The bucketed reserve on a single node and on the 3-master cluster (the
// buckets' hash tags land on different masters).
func TestBucketedReserve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cluster bool
	}{{"single node", false}, {"cluster", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var rdb redis.UniversalClient
			var prefix string
			if tc.cluster {
				rdb, prefix = redistest.NewCluster(t)
			} else {
				rdb, prefix = redistest.New(t)
			}
			s := stockredis.New(rdb, prefix)
			testBucketedCrowd(t, s)
			testBucketedOneUser(t, stockredis.New(rdb, prefix+"u"))
		})
	}
}

// 1,000 buyers for 100 units over 3 buckets: exactly 100 reservations,
// every bucket empty, nobody twice.
func testBucketedCrowd(t *testing.T, s *stockredis.Store) {
	ctx := context.Background()
	if n := warmBuckets(t, s, 100); n != 100 {
		t.Fatalf("warmed %d, want 100", n)
	}
	if got := bucketValues(t, s); got[0] != 34 || got[1] != 33 || got[2] != 33 {
		t.Fatalf("split %v, want [34 33 33]", got)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted = map[int64]int{}
		soldOut  int
	)
	for u := int64(1); u <= 1000; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Reservations.Reserve(ctx, bucketRes(u, "k"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted[u]++
			case errors.Is(err, order.ErrSoldOut):
				soldOut++
			default:
				t.Errorf("user %d: %v", u, err)
			}
		}()
	}
	wg.Wait()
	if len(accepted) != 100 || soldOut != 900 {
		t.Fatalf("accepted %d users, %d sold out; want 100 and 900", len(accepted), soldOut)
	}
	for u, n := range accepted {
		if n != 1 {
			t.Fatalf("user %d reserved %d times", u, n)
		}
	}
	if snap := snapshot(t, s); !snap.Warmed || snap.Stock != 0 || snap.Inflight != 100 {
		t.Fatalf("snapshot %+v, want stock 0 and 100 in flight", snap)
	}
}

// 200 concurrent attempts of one user with different keys: exactly one.
func testBucketedOneUser(t *testing.T, s *stockredis.Store) {
	ctx := context.Background()
	warmBuckets(t, s, 100)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ok, dup int
	)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Reservations.Reserve(ctx, bucketRes(5, fmt.Sprintf("k%d", i)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, order.ErrAlreadyPurchased):
				dup++
			default:
				t.Errorf("attempt %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if ok != 1 || dup != 199 {
		t.Fatalf("%d reserved, %d already purchased; want 1 and 199", ok, dup)
	}
	// The refused ones gave their units back.
	if snap := snapshot(t, s); snap.Stock != 99 || snap.Inflight != 1 {
		t.Fatalf("snapshot %+v, want stock 99 and 1 in flight", snap)
	}
}

// A user whose home bucket is empty buys from another; the refusals keep
// reserve.lua's precedence when every bucket is empty.
func TestBucketedFallOverAndPrecedence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	s := stockredis.New(rdb, prefix)
	warmBuckets(t, s, 3)
	k := s.Keys(reservation.One(item))
	// Empty user 3's home bucket (3 % 3 = 0).
	rdb.Set(ctx, k.Bucket(0), 0, redis.KeepTTL)
	first := bucketRes(3, "k1")
	got, err := s.Reservations.Reserve(ctx, first)
	if err != nil || got.OrderNo != first.OrderNo {
		t.Fatalf("reserve: %+v %v", got, err)
	}
	info, _ := rdb.HGet(ctx, k.Reservation(first.OrderNo), "bucket").Result()
	if info != "1" {
		t.Fatalf("reservation bucket %q, want 1 (the next after the empty home bucket)", info)
	}
	if v := bucketValues(t, s); v[0] != 0 || v[1] != 0 || v[2] != 1 {
		t.Fatalf("buckets %v, want [0 0 1]", v)
	}
	if _, err := s.Reservations.Reserve(ctx, bucketRes(4, "k")); err != nil {
		t.Fatalf("user 4: %v", err)
	}
	for _, st := range []struct {
		name    string
		r       reservation.Reservation
		wantErr error
		wantDup bool
	}{
		{"sold out", bucketRes(9, "k"), order.ErrSoldOut, false},
		{"replayed key gets its order", bucketRes(3, "k1"), nil, true},
		{"quota held", bucketRes(3, "k2"), order.ErrAlreadyPurchased, false},
	} {
		got, err := s.Reservations.Reserve(ctx, st.r)
		if !errors.Is(err, st.wantErr) || got.Duplicate != st.wantDup {
			t.Fatalf("%s: %+v %v", st.name, got, err)
		}
		if st.wantDup && got.OrderNo != first.OrderNo {
			t.Fatalf("%s: order %s, want %s", st.name, got.OrderNo, first.OrderNo)
		}
	}
	// Not warmed: no bucket keys.
	other := stockredis.New(rdb, prefix+"x")
	if _, err := other.Reservations.Reserve(ctx, bucketRes(1, "k")); !errors.Is(err, order.ErrNotWarmed) {
		t.Fatalf("unwarmed: %v", err)
	}
}

// A bucketed reservation's release credits its own bucket, once.
func TestBucketedRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.NewCluster(t)
	s := stockredis.New(rdb, prefix)
	warmBuckets(t, s, 9)
	r := bucketRes(2, "k") // home bucket 2
	if _, err := s.Reservations.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	if v := bucketValues(t, s); v[2] != 2 {
		t.Fatalf("buckets %v, want bucket 2 at 2", v)
	}
	ref := reservation.Ref{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: item, ActivityID: r.ActivityID, IdempotencyKey: r.IdempotencyKey}
	for i, want := range []bool{true, false} {
		rel, err := s.Reservations.Release(ctx, ref, reservation.ReleaseOptions{Reason: order.ReasonPublishFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true})
		if err != nil || rel.Released != want {
			t.Fatalf("release %d: %v %v, want %v", i+1, rel.Released, err, want)
		}
	}
	if v := bucketValues(t, s); v[0] != 3 || v[1] != 3 || v[2] != 3 {
		t.Fatalf("buckets %v, want [3 3 3]", v)
	}
	if snap := snapshot(t, s); snap.Stock != 9 || snap.Inflight != 0 {
		t.Fatalf("snapshot %+v", snap)
	}
	// The user may buy again.
	if _, err := s.Reservations.Reserve(ctx, bucketRes(2, "k")); err != nil {
		t.Fatal(err)
	}
}

// The capped release gives the unit back, then lowers the buckets to what
// MySQL can still fulfil.
func TestBucketedReleaseCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	s := stockredis.New(rdb, prefix)
	warmBuckets(t, s, 9)
	r := bucketRes(1, "k")
	if _, err := s.Reservations.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	ref := reservation.Ref{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: item, ActivityID: r.ActivityID, IdempotencyKey: r.IdempotencyKey}
	// MySQL has only 4 left.
	if rel, err := s.Reservations.ReleaseCapped(ctx, ref, reservation.ReleaseOptions{Reason: order.ReasonOutOfStock, From: []reservation.State{reservation.StateReserved}}, 4); err != nil || !rel.Released {
		t.Fatalf("release: %v %v", rel.Released, err)
	}
	if snap := snapshot(t, s); snap.Stock != 4 || snap.Inflight != 0 {
		t.Fatalf("snapshot %+v, want stock 4", snap)
	}
}

// Warmup splits evenly over missing buckets and only ever lowers.
func TestBucketedWarmup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	s := stockredis.New(rdb, prefix)
	steps := []struct {
		name  string
		mysql int64
		want  []int64
	}{
		{"split", 10, []int64{4, 3, 3}},
		{"never raised", 20, []int64{4, 3, 3}},
		{"lowered largest first", 7, []int64{3, 2, 2}},
		{"to zero", 0, []int64{0, 0, 0}},
	}
	for _, st := range steps {
		n, err := s.Stock.WarmupBuckets(ctx, reservation.One(item), buckets, time.Hour, func(context.Context) (int64, error) { return st.mysql, nil })
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := bucketValues(t, s)
		var sum int64
		for i := range got {
			sum += got[i]
			if got[i] != st.want[i] {
				t.Fatalf("%s: buckets %v, want %v", st.name, got, st.want)
			}
		}
		if n != sum {
			t.Fatalf("%s: returned %d, sum %d", st.name, n, sum)
		}
	}
	k := s.Keys(reservation.One(item))
	if rdb.Exists(ctx, k.Stock()).Val() != 0 || rdb.Get(ctx, k.BucketMarker()).Val() != "3" {
		t.Fatal("a bucketed item has a main stock key, or no marker")
	}
	// A lost bucket is created with what the others leave.
	rdb.Set(ctx, k.Bucket(0), 1, redis.KeepTTL)
	rdb.Set(ctx, k.Bucket(1), 2, redis.KeepTTL)
	rdb.Del(ctx, k.Bucket(2))
	if n, err := s.Stock.WarmupBuckets(ctx, reservation.One(item), buckets, time.Hour, func(context.Context) (int64, error) { return 5, nil }); err != nil || n != 5 {
		t.Fatalf("rewarm: %d %v", n, err)
	}
	if v := bucketValues(t, s); v[2] != 2 {
		t.Fatalf("buckets %v, want the lost one at 2", v)
	}
}

// A bucketed reserve whose reservation cannot be written because the item's
// own master refuses connections (dead, or failed over and the client not
// told yet) has taken units from a bucket on another master: the reserve
// script never ran, so they go back at once. Before, they stayed out of the
// bucket until a repair: the API answered 503 and Redis sold less.
func TestBucketedReserveItemMasterUnreachable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.NewCluster(t)
	direct := stockredis.New(rdb, prefix)
	warmBuckets(t, direct, 30)
	cc := rdb.(*redis.ClusterClient)
	masterOf := func(key string) string {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return m.Options().Addr
	}
	down := masterOf(direct.Keys(reservation.One(item)).Inflight())
	vrdb := stockredis.NewClient(stockredis.Config{Addrs: redistest.ClusterAddrs(), Cluster: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == down {
				return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}})
	t.Cleanup(func() { vrdb.Close() })
	via := stockredis.New(vrdb, prefix)
	// A buyer whose home bucket is on another master.
	user := int64(-1)
	for u := int64(1); u <= buckets; u++ {
		if masterOf(direct.Keys(reservation.One(item)).Bucket(int(u%buckets))) != down {
			user = u
			break
		}
	}
	if user < 0 {
		t.Fatalf("every bucket of item %d is on its master %s", item, down)
	}
	before := bucketValues(t, direct)
	_, err := via.Reservations.Reserve(ctx, bucketRes(user, "k"))
	if err == nil || !errors.Is(err, order.ErrUnavailable) || stockredis.MayHaveRun(err) {
		t.Fatalf("reserve with the item's master refusing connections: %v, want unavailable and surely not run", err)
	}
	if after := bucketValues(t, direct); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("buckets %v before, %v after a reserve that never ran", before, after)
	}
}

// A warm-up never lays an item out in another number of buckets than its
// live keys have (the item would hold two layouts): refused with
// activity.ErrSettingLocked, nothing written; the same layout warms as ever.
func TestWarmupKeepsTheLiveLayout(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	s := stockredis.New(rdb, prefix)
	ctx := context.Background()
	db := func(context.Context) (int64, error) { return 30, nil }
	k := s.Keys(reservation.One(1))
	if _, err := s.Stock.WarmupBuckets(ctx, reservation.One(1), 1, time.Hour, db); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stock.WarmupBuckets(ctx, reservation.One(1), 3, time.Hour, db); !errors.Is(err, activity.ErrSettingLocked) {
		t.Fatalf("warm-up in 3 buckets over one stock key: %v, want ErrSettingLocked", err)
	}
	if n := rdb.Exists(ctx, k.BucketMarker(), k.Bucket(0), k.Bucket(1), k.Bucket(2)).Val(); n != 0 {
		t.Fatalf("the refused warm-up wrote %d bucket keys", n)
	}
	if _, err := s.Stock.WarmupBuckets(ctx, reservation.One(1), 1, time.Hour, db); err != nil {
		t.Fatalf("warm-up in the live layout: %v", err)
	}

	k2 := s.Keys(reservation.One(2))
	if _, err := s.Stock.WarmupBuckets(ctx, reservation.One(2), 3, time.Hour, db); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2} {
		if _, err := s.Stock.WarmupBuckets(ctx, reservation.One(2), n, time.Hour, db); !errors.Is(err, activity.ErrSettingLocked) {
			t.Fatalf("warm-up in %d over 3 buckets: %v, want ErrSettingLocked", n, err)
		}
	}
	if rdb.Exists(ctx, k2.Stock()).Val() != 0 {
		t.Fatal("the refused warm-up wrote the one stock key beside the buckets")
	}
	if m, _ := rdb.Get(ctx, k2.BucketMarker()).Int(); m != 3 {
		t.Fatalf("bucket marker %d after the refusals, want 3", m)
	}
}
