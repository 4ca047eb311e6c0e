package reconcile

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/proxytest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Each repair script's answer is lost once after it ran (a real proxy
// between the checker and Redis): that item's repair stops with an unknown
// outcome (the item is unchecked; the run goes on with the others), and the
// next pass reads the state the script left and finds nothing more to do;
// nothing is applied twice.
func TestLostReplyRepairScripts(t *testing.T) {
	for _, name := range []string{"reconcile_set_stock", "reconcile_restore_quota", "reconcile_remove_quota", "reconcile_restore_missing",
		"reconcile_restore_missing quota", "reconcile_restore_reservation"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// "reconcile_restore_missing quota": the same script, giving a
			// missing quota key back (after the idempotency records' call).
			script, _, _ := strings.Cut(name, " ")
			f := newFixture(t, 20, -time.Minute)
			k := f.store.Keys(reservation.One(f.item))
			if err := f.rdb.ScriptLoad(f.ctx, lua.Source(script)).Err(); err != nil {
				t.Fatal(err)
			}
			p := proxytest.Start(t, redistest.Addr(), proxytest.RESP)
			via := stockredis.NewClient(stockredis.Config{Addrs: []string{p.Addr()}})
			t.Cleanup(func() { via.Close() })
			f.c.Stock = stockredis.New(via, f.prefix).Reconciler

			live := f.reserve(1, 1)
			f.commit(live)
			f.confirm(live)
			lose := proxytest.RedisScript(lua.Source(script))
			switch name {
			case "reconcile_restore_missing quota":
				key := k.Quota(f.act.ID, "1")
				f.rdb.Del(f.ctx, key)
				byScript := lose
				lose = func(r proxytest.Request) bool { return byScript(r) && slices.Contains(r.Args, key) }
			case "reconcile_set_stock":
				f.rdb.Set(f.ctx, k.Stock(), 25, redis.KeepTTL) // 6 too many
			case "reconcile_restore_quota": // a key holding an order that never was
				f.rdb.Set(f.ctx, k.Quota(f.act.ID, "1"), f.gen.Next(f.item), time.Hour)
			case "reconcile_remove_quota":
				f.rdb.Set(f.ctx, k.Quota(f.act.ID, "3"), f.gen.Next(f.item), time.Hour)
			case "reconcile_restore_missing":
				f.rdb.Del(f.ctx, k.Idem("1", live.IdempotencyKey))
			case "reconcile_restore_reservation":
				f.rdb.Del(f.ctx, k.Reservation(live.OrderNo))
			}

			p.LoseReply(lose, 1)
			l := f.lock()
			rep, err := f.c.Run(f.ctx, f.targets(), CheckAndRepair, l)
			err = uncheckedErr(t, rep, err)
			if err == nil || !stockredis.MayHaveRun(err) {
				t.Fatalf("repair pass whose %s answer was lost: %v; want an unknown outcome", script, err)
			}
			if p.Lost() != 1 {
				t.Fatalf("the proxy dropped %d answers, want 1", p.Lost())
			}
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}

			// The script ran: the next pass finds the item in order.
			_, it := f.check(CheckOnly)
			if it.Verdict != OK || it.Drift != 0 {
				t.Fatalf("after the lost answer: %+v; want OK (the script ran once)", it)
			}
			if s := f.redisStock().Stock; s != 19 {
				t.Fatalf("Redis stock %d, want 19", s)
			}
			if got := f.rdb.Get(f.ctx, k.Quota(f.act.ID, "1")).Val(); got != live.OrderNo {
				t.Fatalf("quota of the live order's user = %q, want %q", got, live.OrderNo)
			}
			if f.rdb.Exists(f.ctx, k.Quota(f.act.ID, "3")).Val() != 0 {
				t.Fatal("stale quota key kept")
			}
			if got := f.rdb.Get(f.ctx, k.Idem("1", live.IdempotencyKey)).Val(); got != live.OrderNo {
				t.Fatalf("idempotency record of the live order = %q, want %q", got, live.OrderNo)
			}
			if st := f.rdb.HGet(f.ctx, k.Reservation(live.OrderNo), "state").Val(); reservation.State(st) != reservation.StateConfirmed {
				t.Fatalf("reservation of the live order is %q, want CONFIRMED", st)
			}
			// The next pass finds nothing more to restore, and the live
			// order's close credits its unit once.
			if _, it := f.check(CheckAndRepair); it.Verdict != OK || len(it.Repairs) != 0 {
				t.Fatalf("the pass after the lost answer: %+v", it)
			}
			f.cancel(live)
			f.wantAgree(20)
		})
	}
}

// The answer of the take-back of a restored reservation (its order closed
// after the restore, its release not run) is lost after the script ran:
// the item's repair stops with an unknown outcome; the hash is gone, so the
// closer's release finds none and credits nothing, and the next pass puts
// the unit into Redis from MySQL's figure: once.
func TestLostReplyUnrestoreReservation(t *testing.T) {
	t.Parallel()
	const script = "reconcile_unrestore_reservation"
	f := newFixture(t, 20, -time.Minute)
	k := f.store.Keys(reservation.One(f.item))
	if err := f.rdb.ScriptLoad(f.ctx, lua.Source(script)).Err(); err != nil {
		t.Fatal(err)
	}
	p := proxytest.Start(t, redistest.Addr(), proxytest.RESP)
	via := stockredis.NewClient(stockredis.Config{Addrs: []string{p.Addr()}})
	t.Cleanup(func() { via.Close() })
	f.c.Stock = stockredis.New(via, f.prefix).Reconciler

	kept, closed := f.bought(1), f.bought(2)
	f.rdb.Del(f.ctx, k.Reservation(kept.OrderNo), k.Reservation(closed.OrderNo)) // lost with the restore
	if _, it := f.check(CheckAndRepair); it.ReservationsRestored != 2 {
		t.Fatalf("repair: %+v, want 2 reservations restored", it)
	}
	if tr, err := f.db.Orders.CloseOrder(f.ctx, closed.UserID, closed.OrderNo, order.ReasonCancelled); err != nil || !tr.Won {
		t.Fatalf("close: %+v %v", tr, err)
	}

	p.LoseReply(proxytest.RedisScript(lua.Source(script)), 1)
	l := f.lock()
	rep, err := f.c.Run(f.ctx, f.targets(), CheckAndRepair, l)
	err = uncheckedErr(t, rep, err)
	if err == nil || !stockredis.MayHaveRun(err) {
		t.Fatalf("repair pass whose %s answer was lost: %v; want an unknown outcome", script, err)
	}
	if p.Lost() != 1 {
		t.Fatalf("the proxy dropped %d answers, want 1", p.Lost())
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.rdb.Exists(f.ctx, k.Reservation(closed.OrderNo)).Val() != 0 {
		t.Fatal("the restored reservation of the closed order is still there: the script did not run")
	}

	// The closer finishes the close's release: no hash, no credit.
	st, err := f.lifecycle().CloseExpired(f.ctx, time.Now().Add(5*time.Second), 100, nil)
	if err != nil || st.Finished != 1 {
		t.Fatalf("closer: %+v %v, want 1 release finished", st, err)
	}
	if _, it := f.check(CheckAndRepair); it.Verdict != Repaired {
		t.Fatalf("repair after the lost answer: %+v", it)
	}
	f.wantAgree(19)
	f.cancel(kept)
	f.wantAgree(20)
}
