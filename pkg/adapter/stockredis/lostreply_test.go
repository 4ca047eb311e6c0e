package stockredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// lossy is a Store whose connections go through fault proxies (one per
// node on the cluster), beside a direct one to read the truth with.
type lossy struct {
	redistest.Proxied
	via    *stockredis.Store // through the proxies
	direct *stockredis.Store
}

func newLossy(t *testing.T, cluster bool) lossy {
	t.Helper()
	p := redistest.NewProxied(t, cluster, "reserve", "claim", "confirm", "release", "warmup",
		"bucket_take", "bucket_give", "bucket_set", "warmup_buckets", "restock", "room_join", "room_advance", "room_control", "entry_take")
	return lossy{Proxied: p, via: stockredis.New(p.Client(t), p.Prefix), direct: stockredis.New(p.Direct, p.Prefix)}
}

// mustBeUnknown fails the test unless err is the error of a script that
// ran with its answer lost: a client library that sent it again would have
// returned that second run's answer instead.
func mustBeUnknown(t *testing.T, l lossy, what string, err error) {
	t.Helper()
	if err == nil || !stockredis.MayHaveRun(err) {
		t.Fatalf("%s with its answer lost: err = %v, want an unknown outcome (was the script sent again?)", what, err)
	}
	var u *stockredis.UnknownOutcomeError
	if !errors.As(err, &u) {
		t.Fatalf("%s: err = %v, want an UnknownOutcomeError", what, err)
	}
	if l.Lost() != 1 {
		t.Fatalf("%s: the proxies dropped %d answers, want 1", what, l.Lost())
	}
}

func forBoth(t *testing.T, f func(t *testing.T, l lossy)) {
	for _, c := range []struct {
		name    string
		cluster bool
	}{{"single", false}, {"cluster", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f(t, newLossy(t, c.cluster))
		})
	}
}

func warm(t *testing.T, s *stockredis.Store, stock int64, buckets int) {
	t.Helper()
	_, err := s.Stock.WarmupBuckets(context.Background(), reservation.One(item), buckets, time.Hour, func(context.Context) (int64, error) { return stock, nil })
	if err != nil {
		t.Fatal(err)
	}
}

func wantStock(t *testing.T, s *stockredis.Store, stock, inflight int64) {
	t.Helper()
	snap := snapshot(t, s)
	if snap.Stock != stock || snap.Inflight != inflight {
		t.Fatalf("stock %d in flight %d, want %d and %d", snap.Stock, snap.Inflight, stock, inflight)
	}
}

func ref(r reservation.Reservation) reservation.Ref {
	return reservation.Ref{OrderNo: r.OrderNo, UserID: r.UserID, ItemID: r.ItemID, ActivityID: r.ActivityID, IdempotencyKey: r.IdempotencyKey}
}

func state(t *testing.T, s *stockredis.Store, orderNo string) reservation.State {
	t.Helper()
	info, err := s.Reservations.Reservation(context.Background(), orderNo)
	if errors.Is(err, order.ErrNotFound) {
		return reservation.StateMissing
	}
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// The reserve script's answer is lost: it ran once, and the API's way out
// (release from RESERVED, forgetting the key) leaves nothing held; the same
// key then buys.
func TestLostReplyReserve(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		ctx := context.Background()
		warm(t, l.direct, 5, 1)
		r := res(1, "k1", 1)
		l.LoseNext("reserve")
		_, err := l.via.Reservations.Reserve(ctx, r)
		mustBeUnknown(t, l, "reserve", err)
		wantStock(t, l.direct, 4, 1) // ran exactly once
		if _, err := l.via.Reservations.Release(ctx, ref(r), reservation.ReleaseOptions{Reason: order.ReasonReserveFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true}); err != nil {
			t.Fatal(err)
		}
		wantStock(t, l.direct, 5, 0)
		again := r
		again.OrderNo = gen.Next(item)
		got, err := l.via.Reservations.Reserve(ctx, again)
		if err != nil || got.Duplicate || got.OrderNo != again.OrderNo {
			t.Fatalf("the same key after the 503: %+v, %v; want a new reservation", got, err)
		}
	})
}

