package stockredis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// hostileSubjects are user ids an identity provider may write, or a buyer
// may try to choose, that would break keys if embedded raw: another item's
// hash tag, separators that shift the key's parts, glob characters, the
// numeric form of another user, and 128 characters.
func hostileSubjects(item int64) []string {
	return []string{
		"1", "01", "+1", " 1", "1 ", // the number 1 and strings that only look like it
		fmt.Sprintf("{i%d}", item+1), "}{", "{", "a:b", "q:7:1", "7:1", "k:1:x", "*", "[a-z]?", "~", "~MQ",
		"auth0|65ab12", "f3a1c9e2-7d4b-4c1e-9a63-2b8f0e5d7c41", "ユーザー",
		strings.Repeat("{:}", 42) + "xy", // 128 characters
	}
}

func TestUserSegment(t *testing.T) {
	seen := map[string]string{}
	for _, u := range hostileSubjects(42) {
		seg := stockredis.UserSegment(u)
		if strings.ContainsAny(seg, "{}:*?[] \\") {
			t.Errorf("segment of %q is %q: holds a character keys must not", u, seg)
		}
		if other, dup := seen[seg]; dup {
			t.Errorf("%q and %q share the segment %q", u, other, seg)
		}
		seen[seg] = u
		back, ok := stockredis.ParseUserSegment(seg)
		if !ok || back != u {
			t.Errorf("ParseUserSegment(%q) = %q, %v; want %q", seg, back, ok, u)
		}
	}
	// Numeric ids keep the keys they had before ids were strings.
	if seg := stockredis.UserSegment("1001"); seg != "1001" {
		t.Errorf("segment of 1001 is %q", seg)
	}
	for _, bad := range []string{"", "~", "~!!", "01", "a", "~MTAwMQ" /* "1001" encoded: never written */} {
		if u, ok := stockredis.ParseUserSegment(bad); ok {
			t.Errorf("ParseUserSegment(%q) = %q, want not a segment", bad, u)
		}
	}
}

// Each hostile subject is its own buyer: one reservation each, a second
// attempt is ALREADY_PURCHASED, a replayed key returns the buyer's own
// order, every key stays under the item's hash tag, and the reconciler's
// scan reads each quota back under the right user.
func TestHostileSubjectsKeepTheirOwnKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	runHostileSubjects(t, ctx, rdb, prefix)
}

func TestHostileSubjectsOnRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.NewCluster(t)
	runHostileSubjects(t, ctx, rdb, prefix)
}

func runHostileSubjects(t *testing.T, ctx context.Context, rdb redis.UniversalClient, prefix string) {
	s := stockredis.New(rdb, prefix)
	subjects := hostileSubjects(item)
	if _, err := s.Stock.Warmup(ctx, reservation.One(item), time.Hour, func(context.Context) (int64, error) { return 100, nil }); err != nil {
		t.Fatal(err)
	}
	orders := map[string]string{}
	for _, u := range subjects {
		r := reservation.Reservation{OrderNo: gen.Next(item), UserID: u, ItemID: item, ActivityID: 7, Quantity: 1,
			IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour}
		got, err := s.Reservations.Reserve(ctx, r)
		if err != nil || got.Duplicate || got.OrderNo != r.OrderNo {
			t.Fatalf("user %q: %+v %v; want a new reservation (another user's keys taken for its own?)", u, got, err)
		}
		orders[u] = r.OrderNo
	}
	for _, u := range subjects {
		again := reservation.Reservation{OrderNo: gen.Next(item), UserID: u, ItemID: item, ActivityID: 7, Quantity: 1,
			IdempotencyKey: "k", At: time.Now(), QuotaTTL: time.Hour, ReservationTTL: time.Hour}
		if got, err := s.Reservations.Reserve(ctx, again); err != nil || !got.Duplicate || got.OrderNo != orders[u] {
			t.Fatalf("user %q replaying its key: %+v %v, want its own order %s", u, got, err, orders[u])
		}
		again.OrderNo, again.IdempotencyKey = gen.Next(item), "k2"
		if got, err := s.Reservations.Reserve(ctx, again); !errors.Is(err, order.ErrAlreadyPurchased) || got.OrderNo != orders[u] {
			t.Fatalf("user %q buying again: %+v %v, want ALREADY_PURCHASED holding %s", u, got, err, orders[u])
		}
		info, err := s.Reservations.Reservation(ctx, orders[u])
		if err != nil || info.UserID != u {
			t.Fatalf("reservation of %q: %+v %v", u, info, err)
		}
	}
	if snap, err := s.Stock.Stock(ctx, reservation.One(item)); err != nil || snap.Stock != int64(100-len(subjects)) || snap.Inflight != int64(len(subjects)) {
		t.Fatalf("stock %+v %v, want %d sold", snap, err, len(subjects))
	}
	holders, err := s.Reconciler.QuotaHolders(ctx, item, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(holders) != len(subjects) {
		t.Fatalf("reconciler read %d quota holders, want %d: %v", len(holders), len(subjects), holders)
	}
	for _, u := range subjects {
		if holders[u] != orders[u] {
			t.Fatalf("reconciler read %q's quota as %q, want %s", u, holders[u], orders[u])
		}
	}
	// Every key lives under the item's one hash tag: the first {...} of
	// each key is the item's.
	tag := fmt.Sprintf("{i%d}", item)
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		return iter.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu = make(chan struct{}, 1)
		mu <- struct{}{}
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			<-mu
			defer func() { mu <- struct{}{} }()
			return scan(ctx, c)
		})
	} else {
		err = scan(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k == prefix+":items" {
			continue // the set of warmed items, no user's
		}
		i, j := strings.Index(k, "{"), strings.Index(k, "}")
		if i < 0 || j < i || k[i:j+1] != tag || strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
			t.Errorf("key %q is not under the item's tag %s alone", k, tag)
		}
	}
	// Releasing one user frees that user's quota only.
	victim := subjects[0]
	rel, err := s.Reservations.Release(ctx, reservation.Ref{OrderNo: orders[victim], UserID: victim, ItemID: item, ActivityID: 7, IdempotencyKey: "k"}, reservation.ReleaseOptions{Reason: order.ReasonPublishFailed, From: []reservation.State{reservation.StateReserved}, FreeKey: true})
	if err != nil || !rel.Released {
		t.Fatalf("release: %v %v", rel.Released, err)
	}
	holders, err = s.Reconciler.QuotaHolders(ctx, item, 7)
	if err != nil || len(holders) != len(subjects)-1 || holders[victim] != "" {
		t.Fatalf("after releasing %q: %v %v", victim, holders, err)
	}
}
