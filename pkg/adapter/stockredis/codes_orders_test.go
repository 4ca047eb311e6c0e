package stockredis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// codesKey is the codes hash of the tests' activity (7) of item.
func codesKey(s *stockredis.Store) string { return s.Keys(reservation.One(item)).Codes(7) }

// loadCodes writes the sale's codes as the contract's loader does: each
// code's field, then the loaded marker.
func loadCodes(t *testing.T, rdb redis.UniversalClient, s *stockredis.Store, codes ...access.Code) {
	t.Helper()
	ctx := context.Background()
	for _, c := range codes {
		if err := rdb.HSetNX(ctx, codesKey(s), string(c.Digest), c.RedisValue()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.HSet(ctx, codesKey(s), access.LoadedField, "1").Err(); err != nil {
		t.Fatal(err)
	}
}

// wantLeft fails unless the code's field in Redis is "<left>|<subject>".
func wantLeft(t *testing.T, rdb redis.UniversalClient, s *stockredis.Store, c access.Code, left int) {
	t.Helper()
	got, err := rdb.HGet(context.Background(), codesKey(s), string(c.Digest)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(left) + "|" + c.Subject; got != want {
		t.Fatalf("code %s is %q in Redis, want %q", c.Digest[:6], got, want)
	}
}

func digest(code string) access.Digest { return access.Hash([]byte("test key"), 7, code) }

func withCode(r reservation.Reservation, c access.Code) reservation.Reservation {
	r.Code = c.Digest
	return r
}

func newCodeStore(t *testing.T, stock int64) (*stockredis.Store, redis.UniversalClient) {
	t.Helper()
	rdb, prefix := redistest.New(t)
	s := stockredis.New(rdb, prefix)
	if _, err := s.Stock.Warmup(context.Background(), reservation.One(item), time.Hour, func(context.Context) (int64, error) { return stock, nil }); err != nil {
		t.Fatal(err)
	}
	return s, rdb
}

// Each refusal of a code, in the script's order: after the idempotency
// record and the quota, before the stock; a refusal takes nothing.
func TestReserveChecksTheCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	two := access.Code{Digest: digest("TWOUSES"), Uses: 2}
	mine := access.Code{Digest: digest("MINE"), Uses: 1, Subject: "1"}
	gone := access.Code{Digest: digest("GONE"), Uses: 1, Used: 1}
	unknown := access.Code{Digest: digest("NEVERLOADED"), Uses: 1}

	s, rdb := newCodeStore(t, 3)
	first := withCode(res(1, "k1", 1), two)
	if _, err := s.Reservations.Reserve(ctx, first); !errors.Is(err, order.ErrNotWarmed) {
		t.Fatalf("codes not loaded: %v, want ErrNotWarmed", err)
	}
	loadCodes(t, rdb, s, two, mine, gone)
	steps := []struct {
		name    string
		r       reservation.Reservation
		wantErr error
	}{
		{"a code never loaded", withCode(res(2, "k", 1), unknown), access.ErrCodeInvalid},
		{"another buyer's code", withCode(res(2, "k", 1), mine), access.ErrCodeInvalid},
		{"a code with no use left", withCode(res(2, "k", 1), gone), access.ErrCodeUsed},
		{"short stock with a good code", withCode(res(2, "k", 4), two), order.ErrSoldOut},
		{"the buyer's own code", withCode(res(1, "k0", 1), mine), nil},
		{"a shared code", withCode(res(2, "k2", 1), two), nil},
		{"a retried key uses no second code", withCode(res(2, "k2", 1), two), nil},
		{"the quota before the code", withCode(res(2, "k3", 1), gone), order.ErrAlreadyPurchased},
	}
	for _, st := range steps {
		if _, err := s.Reservations.Reserve(ctx, st.r); !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: err = %v, want %v", st.name, err, st.wantErr)
		}
	}
	wantLeft(t, rdb, s, two, 1)
	wantLeft(t, rdb, s, mine, 0)
	wantLeft(t, rdb, s, gone, 0)
	if snap := snapshot(t, s); snap.Stock != 1 || snap.Inflight != 2 {
		t.Fatalf("snapshot %+v, want stock 1 in flight 2", snap)
	}
}

// A release gives the code's use back once, however often it runs; the
// consumer's release of an order MySQL refused for its code gives none.
func TestReleaseGivesTheCodeBackOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := access.Code{Digest: digest("ONCEONLY"), Uses: 1}
	s, rdb := newCodeStore(t, 5)
	loadCodes(t, rdb, s, c)
	from := []reservation.State{reservation.StateReserved, reservation.StateClaimed, reservation.StateConfirmed}

	r := withCode(res(1, "k1", 1), c)
	if _, err := s.Reservations.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Reservations.Reservation(ctx, r.OrderNo); err != nil || info.Code != c.Digest {
		t.Fatalf("reservation %+v, %v: want its code recorded", info, err)
	}
	wantLeft(t, rdb, s, c, 0)
	for range 3 {
		if _, err := s.Reservations.Release(ctx, ref(r), reservation.ReleaseOptions{Reason: order.ReasonPaymentTimeout, From: from}); err != nil {
			t.Fatal(err)
		}
	}
	wantLeft(t, rdb, s, c, 1)

	for _, reason := range []string{order.ReasonCodeUsed, order.ReasonCodeInvalid} {
		r := withCode(res(2, "k-"+reason, 1), c)
		if _, err := s.Reservations.Reserve(ctx, r); err != nil {
			t.Fatalf("%s: %v", reason, err)
		}
		if rel, err := s.Reservations.Release(ctx, ref(r), reservation.ReleaseOptions{Reason: reason, From: from}); err != nil || !rel.Released {
			t.Fatalf("%s: release %+v, %v", reason, rel, err)
		}
		wantLeft(t, rdb, s, c, 0)
		// The use is MySQL's to give back; bring it back as a loader would.
		if err := rdb.HSet(ctx, codesKey(s), string(c.Digest), "1|").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if snap := snapshot(t, s); snap.Stock != 5 || snap.Inflight != 0 {
		t.Fatalf("snapshot %+v, want the units all back", snap)
	}

	// A code revoked while an order held it stays gone after the release.
	r = withCode(res(3, "k3", 1), c)
	if _, err := s.Reservations.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HDel(ctx, codesKey(s), string(c.Digest)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reservations.Release(ctx, ref(r), reservation.ReleaseOptions{Reason: order.ReasonCancelled, From: from}); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.HExists(ctx, codesKey(s), string(c.Digest)).Result(); err != nil || n {
		t.Fatalf("a revoked code came back: %v, %v", n, err)
	}
}

// Buyers racing for one single-use code (and for a 3-use one), in the
// batches concurrency makes: exactly as many reserve as the code has uses.
func TestCodeRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, uses := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d uses", uses), func(t *testing.T) {
			t.Parallel()
			c := access.Code{Digest: digest("RACE" + strconv.Itoa(uses)), Uses: uses}
			s, rdb := newCodeStore(t, 100)
			loadCodes(t, rdb, s, c)
			const buyers = 64
			var wg sync.WaitGroup
			var mu sync.Mutex
			won, used := 0, 0
			for u := range buyers {
				wg.Go(func() {
					_, err := s.Reservations.Reserve(ctx, withCode(res(int64(u+1), "k", 1), c))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						won++
					case errors.Is(err, access.ErrCodeUsed):
						used++
					default:
						t.Errorf("buyer %d: %v", u, err)
					}
				})
			}
			wg.Wait()
			if won != uses || used != buyers-uses {
				t.Fatalf("%d reserved and %d heard CODE_USED, want %d and %d", won, used, uses, buyers-uses)
			}
			wantLeft(t, rdb, s, c, 0)
			if snap := snapshot(t, s); snap.Stock != int64(100-uses) || snap.Inflight != int64(uses) {
				t.Fatalf("snapshot %+v", snap)
			}
		})
	}
}

