package stockredis_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

func guard(fence int64) drift.Guard {
	return drift.Guard{Fence: fence, ExpireAt: time.Now().Add(time.Hour)}
}

func TestReconcileView(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 10)
	rc := s.Reconciler

	a, b, c := res(1, "a", 2), res(2, "b", 1), res(3, "c", 3)
	for _, r := range []reservation.Reservation{a, b, c} {
		if _, err := s.Reservations.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Reservations.Claim(ctx, reservation.One(item), []string{b.OrderNo}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reservations.Confirm(ctx, reservation.One(item), []string{c.OrderNo}); err != nil {
		t.Fatal(err)
	}
	v, err := rc.View(ctx, reservation.One(item), []string{c.OrderNo, b.OrderNo, "01ARZ3NDEKTSV4RRFFQ69G5FAV-42"})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Warmed || v.Stock != 4 || v.Inflight != 3 {
		t.Fatalf("view %+v, want warmed, stock 4, in flight 3", v)
	}
	if !slices.Equal(v.Pending, []string{a.OrderNo, b.OrderNo}) {
		t.Fatalf("pending %v, want %v", v.Pending, []string{a.OrderNo, b.OrderNo})
	}
	want := map[string]reservation.State{c.OrderNo: reservation.StateConfirmed, b.OrderNo: reservation.StateClaimed,
		"01ARZ3NDEKTSV4RRFFQ69G5FAV-42": reservation.StateMissing}
	for no, st := range want {
		if v.States[no] != st {
			t.Fatalf("state of %s = %q, want %q", no, v.States[no], st)
		}
	}

	empty, err := newStore(t, -1).Reconciler.View(ctx, reservation.One(item), nil)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Warmed || empty.Stock != 0 || empty.Inflight != 0 || len(empty.Pending) != 0 {
		t.Fatalf("view of an unwarmed item: %+v", empty)
	}
}

func TestReconcileSetStock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 10)
	rc := s.Reconciler
	rdb := s.Client()
	k := s.Keys(reservation.One(item))

	if _, err := s.Reservations.Reserve(ctx, res(1, "a", 2)); err != nil {
		t.Fatal(err)
	}
	seen, err := rc.View(ctx, reservation.One(item), nil)
	if err != nil {
		t.Fatal(err)
	}
	ttlBefore := rdb.PTTL(ctx, k.Stock()).Val()

	// A reservation after the read: the compare-and-set refuses.
	if _, err := s.Reservations.Reserve(ctx, res(2, "b", 1)); err != nil {
		t.Fatal(err)
	}
	if got, err := rc.SetStock(ctx, reservation.One(item), seen, 5, time.Hour, guard(3)); err != nil || got != drift.Changed {
		t.Fatalf("set after a reservation: %v %v, want %v", got, err, drift.Changed)
	}
	if n := rdb.Get(ctx, k.Stock()).Val(); n != "7" {
		t.Fatalf("stock %s after a refused set, want 7", n)
	}
	// A confirm changes only inflight: refused as well.
	seen, _ = rc.View(ctx, reservation.One(item), nil)
	if _, err := s.Reservations.Confirm(ctx, reservation.One(item), seen.Pending[:1]); err != nil {
		t.Fatal(err)
	}
	if got, _ := rc.SetStock(ctx, reservation.One(item), seen, 5, time.Hour, guard(3)); got != drift.Changed {
		t.Fatalf("set after a confirm: %v, want %v", got, drift.Changed)
	}

	// Unchanged: written, TTL kept, fence recorded.
	seen, _ = rc.View(ctx, reservation.One(item), nil)
	if got, err := rc.SetStock(ctx, reservation.One(item), seen, 5, time.Hour, guard(3)); err != nil || got != drift.Written {
		t.Fatalf("set: %v %v", got, err)
	}
	if n := rdb.Get(ctx, k.Stock()).Val(); n != "5" {
		t.Fatalf("stock %s, want 5", n)
	}
	if ttl := rdb.PTTL(ctx, k.Stock()).Val(); ttl <= 0 || ttl > ttlBefore {
		t.Fatalf("stock TTL %v, want kept (at most %v)", ttl, ttlBefore)
	}
	if f := rdb.Get(ctx, k.Fence()).Val(); f != "3" {
		t.Fatalf("fence %q, want 3", f)
	}
	if ttl := rdb.PTTL(ctx, k.Fence()).Val(); ttl <= 0 {
		t.Fatalf("fence key TTL %v, want one", ttl)
	}

	// The same fence may write again; a smaller one may not.
	seen, _ = rc.View(ctx, reservation.One(item), nil)
	if got, _ := rc.SetStock(ctx, reservation.One(item), seen, 6, time.Hour, guard(3)); got != drift.Written {
		t.Fatalf("same fence again: %v", got)
	}
	seen, _ = rc.View(ctx, reservation.One(item), nil)
	if got, _ := rc.SetStock(ctx, reservation.One(item), seen, 1, time.Hour, guard(2)); got != drift.StaleFence {
		t.Fatalf("older fence: %v, want %v", got, drift.StaleFence)
	}
	if n := rdb.Get(ctx, k.Stock()).Val(); n != "6" {
		t.Fatalf("stock %s after a stale write, want 6", n)
	}
	if _, err := rc.SetStock(ctx, reservation.One(item), seen, -1, time.Hour, guard(4)); err == nil {
		t.Fatal("negative stock accepted")
	}
}

func TestReconcileSetStockCreatesMissingKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, -1)
	rc := s.Reconciler
	rdb := s.Client()
	seen, _ := rc.View(ctx, reservation.One(item), nil)

	// Someone warmed it meanwhile: refused.
	rdb.Set(ctx, s.Keys(reservation.One(item)).Stock(), 3, time.Hour)
	if got, _ := rc.SetStock(ctx, reservation.One(item), seen, 9, time.Hour, guard(1)); got != drift.Changed {
		t.Fatalf("set over a key created meanwhile: %v", got)
	}
	rdb.Del(ctx, s.Keys(reservation.One(item)).Stock())

	if got, err := rc.SetStock(ctx, reservation.One(item), seen, 9, 2*time.Hour, guard(1)); err != nil || got != drift.Written {
		t.Fatalf("create: %v %v", got, err)
	}
	if err := rc.MarkWarmed(ctx, reservation.One(item)); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, s)
	if !snap.Warmed || snap.Stock != 9 {
		t.Fatalf("after create: %+v", snap)
	}
	if ttl := rdb.PTTL(ctx, s.Keys(reservation.One(item)).Stock()).Val(); ttl < time.Hour || ttl > 2*time.Hour {
		t.Fatalf("TTL %v, want about 2h", ttl)
	}
	items, _ := s.Stock.WarmedItems(ctx)
	if !slices.Contains(items, reservation.One(int64(item))) {
		t.Fatalf("warmed items %v lack %d", items, item)
	}
	// Reservations work on the restored key.
	if _, err := s.Reservations.Reserve(ctx, res(1, "a", 1)); err != nil {
		t.Fatal(err)
	}
}

func TestReconcileQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, 10)
	rc := s.Reconciler
	rdb := s.Client()
	k := s.Keys(reservation.One(item))

	a, b := res(1, "a", 1), res(2, "b", 1)
	for _, r := range []reservation.Reservation{a, b} {
		if _, err := s.Reservations.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Reservations.Confirm(ctx, reservation.One(item), []string{a.OrderNo}); err != nil {
		t.Fatal(err)
	}
	// Another activity's key is not listed; nor is a key of another item.
	rdb.Set(ctx, k.Quota(8, "3"), "x", time.Hour)
	rdb.Set(ctx, s.Keys(reservation.One(item+1)).Quota(7, "4"), "y", time.Hour)

	holders, err := rc.QuotaHolders(ctx, item, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(holders) != 2 || holders["1"] != a.OrderNo || holders["2"] != b.OrderNo {
		t.Fatalf("holders %v", holders)
	}
	states, err := rc.QuotaStates(ctx, reservation.One(item), 7, map[string]string{"1": a.OrderNo, "2": b.OrderNo, "5": "gone"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]drift.QuotaState{
		"1": {Holder: a.OrderNo, State: reservation.StateConfirmed},
		"2": {Holder: b.OrderNo, State: reservation.StateReserved},
		"5": {Holder: "", State: reservation.StateMissing},
	}
	for u, w := range want {
		if states[u] != w {
			t.Fatalf("user %s: %+v, want %+v", u, states[u], w)
		}
	}

	// Restore: only into a missing key (or the stale value read).
	rdb.Del(ctx, k.Quota(7, "1"))
	if got, err := rc.RestoreQuota(ctx, reservation.One(item), 7, "1", a.OrderNo, "", time.Hour, guard(5)); err != nil || got != drift.Written {
		t.Fatalf("restore: %v %v", got, err)
	}
	if v := rdb.Get(ctx, k.Quota(7, "1")).Val(); v != a.OrderNo {
		t.Fatalf("quota %q, want %q", v, a.OrderNo)
	}
	if ttl := rdb.PTTL(ctx, k.Quota(7, "1")).Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("quota TTL %v", ttl)
	}
	if got, _ := rc.RestoreQuota(ctx, reservation.One(item), 7, "1", "other", "", time.Hour, guard(5)); got != drift.Changed {
		t.Fatalf("restore over a present key: %v", got)
	}
	rdb.Set(ctx, k.Quota(7, "6"), "stale", time.Hour)
	if got, _ := rc.RestoreQuota(ctx, reservation.One(item), 7, "6", "live", "stale", time.Hour, guard(5)); got != drift.Written {
		t.Fatalf("restore over the stale value: %v", got)
	}
	if got, _ := rc.RestoreQuota(ctx, reservation.One(item), 7, "9", "live", "", time.Hour, guard(4)); got != drift.StaleFence {
		t.Fatalf("restore with an older fence: %v", got)
	}

	// Remove: compare-and-delete.
	rdb.Set(ctx, k.Quota(7, "7"), "stale", time.Hour)
	if got, _ := rc.RemoveQuota(ctx, reservation.One(item), 7, "7", "other", guard(5)); got != drift.Changed {
		t.Fatalf("remove with the wrong value: %v", got)
	}
	if got, _ := rc.RemoveQuota(ctx, reservation.One(item), 7, "7", "stale", guard(4)); got != drift.StaleFence {
		t.Fatalf("remove with an older fence: %v", got)
	}
	if got, err := rc.RemoveQuota(ctx, reservation.One(item), 7, "7", "stale", guard(6)); err != nil || got != drift.Written {
		t.Fatalf("remove: %v %v", got, err)
	}
	if n := rdb.Exists(ctx, k.Quota(7, "7")).Val(); n != 0 {
		t.Fatal("stale quota key still there")
	}
}

func TestReconcileQuotaHoldersScansMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, -1)
	rdb := s.Client()
	k := s.Keys(reservation.One(item))
	pipe := rdb.Pipeline()
	for u := int64(1); u <= 2500; u++ {
		pipe.Set(ctx, k.Quota(7, strconv.FormatInt(u, 10)), fmt.Sprintf("o%d", u), time.Hour)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	holders, err := s.Reconciler.QuotaHolders(ctx, item, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(holders) != 2500 || holders["1234"] != "o1234" {
		t.Fatalf("%d holders, user 1234 -> %q", len(holders), holders["1234"])
	}
}

// The reconciler's reads and repairs on a real 3-master Redis Cluster: the
// items' hash tags land on different masters, and the quota SCAN finds the
// keys on whichever master owns the item.
func TestReconcileOnRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.NewCluster(t)
	s := stockredis.New(rdb, prefix)
	rc := s.Reconciler
	for it := int64(1); it <= 6; it++ {
		if _, err := s.Stock.Warmup(ctx, reservation.One(it), time.Hour, func(context.Context) (int64, error) { return 10, nil }); err != nil {
			t.Fatal(err)
		}
		var nos []string
		for u := int64(1); u <= 3; u++ {
			r := reservation.Reservation{OrderNo: gen.Next(it), UserID: strconv.FormatInt(u, 10), ItemID: it, ActivityID: 7, Quantity: 1,
				IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour}
			if _, err := s.Reservations.Reserve(ctx, r); err != nil {
				t.Fatal(err)
			}
			nos = append(nos, r.OrderNo)
		}
		if _, err := s.Reservations.Confirm(ctx, reservation.One(it), nos[:1]); err != nil {
			t.Fatal(err)
		}
		v, err := rc.View(ctx, reservation.One(it), nos[:1])
		if err != nil {
			t.Fatal(err)
		}
		if v.Stock != 7 || v.Inflight != 2 || len(v.Pending) != 2 || v.States[nos[0]] != reservation.StateConfirmed {
			t.Fatalf("item %d: view %+v", it, v)
		}
		holders, err := rc.QuotaHolders(ctx, it, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(holders) != 3 || holders["2"] != nos[1] {
			t.Fatalf("item %d: holders %v", it, holders)
		}
		states, err := rc.QuotaStates(ctx, reservation.One(it), 7, holders)
		if err != nil {
			t.Fatal(err)
		}
		if states["1"].State != reservation.StateConfirmed || states["3"].State != reservation.StateReserved {
			t.Fatalf("item %d: states %+v", it, states)
		}
		if got, err := rc.SetStock(ctx, reservation.One(it), v, 8, time.Hour, guard(1)); err != nil || got != drift.Written {
			t.Fatalf("item %d: set stock %v %v", it, got, err)
		}
		if got, err := rc.RemoveQuota(ctx, reservation.One(it), 7, "1", nos[0], guard(1)); err != nil || got != drift.Written {
			t.Fatalf("item %d: remove quota %v %v", it, got, err)
		}
		if got, err := rc.RestoreQuota(ctx, reservation.One(it), 7, "1", nos[0], "", time.Hour, guard(1)); err != nil || got != drift.Written {
			t.Fatalf("item %d: restore quota %v %v", it, got, err)
		}
		if err := rc.MarkWarmed(ctx, reservation.One(it)); err != nil {
			t.Fatal(err)
		}
	}
}

// On the 3-master cluster, for a bucketed item whose buckets live on other
// masters than its own keys: a lost reservation (hash and take marker) is
// restored only where missing, and a release from it gives the unit back to
// its bucket once; a restored reservation taken back (its order closed
// meanwhile) leaves neither hash nor marker, so a release credits nothing;
// an older fence is refused.
func TestRestoreReservationsOnRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.NewCluster(t)
	s := stockredis.New(rdb, prefix)
	rc := s.Reconciler
	const item, buckets = 4, 3
	if _, err := s.Stock.WarmupBuckets(ctx, reservation.One(item), buckets, time.Hour, func(context.Context) (int64, error) { return 30, nil }); err != nil {
		t.Fatal(err)
	}
	k := s.Keys(reservation.One(item))
	bought := func(user string) reservation.Reservation {
		r := reservation.Reservation{OrderNo: gen.Next(item), UserID: user, ItemID: item, ActivityID: 7, Quantity: 2,
			IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour, Buckets: buckets}
		if _, err := s.Reservations.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reservations.Claim(ctx, reservation.One(item), []string{r.OrderNo}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reservations.Confirm(ctx, reservation.One(item), []string{r.OrderNo}); err != nil {
			t.Fatal(err)
		}
		// Lost with the data: the hash and every take marker.
		rdb.Del(ctx, k.Reservation(r.OrderNo))
		for b := range buckets {
			rdb.Del(ctx, k.Taken(b, r.OrderNo))
		}
		return r
	}
	lost := func(r reservation.Reservation) drift.LostReservation {
		return drift.LostReservation{OrderNo: r.OrderNo, UserID: r.UserID, ActivityID: r.ActivityID, Quantity: r.Quantity,
			IdempotencyKey: r.IdempotencyKey, ReservedAt: r.At, TTL: time.Hour}
	}
	ref := func(r reservation.Reservation) reservation.Ref {
		return reservation.Ref{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: item, ActivityID: r.ActivityID, IdempotencyKey: r.IdempotencyKey}
	}
	stock := func() int64 {
		snap, err := s.Stock.Stock(ctx, reservation.One(item))
		if err != nil {
			t.Fatal(err)
		}
		return snap.Stock
	}

	a, b := bought("1"), bought("2")
	if got := stock(); got != 26 {
		t.Fatalf("stock %d after two orders of 2, want 26", got)
	}
	written, res, err := rc.RestoreReservations(ctx, reservation.One(item), buckets, []drift.LostReservation{lost(a), lost(b)}, guard(5))
	if err != nil || res != drift.Written || len(written) != 2 {
		t.Fatalf("restore: %v %v %v", written, res, err)
	}
	if again, res, err := rc.RestoreReservations(ctx, reservation.One(item), buckets, []drift.LostReservation{lost(a)}, guard(5)); err != nil ||
		res != drift.Written || len(again) != 0 {
		t.Fatalf("restore again: %v %v %v; want nothing written", again, res, err)
	}
	if _, res, err := rc.RestoreReservations(ctx, reservation.One(item), buckets, []drift.LostReservation{lost(a)}, guard(4)); err != nil || res != drift.StaleFence {
		t.Fatalf("restore with an older fence: %v %v", res, err)
	}

	// a's order is closed: its release gives 2 units back, once.
	for range 2 {
		if _, err := s.Reservations.Release(ctx, ref(a), reservation.ReleaseOptions{Reason: "CANCELLED", From: []reservation.State{reservation.StateConfirmed}}); err != nil {
			t.Fatal(err)
		}
		if got := stock(); got != 28 {
			t.Fatalf("stock %d after the release of a restored reservation, want 28", got)
		}
	}
	// b's order was closed meanwhile: taken back, its release credits nothing.
	if n, res, err := rc.UnrestoreReservations(ctx, reservation.One(item), []string{a.OrderNo, b.OrderNo}, guard(5)); err != nil || res != drift.Written || n != 1 {
		t.Fatalf("take back: %d %v %v; want 1 (a's is RELEASED)", n, res, err)
	}
	for bk := range buckets {
		if rdb.Exists(ctx, k.Taken(bk, b.OrderNo)).Val() != 0 {
			t.Fatalf("take marker of the taken-back reservation left in bucket %d", bk)
		}
	}
	if rel, err := s.Reservations.Release(ctx, ref(b), reservation.ReleaseOptions{Reason: "CANCELLED", From: []reservation.State{reservation.StateConfirmed}}); err != nil || rel.Released || rel.State != reservation.StateMissing {
		t.Fatalf("release after the take-back: %v %s %v, want MISSING", rel.Released, rel.State, err)
	}
	if got := stock(); got != 28 {
		t.Fatalf("stock %d, want 28", got)
	}
	// a's release ran between its restored hash and its marker: the marker
	// came after the release. The take-back drops it, so the closer's
	// repeated release gives nothing more.
	home, _ := strconv.Atoi(rdb.HGet(ctx, k.Reservation(a.OrderNo), "bucket").Val())
	rdb.Set(ctx, k.Taken(home, a.OrderNo), 2, time.Hour)
	if n, res, err := rc.UnrestoreReservations(ctx, reservation.One(item), []string{a.OrderNo}, guard(5)); err != nil || res != drift.Written || n != 0 {
		t.Fatalf("take back a RELEASED one: %d %v %v; want 0 deleted", n, res, err)
	}
	if rdb.Exists(ctx, k.Taken(home, a.OrderNo)).Val() != 0 {
		t.Fatal("the marker restored after the release is still there")
	}
	if _, err := s.Reservations.Release(ctx, ref(a), reservation.ReleaseOptions{Reason: "CANCELLED", From: []reservation.State{reservation.StateConfirmed}}); err != nil {
		t.Fatal(err)
	}
	if got := stock(); got != 28 {
		t.Fatalf("stock %d after a repeated release, want 28", got)
	}
}
