package waitingroom_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
	"github.com/seckill/seckill/pkg/service/waitingroom"
)

// A code_required room sale's join needs a code the buyer may use now:
// refused while the codes are not loaded, without a code, with one never
// given, bound to another buyer, or whose uses are held; a join with a
// usable code gets a place and uses nothing (Redis's count and MySQL's
// are unchanged: the order uses it).
func TestJoinChecksTheCode(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	ctx := context.Background()
	a := roomSale(t, p, 5, time.Now().Add(-time.Minute).Truncate(time.Millisecond))
	a.Access = access.CodeRequired
	if err := p.DB.Gorm().Exec("UPDATE activities SET access = 'code_required' WHERE id = ?", a.ID).Error; err != nil {
		t.Fatal(err)
	}
	key := []byte("room codes test key")
	svc := waitingroom.New(p.Store.Rooms, p.DB.Rooms, slog.New(slog.DiscardHandler), time.Now)
	svc.Codes, svc.CodeKey = p.Store.Stock.Codes(), key
	codesKey := p.Store.Keys(reservation.One(a.ItemID)).Codes(a.ID)
	put := func(code string, c access.Code) access.Code {
		n, _ := access.Normalize(code)
		c.Digest = access.Hash(key, a.ID, n)
		if err := p.DB.Gorm().Exec("INSERT INTO sale_codes (activity_id, digest, uses, used, subject, created_at) VALUES (?, ?, ?, ?, NULLIF(?, ''), NOW(3))",
			a.ID, string(c.Digest), c.Uses, c.Used, c.Subject).Error; err != nil {
			t.Fatal(err)
		}
		if err := p.Redis.HSet(ctx, codesKey, string(c.Digest), c.RedisValue()).Err(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	join := func(user, code string) error {
		_, err := svc.Queue(ctx, a, user, true, func() (waitingroom.Work, error) { return waitingroom.Work{AccessCode: code}, nil })
		return err
	}
	good := put("GOOD-CODE", access.Code{Uses: 1})
	put("MINE-ONLY", access.Code{Uses: 1, Subject: "u9"})
	put("ALL-USED", access.Code{Uses: 1, Used: 1})
	if err := join("u1", "GOOD-CODE"); !errors.Is(err, order.ErrNotWarmed) {
		t.Fatalf("codes not loaded: %v, want ErrNotWarmed", err)
	}
	if err := p.Redis.HSet(ctx, codesKey, access.LoadedField, "1").Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, user, code string
		want             error
	}{
		{"no code", "u1", "", access.ErrCodeRequired},
		{"not a code", "u1", "x!", access.ErrCodeInvalid},
		{"never given", "u1", "NO-SUCH-CODE", access.ErrCodeInvalid},
		{"bound to another buyer", "u1", "MINE-ONLY", access.ErrCodeInvalid},
		{"every use held", "u1", "ALL-USED", access.ErrCodeUsed},
	} {
		if err := join(c.user, c.code); !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := svc.Queue(ctx, a, "u1", false, nil); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("u1 after the refusals: %v, want not in the room", err)
	}
	for _, u := range []string{"u1", "u2"} {
		if err := join(u, "good code"); err != nil {
			t.Fatalf("%s with a usable code: %v", u, err)
		}
	}
	if err := join("u9", "MINE-ONLY"); err != nil {
		t.Fatalf("u9 with its own code: %v", err)
	}
	if v, err := p.Redis.HGet(ctx, codesKey, string(good.Digest)).Result(); err != nil || v != "1|" {
		t.Fatalf("the code in Redis after the joins: %q, %v; want 1| (none used)", v, err)
	}
	if n := p.Count("SELECT used FROM sale_codes WHERE digest = ?", string(good.Digest)); n != 0 {
		t.Fatalf("MySQL's used after the joins: %d, want 0", n)
	}
}