// A bucketed item: the code is checked in the run that records the
// reservation, and a refused code's units go back to their bucket.
func TestCodeOnABucketedItem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	s := stockredis.New(rdb, prefix)
	warm(t, s, 8, 4)
	c := access.Code{Digest: digest("BUCKETS"), Uses: 1}
	loadCodes(t, rdb, s, c)
	r := withCode(res(1, "k1", 1), c)
	r.Buckets = 4
	if _, err := s.Reservations.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	again := withCode(res(2, "k2", 1), c)
	again.Buckets = 4
	if _, err := s.Reservations.Reserve(ctx, again); !errors.Is(err, access.ErrCodeUsed) {
		t.Fatalf("a used code on a bucketed item: %v", err)
	}
	wantLeft(t, rdb, s, c, 0)
	if snap := snapshot(t, s); snap.Stock != 7 || snap.Inflight != 1 {
		t.Fatalf("snapshot %+v, want 7 units left in the buckets and 1 in flight", snap)
	}
	if _, err := s.Reservations.Release(ctx, ref(r), reservation.ReleaseOptions{Reason: order.ReasonCancelled, From: []reservation.State{reservation.StateReserved}}); err != nil {
		t.Fatal(err)
	}
	wantLeft(t, rdb, s, c, 1)
	if snap := snapshot(t, s); snap.Stock != 8 || snap.Inflight != 0 {
		t.Fatalf("snapshot %+v after the release", snap)
	}
}