// A release's answer is lost, from each state it may start from; the
// caller's retry finds RELEASED (its own work done), the stock comes back
// once, and the quota and (for the API) the key are free.
func TestLostReplyRelease(t *testing.T) {
	for _, c := range []struct {
		name   string
		from   reservation.State
		forget bool
		prep   func(context.Context, *stockredis.Store, reservation.Reservation) error
	}{
		{name: "api from RESERVED", from: reservation.StateReserved, forget: true},
		{name: "consumer from CLAIMED", from: reservation.StateClaimed, prep: func(ctx context.Context, s *stockredis.Store, r reservation.Reservation) error {
			_, err := s.Reservations.Claim(ctx, reservation.One(item), []string{r.OrderNo})
			return err
		}},
		{name: "closer from CONFIRMED", from: reservation.StateConfirmed, prep: func(ctx context.Context, s *stockredis.Store, r reservation.Reservation) error {
			_, err := s.Reservations.Confirm(ctx, reservation.One(item), []string{r.OrderNo})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			forBoth(t, func(t *testing.T, l lossy) {
				ctx := context.Background()
				warm(t, l.direct, 5, 1)
				r := res(1, "k1", 1)
				if _, err := l.direct.Reservations.Reserve(ctx, r); err != nil {
					t.Fatal(err)
				}
				if c.prep != nil {
					if err := c.prep(ctx, l.direct, r); err != nil {
						t.Fatal(err)
					}
				}
				l.LoseNext("release")
				_, err := l.via.Reservations.Release(ctx, ref(r), reservation.ReleaseOptions{Reason: "test", From: []reservation.State{c.from}, FreeKey: c.forget})
				mustBeUnknown(t, l, "release", err)
				rel, err := l.via.Reservations.Release(ctx, ref(r), reservation.ReleaseOptions{Reason: "test", From: []reservation.State{c.from}, FreeKey: c.forget})
				if err != nil || rel.Released || rel.State != reservation.StateReleased {
					t.Fatalf("the retry: released %v state %s err %v; want it to find RELEASED", rel.Released, rel.State, err)
				}
				wantStock(t, l.direct, 5, 0)
				// The quota is free: the user buys again; with the key
				// forgotten, with the same key.
				key := "k2"
				if c.forget {
					key = "k1"
				}
				next := res(1, key, 1)
				if got, err := l.direct.Reservations.Reserve(ctx, next); err != nil || got.Duplicate {
					t.Fatalf("after the release: %+v, %v; want a new reservation", got, err)
				}
			})
		})
	}
}

// The claim's and the confirm's answers are lost: both are safe to repeat
// and the repeat says so.
func TestLostReplyClaimConfirm(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		ctx := context.Background()
		warm(t, l.direct, 5, 1)
		r := res(1, "k1", 1)
		if _, err := l.direct.Reservations.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
		l.LoseNext("claim")
		_, err := l.via.Reservations.Claim(ctx, reservation.One(item), []string{r.OrderNo})
		mustBeUnknown(t, l, "claim", err)
		states, err := l.via.Reservations.Claim(ctx, reservation.One(item), []string{r.OrderNo})
		if err != nil || states[0] != reservation.StateClaimed {
			t.Fatalf("claim again: %v %v; want CLAIMED (go ahead)", states, err)
		}
		l.LoseNext("confirm")
		_, err = l.via.Reservations.Confirm(ctx, reservation.One(item), []string{r.OrderNo})
		if err == nil || !stockredis.MayHaveRun(err) {
			t.Fatalf("confirm with its answer lost: %v", err)
		}
		if n, err := l.via.Reservations.Confirm(ctx, reservation.One(item), []string{r.OrderNo}); err != nil || n != 0 {
			t.Fatalf("confirm again moved %d (%v); want 0: it ran once", n, err)
		}
		wantStock(t, l.direct, 4, 0)
		if st := state(t, l.direct, r.OrderNo); st != reservation.StateConfirmed {
			t.Fatalf("state %s, want CONFIRMED", st)
		}
	})
}

// A bucketed item: the bucket_take's answer is lost (the reservation is
// never written), then the API's release finds it MISSING and the units go
// back to whichever bucket took them; a bucket_give's answer is lost in a
// release, and the repeated release gives the units back once.
func TestLostReplyBuckets(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		ctx := context.Background()
		warm(t, l.direct, 9, 3)
		r := res(1, "k1", 2)
		r.Buckets = 3
		l.LoseNext("bucket_take")
		_, err := l.via.Reservations.Reserve(ctx, r)
		mustBeUnknown(t, l, "bucket_take", err)
		wantStock(t, l.direct, 7, 0)
		rel, err := l.via.Reservations.Release(ctx, ref(r), reservation.ReleaseOptions{Reason: order.ReasonReserveFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true})
		if err != nil || rel.Released || rel.State != reservation.StateMissing {
			t.Fatalf("release after the lost take: %v %s %v", rel.Released, rel.State, err)
		}
		wantStock(t, l.direct, 9, 0)
		// Giving back again gives nothing more.
		if _, err := l.via.Reservations.Release(ctx, ref(r), reservation.ReleaseOptions{Reason: order.ReasonReserveFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true}); err != nil {
			t.Fatal(err)
		}
		wantStock(t, l.direct, 9, 0)

		r2 := res(2, "k2", 2)
		r2.Buckets = 3
		if _, err := l.direct.Reservations.Reserve(ctx, r2); err != nil {
			t.Fatal(err)
		}
		wantStock(t, l.direct, 7, 2)
		l.LoseNext("bucket_give")
		_, err = l.via.Reservations.Release(ctx, ref(r2), reservation.ReleaseOptions{Reason: "test", From: []reservation.State{reservation.StateReserved}})
		if err == nil || !stockredis.MayHaveRun(err) {
			t.Fatalf("release whose bucket_give answer was lost: %v", err)
		}
		rel, err = l.via.Reservations.Release(ctx, ref(r2), reservation.ReleaseOptions{Reason: "test", From: []reservation.State{reservation.StateReserved}})
		if err != nil || rel.Released || rel.State != reservation.StateReleased {
			t.Fatalf("the repeated release: %v %s %v", rel.Released, rel.State, err)
		}
		wantStock(t, l.direct, 9, 0)
	})
}
