package stockredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/domain/room"
)

// A buyer who joined a code_priority room with a code holds one use of it
// from the join: their order takes it over (the reservation records the
// code, no second use is taken), a 503's release gives the hold back to
// their place with the admission, and a release that ends the order
// gives the use back to the code. Another buyer's join with the code is
// refused while any of them holds it.
func TestLaneCodeUseMovesFromThePlaceToTheOrder(t *testing.T) {
	onSingleAndCluster(t, func(t *testing.T, s *stockredis.Store, rdb redis.UniversalClient, _ bool) {
		ctx := context.Background()
		r := newRoom(100, 1)
		buildRoom(t, s, r, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		warmSizes(t, s, 3, 3, 3)
		codes := s.Keys(sizes[0]).Codes(r.ActivityID)
		d := access.Digest("0123456789abcdef0123456789abcdef")
		if err := rdb.HSet(ctx, codes, access.LoadedField, "1", string(d), "1|").Err(); err != nil {
			t.Fatal(err)
		}
		left := func() string {
			t.Helper()
			v, err := rdb.HGet(ctx, codes, string(d)).Result()
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		at := roomStart.Add(time.Second)
		joinWith := func(user string) (room.Place, error) {
			p, err := s.Rooms.JoinRoom(ctx, r, user, room.Rank(room.Seed{}, user), d, at)
			if err == nil && p.Refused != nil {
				err = p.Refused
			}
			return p, err
		}
		if p, err := joinWith("holder"); err != nil || !p.Lane || p.LanePosition != 1 {
			t.Fatalf("the holder's join: %+v, %v; want first in the lane", p, err)
		}
		if p, err := joinWith("holder"); err != nil || !p.Lane || p.Added || left() != "0|" {
			t.Fatalf("the holder's join again: %+v, %v, code %q; want the same place and no second use", p, err, left())
		}
		if _, err := joinWith("other"); !errors.Is(err, access.ErrCodeUsed) {
			t.Fatalf("another buyer with the held code: %v, want ErrCodeUsed", err)
		}
		if st := advance(t, s, r, at); st.Lane != 1 || st.LaneNext != 1 || st.Admitted != 1 {
			t.Fatalf("advance: %+v, want the lane's holder admitted", st)
		}
		first := roomRes(sizes[0], "holder", "k1", 1, at)
		if _, err := s.Reservations.Reserve(ctx, first); err != nil {
			t.Fatal(err)
		}
		codeOf := func(no string) access.Digest {
			t.Helper()
			info, err := s.Reservations.Reservation(ctx, no)
			if err != nil {
				t.Fatal(err)
			}
			return info.Code
		}
		if got := codeOf(first.OrderNo); got != d || left() != "0|" {
			t.Fatalf("the holder's order: code %q, code's count %q; want the place's code and no second use", got, left())
		}
		// The api answered 503: admission and hold back to the place.
		if _, err := s.Reservations.Release(ctx, ref(first), reservation.ReleaseOptions{Reason: "PUBLISH_FAILED",
			From: []reservation.State{reservation.StateReserved}, FreeKey: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := joinWith("other"); !errors.Is(err, access.ErrCodeUsed) || left() != "0|" {
			t.Fatalf("after a 503: another buyer's join %v, count %q; want the use still the holder's", err, left())
		}
		retry := first
		retry.OrderNo = gen.Next(item)
		if _, err := s.Reservations.Reserve(ctx, retry); err != nil {
			t.Fatal(err)
		}
		if got := codeOf(retry.OrderNo); got != d {
			t.Fatalf("the retry's order: code %q, want the place's", got)
		}
		// Closed unpaid: the use goes back to the code, once.
		for range 2 {
			if _, err := s.Reservations.Release(ctx, ref(retry), reservation.ReleaseOptions{Reason: "UNPAID",
				From: []reservation.State{reservation.StateReserved}}); err != nil {
				t.Fatal(err)
			}
		}
		if left() != "1|" {
			t.Fatalf("after the order closed: %q, want the use back", left())
		}
		if p, err := joinWith("other"); err != nil || !p.Lane {
			t.Fatalf("another buyer with the code given back: %+v, %v", p, err)
		}
	})
}

// The lane's scripts with their answers lost at the wire: a join with a
// code run again takes no second use, and an advance that dropped an
// expired holder's admission, run again, gives the use back once.
func TestLaneLostAnswers(t *testing.T) {
	forBoth(t, func(t *testing.T, l lossy) {
		ctx := context.Background()
		r := newRoom(100, 1)
		r.Items = []reservation.Item{reservation.One(item)}
		buildRoom(t, l.direct, r, room.Image{Gen: 1}, roomStart.Add(-time.Minute))
		warm(t, l.direct, 5, 1)
		codes := l.direct.Keys(r.Items[0]).Codes(r.ActivityID)
		d := access.Digest("fedcba9876543210fedcba9876543210")
		if err := l.Direct.HSet(ctx, codes, access.LoadedField, "1", string(d), "2|").Err(); err != nil {
			t.Fatal(err)
		}
		left := func() string {
			t.Helper()
			v, err := l.Direct.HGet(ctx, codes, string(d)).Result()
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		at := roomStart.Add(time.Second)
		l.LoseNext("room_join")
		p, err := l.via.Rooms.JoinRoom(ctx, r, "holder", room.Rank(room.Seed{}, "holder"), d, at)
		if err != nil || !p.Lane || l.Lost() != 1 || left() != "1|" {
			t.Fatalf("a join with a code, its answer lost: %+v, %v (lost %d), code %q; want in the lane, one use taken", p, err, l.Lost(), left())
		}
		if st := advance(t, l.direct, r, at); st.LaneNext != 1 {
			t.Fatalf("advance: %+v, want the holder admitted", st)
		}
		// Past the admission's lifetime (2 min): the advance that drops it
		// gives the use back; its answer is lost, and it runs again.
		later := at.Add(3 * time.Minute)
		l.LoseNext("room_advance")
		if _, err := l.via.Rooms.AdvanceRoom(ctx, r, later, room.State{}); !stockredis.MayHaveRun(err) {
			t.Fatalf("advance with its answer lost: %v, want an unknown outcome", err)
		}
		advance(t, l.direct, r, later)
		if got := left(); got != "2|" {
			t.Fatalf("the code after the expiry, the advance run twice: %q, want its use back once (2|)", got)
		}
	})
}