// The reserve's answer is lost while it used a code: it ran once (one use
// taken); the API's release gives the use back, and a repeated release
// (its answer lost too) gives it back only once.
func TestLostReplyReserveWithCode(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		ctx := context.Background()
		warm(t, l.direct, 5, 1)
		c := access.Code{Digest: digest("LOSTANSWER"), Uses: 2}
		loadCodes(t, l.Direct, l.direct, c)
		r := withCode(res(1, "k1", 1), c)
		l.LoseNext("reserve")
		_, err := l.via.Reservations.Reserve(ctx, r)
		mustBeUnknown(t, l, "reserve", err)
		wantLeft(t, l.Direct, l.direct, c, 1) // ran exactly once
		opts := reservation.ReleaseOptions{Reason: order.ReasonReserveFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true}
		l.LoseNext("release")
		if _, err := l.via.Reservations.Release(ctx, ref(r), opts); err == nil || !stockredis.MayHaveRun(err) {
			t.Fatalf("release with its answer lost: %v", err)
		}
		if rel, err := l.via.Reservations.Release(ctx, ref(r), opts); err != nil || !rel.Gone() {
			t.Fatalf("the repeated release: %+v, %v", rel, err)
		}
		wantLeft(t, l.Direct, l.direct, c, 2)
		wantStock(t, l.direct, 5, 0)
	})
}

// Invalid codes are counted per buyer in the sale and per address, in a
// window from the first.
func TestGuesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb := newCodeStore(t, 1)
	it := reservation.One(item)
	buyer, addr := access.GuessLimit{Max: 3, Per: time.Minute}, access.GuessLimit{Max: 5, Per: 2 * time.Minute}
	for range 2 {
		if err := s.Reservations.Guessed(ctx, it, 7, "u1", "192.0.2.1", buyer, addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Reservations.Guessed(ctx, it, 7, "u2", "192.0.2.1", buyer, addr); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, addr     string
		byUser, byAddr int64
	}{{"u1", "192.0.2.1", 2, 3}, {"u2", "192.0.2.1", 1, 3}, {"u3", "192.0.2.9", 0, 0}} {
		b, a, err := s.Reservations.Guesses(ctx, it, 7, c.user, c.addr)
		if err != nil || b != c.byUser || a != c.byAddr {
			t.Fatalf("%s at %s: %d, %d, %v; want %d, %d", c.user, c.addr, b, a, err, c.byUser, c.byAddr)
		}
	}
	all, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, k := range all {
		var most time.Duration
		switch {
		case strings.Contains(k, ":guess:"):
			most = addr.Per
		case strings.Contains(k, ":g:7:"):
			most = buyer.Per
		default:
			continue
		}
		seen++
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 || ttl > most {
			t.Fatalf("%s: ttl %v, want up to %v", k, ttl, most)
		}
	}
	if seen != 3 {
		t.Fatalf("%d guess counters, want 3 (two buyers, one address)", seen)
	}
}
